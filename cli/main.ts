// The `fastfence` command line: one entry point, one subcommand per job. Each subcommand
// lives in its own module and is loaded only when used, so `fastfence --help` is fast
// and a broken optional part (e.g. a BMC driver) cannot stop the others. Every command
// takes -o text|json|yaml and returns an exit code from cli/exit-codes.ts; a usage error
// (UsageError) prints one line naming the command and the flag and exits 2. Errors print
// their code and message, never a stack trace unless FASTFENCE_DEBUG=1, and never secrets.
import { FastfenceError } from "../core/errors.ts";
import { leadingOptions, outputHelp, parseCommand, UsageError } from "./args.ts";
import { EXIT, exitCodesHelp } from "./exit-codes.ts";
import { render } from "./output.ts";
import { KUBE_TARGET_OPTIONS, takesKubeTarget, VERSION_ARGS } from "./specs.ts";

export { VERSION_ARGS };

export const HELP = `fastfence — fast, safe fencing of failed bare-metal Kubernetes nodes

Usage: fastfence [--kubeconfig FILE] [--context NAME] [-n NS] <command> [options]
       kubectl fastfence ... / oc fastfence ...   (the same, as a kubectl/oc plugin: bin/kubectl-fastfence)

Commands:
  run <function> --kafka | --http PORT      host one pipeline function (fastfence run --help lists them)
  source                                    run one event-source (observer) replica
  events catalog [--format catalog|asyncapi]  print the event catalog or its AsyncAPI document
  trace <node|incident> [--brokers LIST]    print an incident's event chain with stage latencies
  bmc status|off|on|check --url URL | --node NAME   talk to a node's BMC (Redfish, IPMI, fence agents)
  lab up|down|status|crash|hang|resume|partition|heal|partial|bmc-fault|fn-crash|power-on
                                            drive the simulated cluster (fastfence lab --help)
  pause [NODE] --reason TEXT                stop fencing cluster-wide, or of one node (planned work)
  resume [NODE]                             end that pause
  fence NODE --reason TEXT [--wait S]       ask for a node to be fenced now, as you
  release-slot INCIDENT --reason TEXT       end a final FenceFailed incident and free its storm-guard slot
  completion bash|zsh                       print the shell completion script (source <(fastfence completion bash))
  stack-check                               start the real test stack, print health and versions, stop
  version                                   print the version
  help [command]                            this help, or a command's options

Cluster, every command that talks to the Kubernetes API (run, source, trace, bmc --node, pause,
resume, fence, release-slot; not lab, which runs its own), before or after the command:
  --kubeconfig FILE  (default $KUBECONFIG, ~/.kube/config or in-cluster)   --context NAME
  -n, --namespace NS where fastfence runs (default $FASTFENCE_NAMESPACE or fastfence-system)

Output, every command: -o, --output text|json|yaml (default text). run and source print
only their JSON log lines and take -o json only; events catalog --format asyncapi defaults to json.
Deprecated, accepted until the next release with a warning on stderr: --json (trace, bmc),
events catalog --format table.

Exit codes:
${exitCodesHelp()}

Run "fastfence <command> --help" for a command's options.`;

type Command = (argv: string[]) => Promise<number>;

async function versionCommand(argv: string[]): Promise<number> {
  const args = parseCommand(VERSION_ARGS, argv);
  if (args.help) {
    console.log(
      `Usage: fastfence version [-o text|json|yaml]\n${outputHelp(VERSION_ARGS)}\n  -h, --help              this help`,
    );
    return EXIT.ok;
  }
  const { readFile } = await import("node:fs/promises");
  const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  const v = { fastfence: pkg.version, node: process.versions.node };
  console.log(render(args.output, v, () => `fastfence ${v.fastfence} (node ${v.node})`));
  return EXIT.ok;
}

/**
 * A developer command (lab, stack-check) that runs only from a source checkout: the shipped
 * artifact has no lab/ or harness/, and says so instead of failing to resolve a module.
 */
