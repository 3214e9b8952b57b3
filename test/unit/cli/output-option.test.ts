// Every `fastfence` command takes -o/--output: the option layer of each command (and lab
// subcommand) accepts -o json; commands that work offline print documents that parse as
// JSON or YAML; the deprecated --json / --format table still work and warn once on stderr.
// No servers: the BMC case talks to a closed loopback port.
import { load } from "js-yaml";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ParseArgsOptionsConfig } from "node:util";
import { parseCommand, UsageError, type CommandSpec } from "../../../cli/args.ts";
import { EXIT } from "../../../cli/exit-codes.ts";
import { COMMANDS } from "../../../cli/main.ts";
import { RUN_ARGS } from "../../../cli/run.ts";
import { SOURCE_ARGS } from "../../../cli/source.ts";
import { TRACE_ARGS } from "../../../cli/trace.ts";
import { CATALOG } from "../../../events/catalog.ts";
import { cli, COMMAND_CASES, fastfence } from "./cli-helpers.ts";

const T = { timeout: 60_000 };
const positionalsOf = (words: string[]) => words.slice(words[0] === "lab" ? 2 : 1);

afterEach(() => vi.restoreAllMocks());

describe("the option layer of every command accepts -o json", T, () => {
  it("every command of cli/main.ts has a case here", () => {
    expect(Object.keys(COMMAND_CASES).sort()).toEqual(Object.keys(COMMANDS).sort());
  });

  const cases = Object.values(COMMAND_CASES).flat();
  it.each(cases.map((c) => [c.words.join(" "), c] as const))("%s", (_, c) => {
    const pos = positionalsOf(c.words);
    for (const argv of [
      [...pos, "-o", "json"],
      [...pos, "--output", "json"],
      [...pos, "--output=json"],
      ["-ojson", ...pos],
    ]) {
      const p = parseCommand(c.spec, argv);
      expect(p.output, argv.join(" ")).toBe("json");
      expect(p.outputGiven).toBe(true);
      expect(p.positionals).toEqual(pos);
    }
    expect(parseCommand(c.spec, pos).outputGiven).toBe(false);
  });

  it("run and source log JSON lines: json is their default and only format", () => {
    const cases: [CommandSpec<ParseArgsOptionsConfig>, string[]][] = [
      [RUN_ARGS, ["detect"]],
      [SOURCE_ARGS, []],
    ];
    for (const [spec, pos] of cases) {
      expect(parseCommand(spec, [...pos]).output).toBe("json");
      expect(() => parseCommand(spec, [...pos, "-o", "text"])).toThrow(UsageError);
    }
  });
});

