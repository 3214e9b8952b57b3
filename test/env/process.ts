// Managed server processes for the real-server test environment: spawn each server in
// its own process group (setsid) behind `setpriv --pdeathsig KILL` so it dies with the
// test process, log to a file in its temp dir, wait for readiness, stop by process group.
// Every process group, temp dir and network namespace is recorded in
// .cache/run/<test pid>.json so scripts/reap.sh can clean up after a killed test run.
// Must never signal a process it did not start, and never send traffic off loopback.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { FastfenceError } from "../../core/errors.ts";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const CACHE = join(ROOT, ".cache");
/** Unchanged upstream CRDs (KubeVirt, Knative, Strimzi, metal3, medik8s, OpenShift); see third_party/crds/SOURCES.md. */
export const THIRD_PARTY_CRDS = join(ROOT, "third_party/crds");
export const BIN = join(CACHE, "bin");
export const RUN_DIR = join(CACHE, "run");

/** A test-environment server failed to start, become ready, or stop. */
export class EnvError extends FastfenceError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super("FF_INTERNAL", message, options);
  }
}

// ---------------------------------------------------------------- registry

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

const registry: RegistryFile = {
  owner: process.pid,
  ownerStart: procStartTime(process.pid) ?? 0,
  groups: [],
  tempDirs: [],
  netns: [],
};
const registryPath = join(RUN_DIR, `${process.pid}.json`);

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

