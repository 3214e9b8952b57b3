// `fastfence lab up|down|status|crash|proc-crash|hang|resume|partition|heal|partial|bmc-fault|power-loss|isolate|fn-crash|power-on`:
// drives the simulated compact cluster (lab/). `up` starts the lab controller daemon
// (lab/controller.ts) detached and waits until it is ready; the fault commands talk to
// its loopback control endpoint; `down` asks it to stop and then removes whatever
// .cache/lab/state.json still records (also after the controller was killed). Every
// subcommand's command line is checked before it touches the lab; results print as
// -o text|json|yaml.
import { spawn } from "node:child_process";
import { mkdirSync, openSync, closeSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ParseArgsOptionsConfig } from "node:util";
import type { BmcFault } from "../lab/lab.ts";
import { claimHolder, LabBusyError } from "../lab/machine-claim.ts";
import { LAB_DIR, ROOT, procAlive, readState, teardownFromState } from "../lab/state.ts";
import {
  defineCommand,
  outputHelp,
  parseChoice,
  parseCommand,
  UsageError,
  type CommandSpec,
  type ParsedCommand,
} from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { render } from "./output.ts";

const OUTPUTS = ["text", "json", "yaml"] as const;
const BMC_KINDS = ["mixed", "ipmi", "redfish"] as const;
const CONTROL_PLANES = ["compact", "host"] as const;
const LEADER_ELECTIONS = ["openshift", "upstream"] as const;
const PARTIAL_MODES = ["peers", "api"] as const;
const BMC_FAULTS = ["unreachable", "slow", "lying", "stuck", "none"] as const satisfies readonly BmcFault[];
/** The values of the lab subcommands' options that take a fixed list (for shell completion). */
export const LAB_OPTION_VALUES = {
  bmc: BMC_KINDS,
  mode: PARTIAL_MODES,
  fault: BMC_FAULTS,
  "control-plane": CONTROL_PLANES,
  "leader-election": LEADER_ELECTIONS,
} as const;
/** Subcommands that take just a NODE. */
const NODE_ACTIONS = [
  "crash",
  "proc-crash",
  "hang",
  "resume",
  "partition",
  "heal",
  "power-loss",
  "isolate",
  "power-on",
] as const;

const UP_ARGS = defineCommand({
  command: "lab up",
  options: {
    nodes: { type: "string" },
    bmc: { type: "string" },
    baseline: { type: "boolean" },
    watchdog: { type: "boolean" },
    "second-level": { type: "boolean" },
    "control-plane": { type: "string" },
    "leader-election": { type: "string" },
    "vm-controller": { type: "boolean" },
  },
  positionals: 0,
  outputs: OUTPUTS,
});
const PARTIAL_ARGS = defineCommand({
  command: "lab partial",
  options: { mode: { type: "string" } },
  positionals: 1,
  outputs: OUTPUTS,
});
const BMC_FAULT_ARGS = defineCommand({
  command: "lab bmc-fault",
  options: { fault: { type: "string" } },
  positionals: 1,
  outputs: OUTPUTS,
});
const FN_CRASH_ARGS = defineCommand({
  command: "lab fn-crash",
  options: {
    functions: { type: "string" },
    source: { type: "boolean" },
    "restart-after-ms": { type: "string" },
  },
  positionals: 1,
  outputs: OUTPUTS,
});
/** `--restart-after-ms N` as the agent's query parameter; a UsageError for anything but N >= 0. */
function restartAfterMs(v: string | undefined): { restartAfterMs?: string } {
  if (v === undefined) return {};
  const ms = Number(v);
  if (!(v.trim() !== "" && Number.isInteger(ms) && ms >= 0))
    throw new UsageError("lab fn-crash", `--restart-after-ms needs a whole number of ms >= 0, not "${v}"`);
  return { restartAfterMs: String(ms) };
}
const plain = (command: string, positionals: number) =>
  defineCommand({ command, options: {}, positionals, outputs: OUTPUTS });

/** Each lab subcommand's command line, by name (also for tests). */
export const LAB_ARGS: Readonly<Record<string, CommandSpec<ParseArgsOptionsConfig>>> = {
  up: UP_ARGS,
  down: plain("lab down", 0),
  status: plain("lab status", 0),
  ...Object.fromEntries(NODE_ACTIONS.map((a) => [a, plain(`lab ${a}`, 1)])),
  partial: PARTIAL_ARGS,
  "bmc-fault": BMC_FAULT_ARGS,
  "fn-crash": FN_CRASH_ARGS,
};

