// The lab's on-disk record (.cache/lab/state.json): every process, network namespace,
// veth, bridge, directory and port the lab created, written before each thing is made,
// so `fastfence lab down` from any other process (also after the lab controller was
// SIGKILLed or a run failed half-way) removes exactly those things and nothing else.
// It never signals a process it did not record (pid reuse is caught by start time),
// and never deletes a namespace, link or directory that is not the lab's own.
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync, spawnSync } from "node:child_process";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const LAB_DIR = join(ROOT, ".cache", "lab");
export const STATE_PATH = join(LAB_DIR, "state.json");
/** Everything the lab writes (node dirs, logs, kubeconfigs) lives under here. */
export const LAB_RUN = join(LAB_DIR, "run");

/** Names the lab owns: anything else is never touched. */
export const NETNS_PREFIX = "fflab-";
export const BRIDGE = "fflab0";
export const VETH_PREFIX = "fflv-";
export const SUBNET = "10.77.0";
export const HOST_IP = `${SUBNET}.1`;

export interface ProcRecord {
  pid: number;
  /** /proc/<pid>/stat starttime; 0 = unknown. */
  start: number;
  name: string;
  /** Kill the whole process group (pid is its leader). */
  group: boolean;
}

export interface NodeRecord {
  name: string;
  index: number;
  netns: string;
  veth: string;
  ip: string;
  bmc: "ipmi" | "redfish";
  bmcPort: number;
  dir: string;
}

export interface LabState {
  version: 1;
  createdAt: string;
  phase: "starting" | "ready" | "stopping" | "failed";
  controller?: ProcRecord;
  /** 127.0.0.1 port of the controller's control endpoint. */
  controlPort?: number;
  bridge?: string;
  netns: string[];
  veths: string[];
  dirs: string[];
  procs: ProcRecord[];
  nodes: NodeRecord[];
  ports: Record<string, number>;
  kubeconfig?: string;
  brokers?: string;
  /** The unpacked artifact the node agents run (harness/artifact.ts). */
  artifact?: { version: string; sha256: string; dir: string };
  /** The overlay whose RBAC and admission policies the lab runs under, and its render's hash. */
  access?: { overlay: string; renderHash: string };
  error?: string;
}

export function emptyState(): LabState {
  return {
    version: 1,
    createdAt: new Date().toISOString(),
    phase: "starting",
    netns: [],
    veths: [],
    dirs: [],
    procs: [],
    nodes: [],
    ports: {},
  };
}

export function readState(): LabState | undefined {
  try {
    return JSON.parse(readFileSync(STATE_PATH, "utf8")) as LabState;
  } catch {
    return undefined;
  }
}

