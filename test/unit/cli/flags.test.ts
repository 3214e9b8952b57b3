// Every `fastfence` command refuses an unknown flag, a flag without its value and an
// invalid value with one message naming the flag and the command, and exit code 2
// (usage); nothing runs. The unknown-flag case runs each command as a real process
// (`node cli/main.ts <cmd> --bogus-flag`); the rest run cli/main.ts's `main` in-process.
// No servers.
import { describe, expect, it } from "vitest";
import { EXIT } from "../../../cli/exit-codes.ts";
import { COMMANDS } from "../../../cli/main.ts";
import { cli, COMMAND_CASES, fastfence, type CliResult } from "./cli-helpers.ts";

const T = { timeout: 60_000 };

function expectUsage(r: CliResult, command: string, ...named: string[]): void {
  const why = `stdout: ${r.stdout}\nstderr: ${r.stderr}`;
  expect(r.status, why).toBe(EXIT.usage);
  expect(r.stderr, why).toContain(`fastfence ${command}: `);
  for (const n of named) expect(r.stderr, why).toContain(n);
  expect(r.stdout, why).toBe("");
}

describe("unknown flags", T, () => {
  it.each(Object.keys(COMMANDS))(
    "node cli/main.ts %s --bogus-flag: exit 2, names the flag and the command",
    (cmd) => {
      expectUsage(cli([cmd, "--bogus-flag"]), cmd, "unknown option --bogus-flag");
    },
  );

  const withWords = Object.values(COMMAND_CASES)
    .flat()
    .filter((c) => c.words.length > 1);
  it.each(withWords.map((c) => [c.words.join(" "), c] as const))(
    "fastfence %s --bogus-flag: exit 2",
    async (_, c) => {
      expectUsage(
        await fastfence([...c.words, "--bogus-flag"]),
        c.spec.command,
        "unknown option --bogus-flag",
      );
    },
  );

  it("a short flag is named as typed", async () => {
    expectUsage(await fastfence(["trace", "node-a", "-x"]), "trace", "unknown option -x");
  });
});

describe("missing and invalid values", T, () => {
  const cases: [string[], string, string[]][] = [
    [["trace", "node-a", "--brokers"], "trace", ["--brokers needs a value"]],
    [["trace", "node-a", "--brokers", "--topic", "t"], "trace", ["--brokers needs a value"]],
    [["version", "-o"], "version", ["-o needs a value"]],
    [["version", "-o", "xml"], "version", ["-o/--output", '"xml"']],
    [["version", "--help=yes"], "version", ["--help takes no value"]],
    [["version", "extra"], "version", ['"extra"']],
    [["run", "detect", "--http", "abc"], "run", ["--http", '"abc"']],
    [["run", "detect", "--kafka", "-o", "text"], "run", ["-o/--output takes json only", '"text"']],
    [["run", "detect"], "run", ["--kafka", "--http"]],
    [["source", "--http", "70000"], "source", ["--http", '"70000"']],
    [["events", "catalog", "--format", "nope"], "events", ["--format", '"nope"']],
    [["events", "catalog", "--format", "asyncapi", "-o", "text"], "events", ["-o json or -o yaml"]],
    [
      ["bmc", "status", "--url", "ipmi://127.0.0.1:1", "--timeout-ms", "abc"],
      "bmc",
      ["--timeout-ms", '"abc"'],
    ],
    [["bmc", "status"], "bmc", ["--url or --node"]],
    [["lab", "partial", "node-a", "--mode", "sideways"], "lab partial", ["--mode", '"sideways"']],
    [["lab", "bmc-fault", "node-a", "--fault", "melted"], "lab bmc-fault", ["--fault", '"melted"']],
    [["lab", "up", "--nodes", "two"], "lab up", ["--nodes", '"two"']],
    [["lab", "up", "--bmc", "serial"], "lab up", ["--bmc", '"serial"']],
    [["lab", "up", "--control-plane", "host", "--vm-controller"], "lab up", ["--vm-controller", "compact"]],
    [["lab", "crash"], "lab crash", ["which node"]],
    [["pause"], "pause", ["--reason is required"]],
    [["pause", "node-a", "--reason", "  "], "pause", ["--reason is required"]],
    [["pause", "node-a", "--reason", "x".repeat(1025)], "pause", ["--reason", "at most 1024"]],
    [["pause", "node-a", "node-b", "--reason", "r"], "pause", ['"node-b"']],
    [["resume", "--reason="], "resume", ["--reason needs some text"]],
    [["fence"], "fence", ["which node"]],
    [["fence", "node-a"], "fence", ["--reason is required"]],
    [["fence", "node-a", "--reason", "r", "--wait", "soon"], "fence", ["--wait", '"soon"']],
    [["fence", "node-a", "--reason", "r", "--wait=-1"], "fence", ["--wait", '"-1"']],
    [["lab", "nosuch"], "lab", ['"nosuch"']],
  ];
  it.each(cases.map(([argv, cmd, named]) => [argv.join(" "), argv, cmd, named] as const))(
    "fastfence %s: exit 2",
    async (_, argv, cmd, named) => {
      expectUsage(await fastfence(argv), cmd, ...named);
    },
  );
});

describe("the command itself", T, () => {
  it("no command, an unknown command or an option before the command: exit 2", async () => {
    expect((await fastfence([])).status).toBe(EXIT.usage);
    const unknown = await fastfence(["nosuch"]);
    expect(unknown.status).toBe(EXIT.usage);
    expect(unknown.stderr).toContain('unknown command "nosuch"');
    const early = await fastfence(["-o", "json", "version"]);
    expect(early.status).toBe(EXIT.usage);
    expect(early.stderr).toContain("unknown option -o");
  });
});
