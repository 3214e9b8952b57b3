// The run registry: every process group, temp dir and network namespace the harness
// creates is recorded in .cache/run/<pid>.json before or as it is made, so
// scripts/reap.sh can clean up after a killed run, and this process kills and removes
// all of it synchronously on exit, SIGINT, SIGTERM or SIGHUP. It must never signal a
// process group or delete a namespace or dir it did not record itself.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvError, RUN_DIR } from "./base.ts";

interface GroupRecord {
  pgid: number;
  /** starttime (clock ticks since boot, /proc/<pid>/stat field 22) of the group leader. */
  start: number;
  name: string;
}
interface RegistryFile {
  owner: number;
  ownerStart: number;
  groups: GroupRecord[];
  tempDirs: string[];
  netns: string[];
}

/** Start time of a process in clock ticks since boot, or undefined if it is gone. */
export function procStartTime(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 2 (comm) may contain spaces and parens: split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(rest[19]); // field 22 overall
  } catch {
    return undefined;
  }
}

const registry: RegistryFile = {
  owner: process.pid,
  ownerStart: procStartTime(process.pid) ?? 0,
  groups: [],
  tempDirs: [],
  netns: [],
};
const registryPath = join(RUN_DIR, `${process.pid}.json`);

function saveRegistry(): void {
  const empty = registry.groups.length === 0 && registry.tempDirs.length === 0 && registry.netns.length === 0;
  if (empty) {
    rmSync(registryPath, { force: true });
    return;
  }
  mkdirSync(RUN_DIR, { recursive: true });
  const tmp = `${registryPath}.tmp`;
  writeFileSync(tmp, JSON.stringify(registry, null, 1));
  renameSync(tmp, registryPath);
}

/** Record a process group the caller just started (its leader's pid). */
export function recordGroup(g: GroupRecord): void {
  registry.groups.push(g);
  saveRegistry();
}
/** Forget a process group after it was stopped. */
export function forgetGroup(pgid: number): void {
  registry.groups = registry.groups.filter((g) => g.pgid !== pgid);
  saveRegistry();
}

/** A fresh temp dir (under the OS temp dir), recorded for cleanup. */
export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `fastfence-${prefix}-`));
  registry.tempDirs.push(dir);
  saveRegistry();
  return dir;
}

/** Remove a temp dir made by makeTempDir and forget it. */
export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  registry.tempDirs = registry.tempDirs.filter((d) => d !== dir);
  saveRegistry();
}

/** Record a network namespace the caller created, so reap.sh deletes it if the test dies. */
export function recordNetns(name: string): void {
  if (!registry.netns.includes(name)) registry.netns.push(name);
  saveRegistry();
}
/** Forget a namespace after the caller deleted it. */
export function forgetNetns(name: string): void {
  registry.netns = registry.netns.filter((n) => n !== name);
  saveRegistry();
}

/**
 * Create a network namespace `ff-<prefix>-<pid>-<n>` (with its loopback up), recorded
 * for cleanup; returns its name. Enter it with `ip netns exec NAME ...`.
 */
let netnsCounter = 0;
export function makeNetns(prefix: string): string {
  const name = `ff-${prefix}-${process.pid}-${netnsCounter++}`;
  recordNetns(name); // record first: a crash between the two steps must not leak it
  const add = spawnSync("ip", ["netns", "add", name], { encoding: "utf8" });
  if (add.status !== 0) {
    forgetNetns(name);
    throw new EnvError(`ip netns add ${name} failed: ${add.stderr}`);
  }
  spawnSync("ip", ["-n", name, "link", "set", "lo", "up"]);
  return name;
}

/** Delete a namespace made by makeNetns (no error if it is already gone). */
export function deleteNetns(name: string): void {
  if (existsSync(`/run/netns/${name}`)) spawnSync("ip", ["netns", "delete", name]);
  forgetNetns(name);
}

/** What this test process currently has recorded (for tests and diagnostics). */
export function registrySnapshot(): { path: string; groups: number[]; tempDirs: string[]; netns: string[] } {
  return {
    path: registryPath,
    groups: registry.groups.map((g) => g.pgid),
    tempDirs: [...registry.tempDirs],
    netns: [...registry.netns],
  };
}

/** Kill every recorded process group and remove every recorded temp dir, synchronously. */
export function killEverythingSync(): void {
  for (const g of registry.groups) {
    try {
      process.kill(-g.pgid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  registry.groups = [];
  for (const d of registry.tempDirs) rmSync(d, { recursive: true, force: true });
  registry.tempDirs = [];
  for (const ns of registry.netns) {
    if (existsSync(`/run/netns/${ns}`)) spawnSync("ip", ["netns", "delete", ns]);
  }
  registry.netns = [];
  try {
    saveRegistry();
  } catch {
    // best effort while exiting
  }
}

let handlersInstalled = false;
/** On exit, SIGINT, SIGTERM or SIGHUP: killEverythingSync (installed once, by the first spawn). */
export function installExitHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on("exit", () => killEverythingSync());
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(sig, () => {
      killEverythingSync();
      process.exit(sig === "SIGINT" ? 130 : sig === "SIGTERM" ? 143 : 129);
    });
  }
}
