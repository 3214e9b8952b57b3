// Shell completion (cli/completion.ts): `__complete` answers from the commands' own
// definitions, so every option each command parses is offered and nothing else; commands,
// lab subcommands, bmc actions, -o values, --context names from the kubeconfig; the Cobra
// protocol's last line (:4 no file names, :0 file names for --kubeconfig); the scripts of
// `completion bash|zsh`; bin/kubectl_complete-fastfence as kubectl runs it. No servers.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { commandLines, complete, completionScript, DIRECTIVE } from "../../../cli/completion.ts";
import { EXIT } from "../../../cli/exit-codes.ts";
import { COMMANDS } from "../../../cli/main.ts";
import { COMMAND_CASES, fastfence, ROOT } from "./cli-helpers.ts";

const T = { timeout: 30_000 };
const dir = mkdtempSync(join(tmpdir(), "fastfence-completion-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const KC = join(dir, "kubeconfig");
writeFileSync(
  KC,
  "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts:\n- name: prod\n  context: {cluster: c, user: u}\n- name: lab\n  context: {cluster: c, user: u}\n",
);

const run = async (...words: string[]) => complete(await commandLines(), words, {});

describe("__complete", T, () => {
  it("knows every command of cli/main.ts", async () => {
    expect(Object.keys(await commandLines()).sort()).toEqual(Object.keys(COMMANDS).sort());
    expect((await run("")).candidates.sort()).toEqual([...Object.keys(COMMANDS), "help"].sort());
    expect(await run("pa")).toEqual({ candidates: ["pause"], directive: DIRECTIVE.noFileComp });
  });

  it.each(
    Object.values(COMMAND_CASES)
      .flat()
      .map((c) => [c.words.join(" "), c] as const),
  )("fastfence %s --<TAB> offers exactly the options its parser takes", async (_, c) => {
    const got = (await run(...c.words, "--")).candidates;
    expect(got.sort()).toEqual(
      [...Object.keys(c.spec.options), "help", "output"].map((o) => `--${o}`).sort(),
    );
  });

  it("subcommands, actions and fixed values", async () => {
    expect((await run("lab", "")).candidates).toEqual(
      expect.arrayContaining(["up", "down", "crash", "fn-crash"]),
    );
    expect((await run("bmc", "")).candidates).toEqual(["status", "off", "on", "check"]);
    expect((await run("bmc", "status", "")).candidates).toEqual([]);
    expect((await run("lab", "up", "--bmc", "")).candidates).toEqual(["mixed", "ipmi", "redfish"]);
    expect((await run("run", "-o", "")).candidates).toEqual(["json"]);
    expect((await run("trace", "node-a", "-o", "y")).candidates).toEqual(["yaml"]);
    expect((await run("completion", "")).candidates).toEqual(["bash", "zsh"]);
    expect((await run("run", "")).candidates).toContain("confirm");
    expect((await run("help", "rel")).candidates).toEqual(["release-slot"]);
  });

  it("the global flags before the command, and --context names from the kubeconfig named", async () => {
    expect((await run("-")).candidates.sort()).toEqual([
      "--context",
      "--help",
      "--kubeconfig",
      "--namespace",
      "-h",
      "-n",
    ]);
    expect((await run("--kubeconfig", KC, "--context", "")).candidates).toEqual(["prod", "lab"]);
    expect((await run("--context", "prod", "pau")).candidates).toEqual(["pause"]);
    expect((await run("fence", "node-a", "--kubeconfig", KC, "--context", "p")).candidates).toEqual(["prod"]);
    expect(
      (await complete(await commandLines(), ["pause", "--context", ""], { KUBECONFIG: KC })).candidates,
    ).toEqual(["prod", "lab"]);
  });

  it("file names for --kubeconfig (directive 0), none elsewhere (4)", async () => {
    expect(await run("pause", "--kubeconfig", "")).toEqual({ candidates: [], directive: DIRECTIVE.default });
    expect((await run("nosuch", "")).directive).toBe(DIRECTIVE.noFileComp);
  });

  it("fastfence __complete prints Cobra's protocol", async () => {
    const r = await fastfence(["__complete", "bmc", "o"]);
    expect(r.status).toBe(EXIT.ok);
    expect(r.stdout).toBe("off\non\n:4\n");
  });
});

describe("completion bash|zsh", T, () => {
  it("prints a script that calls __complete; bash parses it", async () => {
    for (const shell of ["bash", "zsh"] as const) {
      const r = await fastfence(["completion", shell]);
      expect(r.status, r.stderr).toBe(EXIT.ok);
      expect(r.stdout.trimEnd()).toBe(completionScript(shell).trimEnd());
      expect(r.stdout).toContain("__complete");
    }
    const bash = spawnSync("bash", ["-n"], { input: completionScript("bash"), encoding: "utf8" });
    expect(bash.status, bash.stderr).toBe(0);
    const bad = await fastfence(["completion", "fish"]);
    expect(bad.status).toBe(EXIT.usage);
    expect(bad.stderr).toContain('no completion for "fish"');
  });

  it("the bash script completes through a real bash", () => {
    const script = `${completionScript("bash")}
fastfence() { node --disable-warning=ExperimentalWarning "${ROOT}cli/main.ts" "$@"; }
COMP_WORDS=(fastfence lab bmc-fault node-a --fault s); COMP_CWORD=5
_fastfence; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const r = spawnSync("bash", ["-c", script], { encoding: "utf8", timeout: 20_000 });
    expect(r.stdout.trim().split("\n").sort(), r.stderr).toEqual(["slow", "stuck"]);
  });

  it("bin/kubectl_complete-fastfence answers as kubectl expects", () => {
    const r = spawnSync(`${ROOT}bin/kubectl_complete-fastfence`, ["lab", "up", "--b"], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe("--bmc\n--baseline\n:4\n");
  });
});