const HELP = `Usage: fastfence lab <command> [options] [-o text|json|yaml]

  up [--nodes N] [--bmc mixed|ipmi|redfish] [--baseline] [--watchdog] [--second-level]
     [--control-plane compact|host] [--leader-election openshift|upstream] [--vm-controller]
                                         start the lab (default 3 nodes, mixed BMCs;
                                         --watchdog: an emulated watchdog per node;
                                         --second-level: Redfish nodes also get an IPMI level;
                                         --control-plane: etcd, API server, controller
                                         manager and scheduler on the first three nodes
                                         (compact, default) or on the host;
                                         --leader-election: the compact plane's settings;
                                         --vm-controller: a VM controller stand-in on the
                                         first two nodes, leader-elected, for VMs in the
                                         lab-vms namespace; compact plane only)
  down                                    tear everything down (also after a crash of the lab)
  status                                  nodes, power, link, readiness, BMCs, brokers up
  crash NODE                              the node dies silently: its link down, every process
                                          SIGKILLed; nothing answers until power-off and power-on
  proc-crash NODE                         SIGKILL every process, link left up (the node's kernel
                                          still answers: TCP resets); power stays On
  hang NODE | resume NODE                 SIGSTOP / SIGCONT every process of the node
  partition NODE | heal NODE              the node's link down / up (heal also clears partial
                                          partitions; a crashed node stays dark until power-on)
  partial NODE --mode peers|api           reaches the API but not its peers (peers), or the reverse (api)
  power-loss NODE                         the node and its BMC die together (undo: bmc-fault none, power-on)
  isolate NODE                            cut off from peers, API and BMC, still running (undo: heal, bmc-fault none)
  bmc-fault NODE --fault unreachable|slow|lying|stuck|none
  fn-crash NODE [--functions a,b] [--source] [--restart-after-ms N]
                                          crash function replicas on a healthy node (started
                                          again N ms later, as the kubelet would; default never)
  power-on NODE                           power a fenced node back on through its BMC

The lab runs its own API server with its own kubeconfig (.cache/lab/): lab takes no
--kubeconfig, --context or -n. Every lab command takes:
${outputHelp(UP_ARGS, "up with json/yaml prints its progress on stderr")}
  -h, --help              this help`;
async function call(path: string, q: Record<string, string> = {}): Promise<unknown> {
  const s = readState();
  if (!s?.controlPort || !s.controller || !procAlive(s.controller))
    throw new Error("the lab is not up (fastfence lab up)");
  const r = await fetch(`http://127.0.0.1:${s.controlPort}${path}?${new URLSearchParams(q).toString()}`, {
    method: "POST",
  });
  const body = (await r.json()) as unknown;
  if (!r.ok) throw new Error((body as { error?: string }).error ?? `HTTP ${r.status}`);
  return body;
}

async function up(a: ParsedCommand<typeof UP_ARGS.options>): Promise<number> {
  const nodes = a.values.nodes ?? "3";
  if (!/^[1-9][0-9]*$/.test(nodes))
    throw new UsageError("lab up", `--nodes takes a whole number from 1, not "${nodes}"`);
  const bmc = parseChoice("lab up", "--bmc", a.values.bmc ?? "mixed", BMC_KINDS);
  const plane = parseChoice(
    "lab up",
    "--control-plane",
    a.values["control-plane"] ?? "compact",
    CONTROL_PLANES,
  );
  const election = parseChoice(
    "lab up",
    "--leader-election",
    a.values["leader-election"] ?? "openshift",
    LEADER_ELECTIONS,
  );
  if (a.values["vm-controller"] && plane !== "compact")
    throw new UsageError(
      "lab up",
      "--vm-controller needs the compact control plane (--control-plane compact)",
    );
  const structured = a.output !== "text";
  const progress = structured ? console.error : console.log;
  const result = (doc: Record<string, unknown>) => {
    if (structured) console.log(render(a.output, doc));
  };
  const prev = readState();
  if (prev?.controller && procAlive(prev.controller)) {
    const error = `lab already up (controller ${prev.controller.pid}); fastfence lab down first`;
    console.error(error);
    result({ ok: false, error });
    return EXIT.failed;
  }
  const holder = await claimHolder();
  if (holder) {
    const error = new LabBusyError(holder).message;
    console.error(error);
    result({ ok: false, error, holder });
    return EXIT.failed;
  }
  if (prev) teardownFromState(prev);
  mkdirSync(LAB_DIR, { recursive: true });
  const logPath = join(LAB_DIR, "controller.log");
  const fd = openSync(logPath, "w");
  const child = spawn(process.execPath, [join(ROOT, "lab/controller.ts")], {
    detached: true,
    stdio: ["ignore", fd, fd],
    env: {
      ...process.env,
      FASTFENCE_LAB_NODES: nodes,
      FASTFENCE_LAB_BMC: bmc,
      ...(a.values.baseline ? { FASTFENCE_LAB_BASELINE: "1" } : {}),
      ...(a.values.watchdog ? { FASTFENCE_LAB_WATCHDOG: "1" } : {}),
      ...(a.values["second-level"] ? { FASTFENCE_LAB_SECOND_LEVEL: "1" } : {}),
      FASTFENCE_LAB_CONTROL_PLANE: plane,
      FASTFENCE_LAB_LEADER_ELECTION: election,
      ...(a.values["vm-controller"] ? { FASTFENCE_LAB_VM_CONTROLLER: "1" } : {}),
    },
  });
  closeSync(fd);
  child.unref();
  progress(`lab controller pid ${child.pid}, log ${logPath}`);
  const deadline = Date.now() + 360_000; // the compact plane starts before the rest
  let shown = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    const text = readFileSync(logPath, "utf8");
    const lines = text.split("\n");
    for (const l of lines.slice(shown, -1)) progress(l);
    shown = Math.max(shown, lines.length - 1);
    const s = readState();
    if (s?.phase === "ready" && s.controlPort) {
      result({ ok: true, controller: child.pid, log: logPath });
      return EXIT.ok;
    }
    if (!child.pid || !procAlive({ pid: child.pid, start: 0 }) || Date.now() > deadline) {
      // The controller's own verdict first ("lab up failed: <reason>"), so a caller that keeps
      // only the first line of the output still learns why.
      const verdict = readFileSync(logPath, "utf8")
        .split("\n")
        .find((l) => l.includes(" lab up failed: "));
      const error = verdict ? verdict.slice(verdict.indexOf("lab up failed: ")) : "lab up failed";
      console.error(verdict ? error : "lab up failed; see the log above");
      const st = readState();
      if (st) teardownFromState(st);
      result({ ok: false, error, log: logPath });
      return EXIT.failed;
    }
  }
}

