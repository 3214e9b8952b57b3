// What a lab left behind after `lab down`, for the files that bring one up and take it down
// (lab-cleanup: after a SIGKILLed controller; standalone-checkout: after a normal down):
// its processes (taken by pid and start time while the lab ran, so a reused pid is not
// counted), network namespaces, veths, bridge, dirs, state.json, sockets owned on the
// lab's host address, and the controller's test-env registry entry. No vitest here: the
// snapshot also runs as a plain script inside standalone-checkout's isolated checkout.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LAB_RUN, ROOT, STATE_PATH, pidsInNetns, procStart, type LabState } from "../../lab/state.ts";

/** A lab process, named by pid and start time (a pid reused later is another process). */
export interface LabProcess {
  pid: number;
  start: number;
}

/** Every process of the lab `s` describes, while it runs. */
export function snapshot(s: LabState): LabProcess[] {
  const pids = [
    ...s.netns.flatMap(pidsInNetns),
    ...s.procs.map((p) => p.pid),
    ...(s.controller ? [s.controller.pid] : []),
  ];
  return pids.map((pid) => ({ pid, start: procStart(pid) ?? -1 })).filter((p) => p.start >= 0);
}

/** What the lab `s` (its processes `before`) left behind, one line each; empty when nothing. */
export function leftovers(before: LabProcess[], s: LabState): string[] {
  const out: string[] = [];
  const alive = before.filter((p) => procStart(p.pid) === p.start);
  if (alive.length) out.push(`processes still alive: ${alive.map((p) => p.pid).join(", ")}`);
  const netns = spawnSync("ip", ["netns", "list"], { encoding: "utf8" }).stdout;
  if (/fflab-/.test(netns)) out.push(`network namespaces: ${netns.trim().replace(/\n/g, ", ")}`);
  const links = spawnSync("ip", ["-o", "link", "show"], { encoding: "utf8" }).stdout;
  const labLinks = links.split("\n").filter((l) => /fflab0|fflv-/.test(l));
  if (labLinks.length) out.push(`links: ${labLinks.map((l) => l.split(":")[1]?.trim()).join(", ")}`);
  for (const d of [...s.dirs, LAB_RUN, STATE_PATH]) if (existsSync(d)) out.push(`${d} left behind`);
  // No socket owned by any process on the lab's host address (the API relay, BMCs);
  // kernel-only TIME_WAIT leftovers (inode 0) expire by themselves.
  const tcp = readFileSync("/proc/net/tcp", "utf8") + readFileSync("/proc/net/udp", "utf8");
  const hex = "01004D0A"; // 10.77.0.1 little-endian
  const owned = tcp.split("\n").filter((l) => {
    const f = l.trim().split(/\s+/);
    return f[1]?.startsWith(`${hex}:`) && f[9] !== "0";
  });
  if (owned.length) out.push(`sockets on the lab's host address: ${owned.length}`);
  // The controller's test-env registry was reaped.
  const registry = s.controller && join(ROOT, ".cache/run", `${s.controller.pid}.json`);
  if (registry && existsSync(registry)) out.push(`${registry} left behind`);
  return out;
}