export function writeState(s: LabState): void {
  mkdirSync(LAB_DIR, { recursive: true });
  const tmp = `${STATE_PATH}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(s, null, 1));
  renameSync(tmp, STATE_PATH);
}

/** starttime of a live, non-zombie process, or undefined. */
export function procStart(pid: number): number | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = s.slice(s.lastIndexOf(")") + 2).split(" ");
    if (rest[0] === "Z") return undefined;
    return Number(rest[19]);
  } catch {
    return undefined;
  }
}

export function procAlive(r: { pid: number; start: number }): boolean {
  const st = procStart(r.pid);
  return st !== undefined && (r.start === 0 || st === r.start);
}

export function record(pid: number, name: string, group = true): ProcRecord {
  return { pid, start: procStart(pid) ?? 0, name, group };
}

/** Inode of a named network namespace, or undefined. */
export function netnsInode(ns: string): number | undefined {
  try {
    return statSync(`/run/netns/${ns}`).ino;
  } catch {
    return undefined;
  }
}

/** Every live process whose network namespace is `ns` (one of ours). */
export function pidsInNetns(ns: string): number[] {
  const ino = netnsInode(ns);
  if (ino === undefined) return [];
  const want = `net:[${ino}]`;
  const out: number[] = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readlinkSync(`/proc/${d}/ns/net`) === want) out.push(Number(d));
    } catch {
      // gone or a kernel thread
    }
  }
  return out;
}

/** NSpid chain of a process (host pid first, innermost last). */
export function nsPids(pid: number): number[] {
  try {
    const m = /^NSpid:\s+(.+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? m[1]!.trim().split(/\s+/).map(Number) : [];
  } catch {
    return [];
  }
}

export function signalPids(pids: number[], sig: NodeJS.Signals): number {
  let n = 0;
  for (const p of pids) {
    try {
      process.kill(p, sig);
      n++;
    } catch {
      // gone
    }
  }
  return n;
}

function ip(args: string[]): boolean {
  return spawnSync("ip", args, { stdio: "ignore" }).status === 0;
}

function linkExists(name: string): boolean {
  return spawnSync("ip", ["link", "show", name], { stdio: "ignore" }).status === 0;
}

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Remove everything `s` records, synchronously (usable from exit handlers and from a
 * process that never saw the lab start). Returns a list of what was done.
 */
export function teardownFromState(s: LabState, removeStateFile = true): string[] {
  const done: string[] = [];
  // 1. The controller (it owns the control plane via pdeathsig, so its death takes those too).
  if (s.controller && s.controller.pid !== process.pid && procAlive(s.controller)) {
    signalPids([s.controller.pid], "SIGKILL");
    done.push(`killed controller ${s.controller.pid}`);
  }
  // 2. Every process inside the lab's network namespaces (thaw first, then kill).
  for (let round = 0; round < 30; round++) {
    const pids = s.netns.filter((n) => n.startsWith(NETNS_PREFIX)).flatMap(pidsInNetns);
    if (pids.length === 0) break;
    signalPids(pids, "SIGKILL");
    signalPids(pids, "SIGCONT");
    if (round === 0) done.push(`killed ${pids.length} node process(es)`);
    sleepSync(100);
  }
  // 3. Recorded process groups (start-time checked).
  for (const r of s.procs) {
    if (!procAlive(r)) continue;
    try {
      process.kill(r.group ? -r.pid : r.pid, "SIGKILL");
      process.kill(r.group ? -r.pid : r.pid, "SIGCONT");
      done.push(`killed ${r.name} (${r.pid})`);
    } catch {
      // gone
    }
  }
  for (let i = 0; i < 50 && s.procs.some(procAlive); i++) sleepSync(100);
  // 4. Namespaces, veths, bridge.
  for (const ns of s.netns) {
    if (!ns.startsWith(NETNS_PREFIX)) continue;
    if (existsSync(`/run/netns/${ns}`) && ip(["netns", "delete", ns])) done.push(`deleted netns ${ns}`);
  }
  for (const v of s.veths) {
    if (v.startsWith(VETH_PREFIX) && linkExists(v) && ip(["link", "delete", v]))
      done.push(`deleted veth ${v}`);
  }
  if (s.bridge === BRIDGE && linkExists(BRIDGE) && ip(["link", "delete", BRIDGE]))
    done.push(`deleted bridge ${BRIDGE}`);
  // 5. Directories: only the lab's own run dir and the harness's temp dirs.
  const tmp = resolve(tmpdir());
  for (const d of s.dirs) {
    const real = resolve(d);
    const ours =
      real.startsWith(LAB_RUN + "/") ||
      real === LAB_RUN ||
      (dirname(real) === tmp && real.split("/").pop()!.startsWith("fastfence-"));
    if (ours && existsSync(real)) {
      rmSync(real, { recursive: true, force: true });
      done.push(`removed ${real}`);
    }
  }
  // 6. The harness run registry of a dead controller (its groups and /tmp dirs).
  if (existsSync(join(ROOT, "scripts", "reap.sh"))) {
    try {
      const out = execFileSync(join(ROOT, "scripts", "reap.sh"), {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
      if (out.trim()) done.push(out.trim());
    } catch {
      // reap is best effort
    }
  }
  if (removeStateFile) rmSync(STATE_PATH, { force: true });
  return done;
}

/**
 * The lab names on this machine (namespaces fflab-*, veths fflv-*, the bridge fflab0), as a
 * state to tear down, or undefined if there are none: what a lab that died without cleaning
 * up left, in this checkout or another. Call only while holding the machine claim
 * (machine-claim.ts): then no live lab owns them.
 */
export function leftovers(): LabState | undefined {
  const s = emptyState();
  try {
    s.netns = readdirSync("/run/netns").filter((n) => n.startsWith(NETNS_PREFIX));
  } catch {
    // no named namespaces at all
  }
  const links = spawnSync("ip", ["-o", "link", "show"], { encoding: "utf8" }).stdout ?? "";
  for (const m of links.matchAll(/^\d+:\s+([^:@\s]+)/gm)) {
    if (m[1]!.startsWith(VETH_PREFIX)) s.veths.push(m[1]!);
    if (m[1] === BRIDGE) s.bridge = BRIDGE;
  }
  return s.netns.length || s.veths.length || s.bridge ? s : undefined;
}

/**
 * On these signals, tear the lab down from its state file and exit with `code`. Synchronous:
 * harness/env's own exit handler exits synchronously after ours. `say` is called first.
 */
export function tearDownOnSignals(
  signals: readonly NodeJS.Signals[],
  code: number,
  say?: (sig: NodeJS.Signals) => void,
): void {
  for (const sig of signals)
    process.once(sig, () => {
      say?.(sig);
      const st = readState();
      if (st) teardownFromState(st);
      process.exit(code);
    });
}

/**
 * Before a new lab is made (the machine claimed): tear down this checkout's previous lab
 * if its controller is gone (throws if it still runs), then whatever a dead lab left.
 */
export function clearForNewLab(log?: (line: string) => void): void {
  const prev = readState();
  if (prev) {
    if (prev.controller && procAlive(prev.controller) && prev.controller.pid !== process.pid)
      throw new Error(
        `lab: already up (controller pid ${prev.controller.pid}); run "fastfence lab down" first`,
      );
    teardownFromState(prev);
  }
  const left = leftovers();
  if (left) {
    const names = [...left.netns, ...left.veths, ...(left.bridge ? [left.bridge] : [])];
    log?.(`removing what a lab that is no longer running left on this machine: ${names.join(", ")}`);
    teardownFromState(left, false);
  }
}