const fromCheckout =
  (name: string, folder: string, load: () => Promise<Command>) => async (): Promise<Command> => {
    const { existsSync } = await import("node:fs");
    if (!existsSync(new URL(`../${folder}/`, import.meta.url)))
      throw new FastfenceError(
        "FF_INVALID_CONFIG",
        `${name} is a developer command: it runs from a source checkout after \`make setup\` (this installation has no ${folder}/)`,
      );
    return load();
  };

/** Every command, by name; `fastfence --help` lists each of them. */
export const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import("./run.ts")).runCommand,
  source: async () => (await import("./source.ts")).sourceCommand,
  events: async () => (await import("./events.ts")).eventsCommand,
  trace: async () => (await import("./trace.ts")).traceCommand,
  bmc: async () => (await import("./bmc.ts")).bmcCommand,
  lab: fromCheckout("lab", "lab", async () => (await import("./lab.ts")).labCommand),
  pause: async () => (await import("./pause.ts")).pauseCommand,
  resume: async () => (await import("./pause.ts")).resumeCommand,
  fence: async () => (await import("./fence.ts")).fenceCommand,
  "release-slot": async () => (await import("./release-slot.ts")).releaseSlotCommand,
  "stack-check": fromCheckout(
    "stack-check",
    "harness",
    async () => (await import("./stack-check.ts")).stackCheckCommand,
  ),
  completion: async () => (await import("./completion.ts")).completionCommand,
  version: async () => versionCommand,
};

export async function main(argv: string[]): Promise<number> {
  // kubectl passes the flags after the plugin's name through: --kubeconfig, --context and
  // -n may come before the command; any other option goes after it.
  let lead: { given: string[]; rest: string[] };
  try {
    lead = leadingOptions(argv, KUBE_TARGET_OPTIONS);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`fastfence: ${err.message}\nRun "fastfence --help" for the commands and options.`);
    return EXIT.usage;
  }
  const [first, ...args] = lead.rest;
  let cmd = first;
  let rest = args;
  if (cmd === "__complete" && argv[0] === cmd)
    return (await import("./completion.ts")).completeCommand(argv.slice(1));
  if (cmd === "help" && rest[0]) [cmd, rest] = [rest[0], ["--help"]];
  if (cmd === "--help" || cmd === "-h" || cmd === "help") {
    console.log(HELP);
    return EXIT.ok;
  }
  if (!cmd) {
    console.error(HELP);
    return EXIT.usage;
  }
  if (cmd.startsWith("-")) {
    console.error(
      `fastfence: unknown option ${cmd} before the command: only --kubeconfig, --context and -n/--namespace go there; a command's options go after it (fastfence --help)`,
    );
    return EXIT.usage;
  }
  const load = Object.hasOwn(COMMANDS, cmd) ? COMMANDS[cmd] : undefined;
  if (!load) {
    console.error(`fastfence: unknown command "${cmd}" (fastfence --help lists them)`);
    return EXIT.usage;
  }
  if (lead.given.length) {
    const line = (await (await import("./completion.ts")).commandLines())[cmd];
    if (!line?.spec || !takesKubeTarget(line.spec)) {
      const flag = lead.given[0]!.slice(0, lead.given[0]!.indexOf("="));
      console.error(
        `fastfence ${cmd}: ${flag === "--namespace" ? "-n/--namespace" : flag} is for the commands that talk to the Kubernetes API; ${cmd} does not take it${cmd === "lab" ? " (the lab runs its own API server with its own kubeconfig)" : ""}\nRun "fastfence ${cmd} --help" for its options.`,
      );
      return EXIT.usage;
    }
    rest = [...lead.given, ...rest];
  }
  try {
    return await (
      await load()
    )(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(
        `fastfence ${err.command}: ${err.message}\nRun "fastfence ${err.command} --help" for its options.`,
      );
      return EXIT.usage;
    }
    if (err instanceof FastfenceError) console.error(`fastfence ${cmd}: ${err.code}: ${err.message}`);
    else console.error(`fastfence ${cmd}: ${err instanceof Error ? err.message : String(err)}`);
    if (process.env.FASTFENCE_DEBUG === "1") console.error(err);
    return EXIT.failed;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(EXIT.failed);
    },
  );
}
