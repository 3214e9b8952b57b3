// `fastfence --help` lists every command and every exit code; each command's --help lists
// each flag it parses; docs/cli.md carries the same exit-code table as cli/exit-codes.ts.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EXIT, EXIT_CODES } from "../../../cli/exit-codes.ts";
import { COMMANDS, HELP } from "../../../cli/main.ts";
import { cli, COMMAND_CASES, fastfence, ROOT } from "./cli-helpers.ts";

const T = { timeout: 60_000 };

describe("fastfence --help", T, () => {
  it("lists every command, lab included, and every exit code", () => {
    const r = cli(["--help"]);
    expect(r.status).toBe(EXIT.ok);
    expect(r.stdout.trim()).toBe(HELP);
    const commands = HELP.slice(HELP.indexOf("Commands:"), HELP.indexOf("\n\n", HELP.indexOf("Commands:")));
    for (const name of Object.keys(COMMANDS)) expect(commands).toMatch(new RegExp(`^  ${name}\\b`, "m"));
    const codes = HELP.slice(HELP.indexOf("Exit codes:")).replace(/\n {5}/g, " ");
    for (const e of EXIT_CODES) expect(codes).toContain(`  ${e.code}  ${e.meaning}`);
  });
});

describe("each command's --help lists its flags", T, () => {
  it.each(Object.entries(COMMAND_CASES))("fastfence %s --help", async (name, cases) => {
    const r = await fastfence([name, "--help"]);
    expect(r.status, r.stderr).toBe(EXIT.ok);
    expect(r.stdout).toContain("-o, --output");
    expect(r.stdout).toContain("-h, --help");
    for (const c of cases) {
      for (const opt of Object.keys(c.spec.options))
        expect(r.stdout, c.words.join(" ")).toContain(`--${opt}`);
      if (c.spec.legacyJson) expect(r.stdout).toMatch(/--json +deprecated/);
      if (name === "lab") expect(r.stdout).toMatch(new RegExp(`^  (.*\\| )?${c.words[1]} `, "m"));
    }
  });

  it("help <command> and lab <sub> --help print the same", async () => {
    expect((await fastfence(["help", "trace"])).stdout).toBe((await fastfence(["trace", "--help"])).stdout);
    expect((await fastfence(["lab", "crash", "--help"])).stdout).toBe(
      (await fastfence(["lab", "--help"])).stdout,
    );
  });
});

describe("docs", T, () => {
  it("docs/cli.md has the exit-code table of cli/exit-codes.ts", () => {
    const doc = readFileSync(`${ROOT}docs/cli.md`, "utf8");
    for (const e of EXIT_CODES) expect(doc).toContain(`| ${e.code} | ${e.meaning} |`);
    expect(Object.values(EXIT).sort()).toEqual(EXIT_CODES.map((e) => e.code).sort());
  });

  it("README's Using it section points at docs/cli.md", () => {
    const readme = readFileSync(`${ROOT}README.md`, "utf8");
    const using = readme.slice(
      readme.indexOf("## Using it"),
      readme.indexOf("\n## ", readme.indexOf("## Using it") + 1),
    );
    expect(using).toContain("docs/cli.md");
    expect(using).toContain("-o text|json|yaml");
  });
});