async function down(a: ParsedCommand<ParseArgsOptionsConfig>): Promise<number> {
  const s = readState();
  if (!s) {
    console.log(a.output === "text" ? "lab: nothing to tear down" : render(a.output, { removed: [] }));
    return EXIT.ok;
  }
  if (s.controller && s.controlPort && procAlive(s.controller)) {
    try {
      await fetch(`http://127.0.0.1:${s.controlPort}/down`, {
        method: "POST",
        signal: AbortSignal.timeout(2000),
      });
      const end = Date.now() + 60_000;
      while (procAlive(s.controller) && Date.now() < end) await new Promise((r) => setTimeout(r, 200));
    } catch {
      // fall through to the state-driven teardown
    }
  }
  const left = readState();
  const done = left ? teardownFromState(left) : [];
  console.log(render(a.output, { removed: done }, () => (done.length ? done.join("\n") : "lab: down")));
  return EXIT.ok;
}

export async function labCommand(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === "--help" || cmd === "-h" || cmd === "help") return (console.log(HELP), EXIT.ok);
  // Options before the subcommand: refuse unknown ones by name, like every command.
  if (cmd?.startsWith("-")) {
    parseCommand(plain("lab", Infinity), argv);
    throw new UsageError("lab", "options go after the lab command: fastfence lab <command> [options]");
  }
  if (!cmd) throw new UsageError("lab", "which lab command? (fastfence lab --help)");
  const spec = Object.hasOwn(LAB_ARGS, cmd) ? LAB_ARGS[cmd] : undefined;
  if (!spec) throw new UsageError("lab", `unknown lab command "${cmd}" (fastfence lab --help lists them)`);
  const a = parseCommand(spec, rest);
  if (a.help) return (console.log(HELP), EXIT.ok);
  const show = (value: unknown) => console.log(render(a.output, value));
  const withNode = async (path: string, q: Record<string, string> = {}) => {
    const node = a.positionals[0];
    if (!node) throw new UsageError(`lab ${cmd}`, `which node? fastfence lab ${cmd} NODE`);
    show(await call(path, { node, ...q }));
    return EXIT.ok;
  };
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  switch (cmd) {
    case "up":
      return await up(parseCommand(UP_ARGS, rest)); // again, for its typed values
    case "down":
      return await down(a);
    case "status":
      show(await call("/status"));
      return EXIT.ok;
    case "partial":
      return await withNode("/partial", {
        mode: parseChoice("lab partial", "--mode", str(a.values.mode) ?? "peers", PARTIAL_MODES),
      });
    case "bmc-fault":
      return await withNode("/bmc-fault", {
        fault: parseChoice("lab bmc-fault", "--fault", str(a.values.fault) ?? "none", BMC_FAULTS),
      });
    case "fn-crash":
      return await withNode("/fn-crash", {
        functions: str(a.values.functions) ?? "detect,confirm,fence,remediate-workloads,recover",
        ...(a.values.source ? { source: "1" } : {}),
        ...restartAfterMs(str(a.values["restart-after-ms"])),
      });
    default:
      return await withNode(`/${cmd}`);
  }
}
