// Fault injection on lab nodes: crash (the machine dies silently: its link down, then
// SIGKILL every process but the launcher; nothing answers until power-off and power-on),
// proc-crash (the same SIGKILL with the link left up: the node's kernel still answers with
// TCP resets), hang/resume (SIGSTOP/SIGCONT the node's PID namespace), full
// partition/heal (the host-side veth down/up), partial partitions (blackhole routes inside
// the node's namespace), BMC faults, power-loss (node and BMC die together), isolate (node
// cut off from peers, API and BMC, still running), a broker kill (SIGKILL of the node's
// Kafka broker alone; the launcher does not restart it) and a function-only crash on a
// healthy node (its agent's control socket, lab/node-agent.ts). The link follows
// lab/link-state.ts (a heal never lights a dark machine). Each fault is noted with its
// time. It never signals a process outside a lab node's namespace, and never fences or
// powers anything off itself.
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { sleep } from "../harness/env/base.ts";
import { LINK_UP, linkAfter, linkUp, type LinkEvent } from "./link-state.ts";
import { blackhole, setLink } from "./net.ts";
import { HOST_IP, signalPids } from "./state.ts";
import { nodeProcesses } from "./topology.ts";
import { AGENT_SOCKET, type BmcFault, type FaultNote, type LabNode } from "./types.ts";

/** What the faults act on: the lab's nodes, and where each fault is noted. */
export interface FaultTarget {
  nodes: LabNode[];
  node(name: string): LabNode;
  faults: FaultNote[];
}

function note(lab: FaultTarget, x: LabNode, kind: string, at: number): void {
  lab.faults.push({ node: x.name, kind, at });
}

/** The launcher and every other process of the node's PID namespace. */
function everyProcess(x: LabNode): number[] {
  const p = nodeProcesses(x.netns);
  return [...(p.launcher ? [p.launcher] : []), ...p.others];
}

/** The last link change queued per node: changes apply one after another, in order. */
const linkChains = new WeakMap<LabNode, Promise<void>>();

/**
 * Record a link event on the node (lab/link-state.ts) and set its host-side veth to match.
 * Changes to one node run in order, each reading the flags when it runs, so the last one
 * leaves the link as the flags say even when events overlap.
 */
export function linkEvent(x: LabNode, e: LinkEvent): Promise<void> {
  x.link = linkAfter(x.link ?? LINK_UP, e);
  const run = (linkChains.get(x) ?? Promise.resolve())
    .catch(() => undefined)
    .then(() => setLink(x.veth, linkUp(x.link ?? LINK_UP)));
  linkChains.set(x, run);
  return run;
}

/** SIGKILL every process of the node but its launcher, until none is left. */
async function killAllButLauncher(x: LabNode): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const { others } = nodeProcesses(x.netns);
    if (others.length === 0) break;
    signalPids(others, "SIGKILL");
    await sleep(10);
  }
}

/**
 * crash: the machine dies silently. Its link goes down first (one `ip` call, a few ms), then
 * every process of the node is SIGKILLed, so not even a dying socket's FIN or reset leaves
 * it: survivors see connect and request timeouts, as from a dead or panicked machine. The
 * "hardware" (launcher) and power stay on; the link stays down (a heal does not bring it
 * back) until the node is powered off and on. `kind` names it in the fault notes (the
 * emulated watchdog's reset is "watchdog-reset", a power-loss "power-loss"); its time is
 * taken before the link goes down.
 */
export async function crash(lab: FaultTarget, name: string, kind = "crash"): Promise<number> {
  const t0 = Date.now();
  const x = lab.node(name);
  await linkEvent(x, "crash");
  await killAllButLauncher(x);
  note(lab, x, kind, t0);
  return t0;
}

/**
 * proc-crash: SIGKILL every process of the node with its link left up (the lab's crash before
 * issue 45): the node's kernel still answers, so survivors get a TCP reset at once from its
 * address. Power stays on; a power-off and power-on bring it back.
 */
export async function procCrash(lab: FaultTarget, name: string): Promise<number> {
  const t0 = Date.now();
  const x = lab.node(name);
  await killAllButLauncher(x);
  note(lab, x, "proc-crash", t0);
  return t0;
}

/** The node's Kafka broker JVM (its main class on the command line), if it runs. */
function brokerPid(x: LabNode): number | undefined {
  return nodeProcesses(x.netns).others.find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes("kafka.Kafka");
    } catch {
      return false; // gone meanwhile
    }
  });
}

/**
 * broker-kill: SIGKILL the node's Kafka broker only (a broker OOM-killed or crashed on its
 * own); the node and its other processes go on. It stays dead until the node's power is
 * cycled. Throws when the node runs no broker.
 */
export function brokerKill(lab: FaultTarget, name: string): number {
  const t0 = Date.now();
  const x = lab.node(name);
  const pid = brokerPid(x);
  if (pid === undefined) throw new Error(`broker-kill ${name}: the node runs no Kafka broker`);
  signalPids([pid], "SIGKILL");
  note(lab, x, "broker-kill", t0);
  return t0;
}

/** hang: SIGSTOP every process in the node's PID namespace (power stays On). */
export function hang(lab: FaultTarget, name: string): number {
  const t0 = Date.now();
  const x = lab.node(name);
  signalPids(everyProcess(x), "SIGSTOP");
  note(lab, x, "hang", t0);
  return t0;
}

export function resume(lab: FaultTarget, name: string): number {
  signalPids(everyProcess(lab.node(name)), "SIGCONT");
  return Date.now();
}

export async function partition(lab: FaultTarget, name: string, kind = "partition"): Promise<number> {
  const t0 = Date.now();
  await linkEvent(lab.node(name), "partition");
  note(lab, lab.node(name), kind, t0);
  return t0;
}

