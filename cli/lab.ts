// `fastfence lab up|down|status|crash|hang|resume|partition|heal|partial|bmc-fault|fn-crash|power-on`:
// drives the simulated compact cluster (lab/). `up` starts the lab controller daemon
// (lab/controller.ts) detached and waits until it is ready; the fault commands talk to
// its loopback control endpoint; `down` asks it to stop and then removes whatever
// .cache/lab/state.json still records (also after the controller was killed).
import { spawn } from "node:child_process";
import { mkdirSync, openSync, closeSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { LAB_DIR, ROOT, procAlive, readState, teardownFromState } from "../lab/state.ts";

const HELP = `Usage: fastfence lab <command> [options]

  up [--nodes N] [--bmc mixed|ipmi|redfish] [--baseline]   start the lab (default 3 nodes, mixed BMCs)
  down                                    tear everything down (also after a crash of the lab)
  status                                  nodes, power, readiness, BMCs
  crash NODE                              SIGKILL every process of the node (power stays On)
  hang NODE | resume NODE                 SIGSTOP / SIGCONT every process of the node
  partition NODE | heal NODE              the node's link down / up (heal also clears partial partitions)
  partial NODE --mode peers|api           reaches the API but not its peers (peers), or the reverse (api)
  bmc-fault NODE --fault unreachable|slow|lying|stuck|none
  fn-crash NODE [--functions a,b] [--source]   crash function replicas on a healthy node
  power-on NODE                           power a fenced node back on through its BMC`;

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

async function up(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { nodes: { type: "string" }, bmc: { type: "string" }, baseline: { type: "boolean" } },
  });
  const prev = readState();
  if (prev?.controller && procAlive(prev.controller)) {
    console.error(`lab already up (controller ${prev.controller.pid}); fastfence lab down first`);
    return 1;
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
      FASTFENCE_LAB_NODES: values.nodes ?? "3",
      FASTFENCE_LAB_BMC: values.bmc ?? "mixed",
      ...(values.baseline ? { FASTFENCE_LAB_BASELINE: "1" } : {}),
    },
  });
  closeSync(fd);
  child.unref();
  console.log(`lab controller pid ${child.pid}, log ${logPath}`);
  const deadline = Date.now() + 240_000;
  let shown = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 500));
    const text = readFileSync(logPath, "utf8");
    const lines = text.split("\n");
    for (const l of lines.slice(shown, -1)) console.log(l);
    shown = Math.max(shown, lines.length - 1);
    const s = readState();
    if (s?.phase === "ready" && s.controlPort) return 0;
    if (!child.pid || !procAlive({ pid: child.pid, start: 0 }) || Date.now() > deadline) {
      console.error("lab up failed; see the log above");
      const st = readState();
      if (st) teardownFromState(st);
      return 1;
    }
  }
}

async function down(): Promise<number> {
  const s = readState();
  if (!s) {
    console.log("lab: nothing to tear down");
    return 0;
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
  console.log(done.length ? done.join("\n") : "lab: down");
  return 0;
}

export async function labCommand(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    strict: false,
    options: {
      mode: { type: "string" },
      fault: { type: "string" },
      functions: { type: "string" },
      source: { type: "boolean" },
    },
  });
  const node = positionals[0];
  const withNode = async (path: string, q: Record<string, string> = {}) => {
    if (!node) {
      console.error(`fastfence lab ${cmd}: which node?\n\n${HELP}`);
      return 2;
    }
    console.log(JSON.stringify(await call(path, { node, ...q }), null, 1));
    return 0;
  };
  switch (cmd) {
    case "up":
      return await up(rest);
    case "down":
      return await down();
    case "status":
      console.log(JSON.stringify(await call("/status"), null, 1));
      return 0;
    case "crash":
    case "hang":
    case "resume":
    case "partition":
    case "heal":
    case "power-on":
      return await withNode(`/${cmd}`);
    case "partial":
      return await withNode("/partial", { mode: String(values.mode ?? "peers") });
    case "bmc-fault":
      return await withNode("/bmc-fault", { fault: String(values.fault ?? "none") });
    case "fn-crash":
      return await withNode("/fn-crash", {
        functions: String(values.functions ?? "detect,confirm,fence,remediate-workloads,recover"),
        ...(values.source ? { source: "1" } : {}),
      });
    default:
      console.log(HELP);
      return cmd === "--help" || cmd === "-h" ? 0 : 2;
  }
}
