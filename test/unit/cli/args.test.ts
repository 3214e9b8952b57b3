// The shared option layer (cli/args.ts): strict parsing whose usage errors name the
// command and the flag, -o validation per command, positional limits, value parsers.
import { describe, expect, it } from "vitest";
import { defineCommand, parseChoice, parseCommand, parsePort, UsageError } from "../../../cli/args.ts";

const SPEC = defineCommand({
  command: "demo sub",
  options: { name: { type: "string" }, flag: { type: "boolean" }, many: { type: "string", multiple: true } },
  positionals: 1,
  outputs: ["text", "json"],
});

function usageOf(f: () => unknown): UsageError {
  try {
    f();
  } catch (err) {
    if (err instanceof UsageError) return err;
    throw err;
  }
  throw new Error("no UsageError");
}

describe("parseCommand", () => {
  it("parses options, positionals and -o", () => {
    const p = parseCommand(SPEC, ["x", "--name", "n", "--flag", "--many", "a", "--many=b", "-o", "json"]);
    expect(p.values).toMatchObject({ name: "n", flag: true, many: ["a", "b"] });
    expect(p.positionals).toEqual(["x"]);
    expect(p).toMatchObject({ output: "json", outputGiven: true, help: false });
    expect(parseCommand(SPEC, []).output).toBe("text");
    expect(parseCommand(SPEC, ["-h"]).help).toBe(true);
  });

  it.each([
    [["--bogus"], "unknown option --bogus"],
    [["-z"], "unknown option -z"],
    [["--name"], "--name needs a value"],
    [["--name", "--flag"], "--name needs a value"],
    [["--flag=1"], "--flag takes no value"],
    [["-o"], "-o needs a value"],
    [["-o", "yaml"], '-o/--output takes text, json, not "yaml"'],
    [["a", "b"], 'unexpected argument "b"'],
  ])("%j: %s", (argv, message) => {
    const e = usageOf(() => parseCommand(SPEC, argv));
    expect(e.command).toBe("demo sub");
    expect(e.code).toBe("FF_INVALID_CONFIG");
    expect(e.message).toContain(message);
  });

  it("a value that starts with a dash is taken inline", () => {
    expect(parseCommand(SPEC, ["--name=-x"]).values.name).toBe("-x");
  });
});

describe("value parsers", () => {
  it("parsePort", () => {
    expect(parsePort("c", "--http", undefined)).toBeUndefined();
    expect(parsePort("c", "--http", "8080")).toBe(8080);
    for (const bad of ["", "x", "-1", "65536", "1.5"])
      expect(() => parsePort("c", "--http", bad)).toThrow(UsageError);
  });

  it("parseChoice", () => {
    expect(parseChoice("c", "--mode", "api", ["peers", "api"])).toBe("api");
    expect(usageOf(() => parseChoice("c", "--mode", "x", ["peers", "api"])).message).toBe(
      '--mode takes peers, api, not "x"',
    );
  });
});