/**
 * power-loss: the node and its BMC die together (a PSU, PDU or chassis failure): the BMC
 * stops answering, then the node dies as in a silent crash (link down, every process
 * killed). Undo: `bmc-fault NODE --fault none`, then `power-on NODE`.
 */
export async function powerLoss(lab: FaultTarget, name: string): Promise<number> {
  const t0 = Date.now();
  await bmcFault(lab, name, "unreachable");
  await crash(lab, name, "power-loss");
  return t0;
}

/**
 * isolate: the node is cut off from its peers, the API and its BMC network at once, and
 * its processes keep running (only its own watchdog can stop them). Undo: `heal NODE` and
 * `bmc-fault NODE --fault none`.
 */
export async function isolate(lab: FaultTarget, name: string): Promise<number> {
  const t0 = Date.now();
  await bmcFault(lab, name, "unreachable");
  await partition(lab, name, "isolate");
  return t0;
}

/**
 * heal: undo a partition (and partial partitions). The link comes back only if the machine
 * is not dark: a silently crashed node stays silent until it is powered on.
 */
export async function heal(lab: FaultTarget, name: string): Promise<number> {
  const x = lab.node(name);
  await linkEvent(x, "heal");
  await blackhole(x.netns, [HOST_IP, ...peersOf(lab, x)], false);
  return Date.now();
}

const peersOf = (lab: FaultTarget, x: LabNode) => lab.nodes.filter((o) => o !== x).map((o) => o.ip);

/** Partial partition: "peers" = reaches the API (host) but no other node; "api" = the reverse. */
export async function partialPartition(
  lab: FaultTarget,
  name: string,
  mode: "peers" | "api",
): Promise<number> {
  const x = lab.node(name);
  const t0 = Date.now();
  await blackhole(x.netns, mode === "peers" ? peersOf(lab, x) : [HOST_IP], true);
  note(lab, x, `partial-partition-${mode}`, t0);
  return t0;
}

/** The lateness of every answer of a `slow` Redfish BMC unless a fault says otherwise, ms. */
export const SLOW_BMC_LATENCY_MS = 3000;

/**
 * BMC faults. IPMI BMCs support only unreachable (ipmi_sim frozen). `latencyMs`: how late a
 * `slow` BMC answers (default SLOW_BMC_LATENCY_MS).
 */
export async function bmcFault(
  lab: FaultTarget,
  name: string,
  fault: BmcFault,
  latencyMs = SLOW_BMC_LATENCY_MS,
): Promise<void> {
  const x = lab.node(name);
  if (x.redfish) {
    x.redfish.resetFaults();
    await x.redfish.setUnreachable(fault === "unreachable");
    if (fault === "slow") x.redfish.faults.latencyMs = latencyMs;
    if (fault === "lying") x.redfish.faults.lie = true;
    if (fault === "stuck") x.redfish.faults.stuckPoweringOff = true;
  } else if (x.ipmi) {
    if (fault !== "unreachable" && fault !== "none")
      throw new Error(`lab: the IPMI BMC of ${name} supports only "unreachable" and "none"`);
    try {
      process.kill(x.ipmi.pid, fault === "unreachable" ? "SIGSTOP" : "SIGCONT");
    } catch {
      // gone
    }
  }
  note(lab, x, fault === "slow" ? `bmc-slow-${latencyMs}ms` : `bmc-${fault}`, Date.now());
}

/** What a function-only crash stops, and what comes back. */
export interface FunctionCrash {
  /** Stop the node's event source too. */
  source?: boolean;
  /** Start the event source (and its watchdog agent) again after its graceful stop. */
  restartSource?: boolean;
  /**
   * Start the stopped function replicas again this long after the crash, as the kubelet
   * restarts a crashed container. Unset: they stay down until the node is power-cycled.
   */
  restartFunctionsAfterMs?: number;
}

/** Function-only crash on a (healthy) node: stop some function replicas / the event source. */
export async function functionCrash(
  lab: FaultTarget,
  name: string,
  functions: string[],
  opts: FunctionCrash = {},
): Promise<unknown> {
  const x = lab.node(name);
  const q = new URLSearchParams({ functions: functions.join(","), source: opts.source ? "1" : "0" });
  if (opts.restartSource) q.set("restart", "1");
  if (opts.restartFunctionsAfterMs !== undefined)
    q.set("restartAfterMs", String(opts.restartFunctionsAfterMs));
  const answer = await agentPost(x, `/crash?${q.toString()}`);
  note(lab, x, "function-crash", Date.now());
  return answer;
}

/**
 * How long the lab waits for a node agent's answer (a restarted event source included: on
 * the compact plane a node cut off from its peers has no API until healed, and the source
 * starts only with one; chaos seed 429 waited 34 s).
 */
const AGENT_TIMEOUT_MS = 60_000;

/** POST to a node agent's control socket; its JSON answer. */
function agentPost(x: LabNode, path: string): Promise<unknown> {
  const socketPath = join(x.dir, AGENT_SOCKET);
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method: "POST", timeout: AGENT_TIMEOUT_MS }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => {
        if (res.statusCode !== 200)
          return reject(
            new Error(`node agent of ${x.name} (${socketPath}): HTTP ${res.statusCode}: ${body}`),
          );
        try {
          resolve(JSON.parse(body));
        } catch {
          reject(new Error(`node agent of ${x.name} (${socketPath}): not JSON: ${body.slice(0, 200)}`));
        }
      });
      res.on("error", reject);
    });
    req.on("timeout", () =>
      req.destroy(new Error(`node agent of ${x.name} (${socketPath}): no answer in ${AGENT_TIMEOUT_MS} ms`)),
    );
    req.on("error", reject);
    req.end();
  });
}