describe("offline commands print parseable documents", T, () => {
  it("events catalog -o json (a real process) / -o yaml", async () => {
    const json = cli(["events", "catalog", "-o", "json"]);
    expect(json.status, json.stderr).toBe(EXIT.ok);
    const entries = JSON.parse(json.stdout) as { type: string; topic: string }[];
    expect(entries.map((e) => e.type).sort()).toEqual(Object.keys(CATALOG).sort());
    const yaml = await fastfence(["events", "catalog", "--output", "yaml"]);
    expect(yaml.status, yaml.stderr).toBe(EXIT.ok);
    expect(load(yaml.stdout)).toEqual(entries);
  });

  it("events catalog --format asyncapi: json by default, yaml on request", async () => {
    const json = await fastfence(["events", "catalog", "--format", "asyncapi"]);
    expect(json.status, json.stderr).toBe(EXIT.ok);
    const doc = JSON.parse(json.stdout) as { asyncapi: string };
    expect(doc.asyncapi).toMatch(/^3\./);
    expect(
      JSON.parse((await fastfence(["events", "catalog", "--format", "asyncapi", "-o", "json"])).stdout),
    ).toEqual(doc);
    const yaml = await fastfence(["events", "catalog", "--format", "asyncapi", "-o", "yaml"]);
    expect(yaml.status, yaml.stderr).toBe(EXIT.ok);
    expect(load(yaml.stdout)).toEqual(doc);
  });

  it("version -o json / -o yaml / text", async () => {
    const json = JSON.parse((await fastfence(["version", "-o", "json"])).stdout) as {
      fastfence: string;
      node: string;
    };
    expect(json.node).toBe(process.versions.node);
    expect(load((await fastfence(["version", "-o", "yaml"])).stdout)).toEqual(json);
    expect((await fastfence(["version"])).stdout.trim()).toBe(
      `fastfence ${json.fastfence} (node ${json.node})`,
    );
  });

  it("bmc -o json prints one document also when the BMC is unreachable (exit 1)", async () => {
    const env = { FASTFENCE_BMC_USERNAME: "u", FASTFENCE_BMC_PASSWORD: "p" };
    const argv = [
      "bmc",
      "status",
      "--url",
      "redfish+http://127.0.0.1:1/redfish/v1/Systems/1",
      "--insecure",
      "--timeout-ms",
      "1000",
    ];
    const r = await fastfence([...argv, "-o", "json"], env);
    expect(r.status, r.stderr).toBe(EXIT.failed);
    const doc = JSON.parse(r.stdout) as { ok: boolean; action: string; code: string };
    expect(doc).toMatchObject({ ok: false, action: "status", code: "FF_BMC_UNREACHABLE" });
    const y = await fastfence([...argv, "-o", "yaml"], env);
    expect(y.status).toBe(EXIT.failed);
    expect(load(y.stdout)).toMatchObject({ ok: false, code: "FF_BMC_UNREACHABLE" });
  });

  it("bmc: plain HTTP only with --insecure, and then shown as insecure", async () => {
    const env = { FASTFENCE_BMC_USERNAME: "u", FASTFENCE_BMC_PASSWORD: "p" };
    const url = "redfish+http://127.0.0.1:1/redfish/v1/Systems/1";
    const refused = await fastfence(["bmc", "check", "--url", url, "--timeout-ms", "1000"], env);
    expect(refused.status).toBe(EXIT.usage);
    expect(refused.stderr).toContain(
      "--url (redfish+http://127.0.0.1:1/redfish/v1/Systems/1) uses plain HTTP",
    );
    expect(refused.stderr).toContain("--insecure");
    const allowed = await fastfence(
      ["bmc", "check", "--url", url, "--insecure", "--timeout-ms", "1000", "-o", "json"],
      env,
    );
    expect(JSON.parse(allowed.stdout)).toMatchObject({ ok: false, insecure: ["plain-http"] });
    const text = await fastfence(["bmc", "check", "--url", url, "--insecure", "--timeout-ms", "1000"], env);
    expect(text.stderr).toMatch(/FF_BMC_UNREACHABLE.*INSECURE: plain HTTP/);
  });

  it("trace -o json gets past the option layer (then needs Kafka: exit 2 naming --brokers)", async () => {
    const r = await fastfence(["trace", "node-a", "-o", "json"]);
    expect(r.status).toBe(EXIT.usage);
    expect(r.stderr).toContain("--brokers");
    expect(r.stderr).not.toContain("-o");
  });
});

describe("deprecated aliases", T, () => {
  it("--json = -o json, with one warning on stderr", () => {
    const warn = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const p = parseCommand(TRACE_ARGS, ["node-a", "--json"]);
    expect(p.output).toBe("json");
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]![0])).toMatch(/--json is deprecated.*-o json/);
    expect(() => parseCommand(TRACE_ARGS, ["node-a", "--json", "-o", "text"])).toThrow(UsageError);
  });

  it("bmc --json prints what -o json prints", async () => {
    const env = { FASTFENCE_BMC_USERNAME: "u", FASTFENCE_BMC_PASSWORD: "p" };
    const argv = [
      "bmc",
      "check",
      "--url",
      "redfish+http://127.0.0.1:1/redfish/v1/Systems/1",
      "--insecure",
      "--timeout-ms",
      "1000",
    ];
    const old = await fastfence([...argv, "--json"], env);
    expect(old.stderr.split("\n").filter((l) => l.includes("deprecated"))).toHaveLength(1);
    expect(JSON.parse(old.stdout)).toEqual(
      JSON.parse((await fastfence([...argv, "-o", "json"], env)).stdout),
    );
  });

  it("events catalog --format table = --format catalog -o text, with one warning", async () => {
    const old = await fastfence(["events", "catalog", "--format", "table"]);
    expect(old.status).toBe(EXIT.ok);
    expect(old.stderr.trim().split("\n")).toHaveLength(1);
    expect(old.stderr).toMatch(/--format table is deprecated/);
    const now = await fastfence(["events", "catalog", "--format", "catalog", "-o", "text"]);
    expect(now.stderr).toBe("");
    expect(old.stdout).toBe(now.stdout);
    expect(now.stdout).toMatch(/^TYPE +TOPIC +EMITTED BY +CONSUMED BY/);
  });
});
