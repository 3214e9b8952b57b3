// The `fastfence` command line: one entry point, one subcommand per job. Each subcommand
// lives in its own module and is loaded only when used, so `fastfence --help` is fast
// and a broken optional part (e.g. a BMC driver) cannot stop the others. Exit codes:
// 0 success, 1 failure, 2 usage error. Errors print their code and message, never a
// stack trace unless FASTFENCE_DEBUG=1, and never secrets.
import { FastfenceError } from "../core/errors.ts";

const HELP = `fastfence — fast, safe fencing of failed bare-metal Kubernetes nodes

Usage: fastfence <command> [options]

Commands:
  run <function> --kafka | --http PORT   host one pipeline function (fastfence run --help lists them)
  source                                 run one event-source (observer) replica
  events catalog [--format asyncapi|table]  print the CloudEvents catalog
  trace <node|incident> --brokers B      print an incident's event chain with stage latencies
  bmc status|off|on|check --url URL      talk to a node's BMC (Redfish, IPMI, fence agents)
  stack-check                            start the real test stack, print health and versions, stop
  version                                print the version

Run "fastfence <command> --help" for a command's options.`;

type Command = (argv: string[]) => Promise<number>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import("./run.ts")).runCommand,
  source: async () => (await import("./source.ts")).sourceCommand,
  events: async () => (await import("./events.ts")).eventsCommand,
  trace: async () => (await import("./trace.ts")).traceCommand,
  bmc: async () => (await import("./bmc.ts")).bmcCommand,
  "stack-check": async () => (await import("./stack-check.ts")).stackCheckCommand,
  lab: async () => (await import("./lab.ts")).labCommand,
  version: async () => async () => {
    const { readFile } = await import("node:fs/promises");
    const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    console.log(`fastfence ${pkg.version} (node ${process.versions.node})`);
    return 0;
  },
};

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === "--help" || cmd === "-h" || cmd === "help") {
    console.log(HELP);
    return cmd ? 0 : 2;
  }
  const load = COMMANDS[cmd];
  if (!load) {
    console.error(`fastfence: unknown command "${cmd}"\n\n${HELP}`);
    return 2;
  }
  try {
    return await (
      await load()
    )(rest);
  } catch (err) {
    if (err instanceof FastfenceError) console.error(`fastfence ${cmd}: ${err.code}: ${err.message}`);
    else console.error(`fastfence ${cmd}: ${err instanceof Error ? err.message : String(err)}`);
    if (process.env.FASTFENCE_DEBUG === "1") console.error(err);
    return 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