function recordGroup(g: GroupRecord): void {
  registry.groups.push(g);
  saveRegistry();
}
function forgetGroup(pgid: number): void {
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
function installExitHandlers(): void {
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

// ---------------------------------------------------------------- ports

const handedOut = new Set<number>();

/** A TCP port on 127.0.0.1 that was free a moment ago (never handed out twice by this process). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise<number>((res, rej) => {
      const srv = createServer();
      srv.once("error", rej);
      srv.listen(0, "127.0.0.1", () => {
        const addr = srv.address();
        const p = typeof addr === "object" && addr ? addr.port : 0;
        srv.close(() => res(p));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new EnvError("no free port found");
}

/** True if something accepts TCP connections on 127.0.0.1:port. */
export function isListening(port: number, host = "127.0.0.1"): boolean {
  // /proc/net/tcp: state 0A = LISTEN; local address is hex ip:port.
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const hexIp = host
    .split(".")
    .map((o) => Number(o).toString(16).toUpperCase().padStart(2, "0"))
    .reverse()
    .join("");
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] !== "0A" || !cols[1]) continue;
      const [ip, p] = cols[1].split(":");
      if (p !== hexPort) continue;
      // IPv4, any-address, or IPv4-mapped IPv6 (::ffff:a.b.c.d, as Java binds).
      if (ip === hexIp || /^0+$/.test(ip ?? "") || ip === `0000000000000000FFFF0000${hexIp}`) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------- processes

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface SpawnOptions {
  /** Short name used in logs and errors, e.g. "etcd" or "kafka-1". */
  name: string;
  command: string;
  args: string[];
  /** Directory for the log file (usually the server's temp dir). */
  dir: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Log file name inside dir; default `<name>.log`. Appended to across restarts. */
  logFile?: string;
}

/** Last `n` lines of a file, or a note that it cannot be read. */
export function tailFile(path: string, n = 40): string {
  try {
    const lines = readFileSync(path, "utf8").split("\n");
    return lines.slice(-n - 1).join("\n");
  } catch (err) {
    return `(cannot read ${path}: ${String(err)})`;
  }
}

/**
 * One server process in its own process group. Its `setpriv --pdeathsig KILL` wrapper
 * makes the kernel kill it when the spawning thread (the test process) dies.
 */
export class ManagedProcess {
  readonly name: string;
  readonly logPath: string;
  readonly pid: number;
  private readonly child: ChildProcess;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly exited: Promise<void>;

  private constructor(opts: SpawnOptions) {
    installExitHandlers();
    this.name = opts.name;
    this.logPath = join(opts.dir, opts.logFile ?? `${opts.name}.log`);
    const fd = openSync(this.logPath, "a");
    try {
      this.child = spawn("setpriv", ["--pdeathsig", "KILL", "--", opts.command, ...opts.args], {
        detached: true,
        stdio: ["ignore", fd, fd],
        env: opts.env ?? process.env,
        cwd: opts.cwd ?? opts.dir,
      });
    } finally {
      closeSync(fd);
    }
    if (this.child.pid === undefined) throw new EnvError(`${opts.name}: spawn failed`);
    this.pid = this.child.pid;
    recordGroup({ pgid: this.pid, start: procStartTime(this.pid) ?? 0, name: opts.name });
    this.exited = new Promise((res) => {
      this.child.once("exit", (code, signal) => {
        this.exitInfo = { code, signal };
        res();
      });
    });
    this.child.once("error", () => undefined); // reported through exit / waitReady
  }

  static spawn(opts: SpawnOptions): ManagedProcess {
    return new ManagedProcess(opts);
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  /** Wait until `check` returns true (polled every `intervalMs`); on failure throw with the log tail. */
  async waitReady(
    check: () => Promise<boolean> | boolean,
    timeoutMs: number,
    intervalMs = 100,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let lastErr: unknown;
    while (Date.now() < deadline) {
      if (!this.running) {
        throw new EnvError(
          `${this.name} exited (code ${this.exitInfo?.code}, signal ${this.exitInfo?.signal}) before it was ready; last lines of ${this.logPath}:\n${tailFile(this.logPath)}`,
        );
      }
      try {
        if (await check()) return;
      } catch (err) {
        lastErr = err;
      }
      await sleep(intervalMs);
    }
    throw new EnvError(
      `${this.name} not ready after ${timeoutMs} ms (last check error: ${String(lastErr)}); last lines of ${this.logPath}:\n${tailFile(this.logPath)}`,
      { cause: lastErr },
    );
  }

  /** SIGTERM to the process group, SIGKILL after `graceMs`; resolves when the leader has exited. */
  async stop(graceMs = 5000): Promise<void> {
    if (this.running) {
      this.signalGroup("SIGTERM");
      this.signalGroup("SIGCONT"); // a frozen server must see its SIGTERM
      const timer = sleep(graceMs).then(() => "timeout" as const);
      if ((await Promise.race([this.exited.then(() => "exited" as const), timer])) === "timeout") {
        this.signalGroup("SIGKILL");
        await this.exited;
      }
    }
    this.signalGroup("SIGKILL"); // stragglers left in the group, if any
    forgetGroup(this.pid);
  }

  /** SIGKILL to the process group (a crash / power loss); resolves when the leader has exited. */
  async kill(): Promise<void> {
    if (this.running) this.signalGroup("SIGKILL");
    await this.exited;
    this.signalGroup("SIGKILL");
    forgetGroup(this.pid);
  }

  /** Send a signal to the whole process group (e.g. SIGSTOP/SIGCONT to freeze a server). */
  signalGroup(sig: NodeJS.Signals): void {
    try {
      process.kill(-this.pid, sig);
    } catch {
      // group already gone
    }
  }

  /** Resolves when the leader process has exited. */
  waitExit(): Promise<void> {
    return this.exited;
  }
}

/** Run a short command to completion; throws with its output if it fails. */
export async function runCommand(
  command: string,
  args: string[],
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<string> {
  return await new Promise((res, rej) => {
    // pdeathsig: a short command dies with the test process too.
    const child = spawn("setpriv", ["--pdeathsig", "KILL", "--", command, ...args], {
      cwd: opts.cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 60_000);
    child.once("error", (err) => {
      clearTimeout(timer);
      rej(new EnvError(`${command} failed to start`, { cause: err }));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) res(out);
      else
        rej(
          new EnvError(
            `${command} ${args.join(" ")} failed (code ${code}, signal ${signal}):\n${out.slice(-4000)}`,
          ),
        );
    });
  });
}

/** Something with an async stop(): a server, a group of servers, an environment. */
export interface Stoppable {
  stop(): Promise<void>;
}

/**
 * Cleanup stack for vitest hooks: `const env = new EnvScope()` in the file; in beforeAll,
 * `env.add(await startX())`; in afterAll, `await env.stopAll()`. stopAll stops in reverse
 * order and never throws before it has tried every item.
 */
export class EnvScope {
  private readonly items: Stoppable[] = [];

  add<T extends Stoppable>(item: T): T {
    this.items.push(item);
    return item;
  }

  async stopAll(): Promise<void> {
    const errors: unknown[] = [];
    while (this.items.length > 0) {
      const item = this.items.pop();
      try {
        await item?.stop();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0)
      throw new EnvError(`${errors.length} environment part(s) failed to stop`, { cause: errors[0] });
  }
}

/**
 * Start something made of several parts; if any step throws, stop the parts already
 * started (in reverse) and rethrow. `build` registers each started part with `scope.add`.
 */
export async function startAll<T>(build: (scope: EnvScope) => Promise<T>): Promise<T> {
  const scope = new EnvScope();
  try {
    return await build(scope);
  } catch (err) {
    await scope.stopAll().catch(() => undefined);
    throw err;
  }
}
