// Managed server processes for the harness: spawn each server in its own process group
// (setsid) behind `setpriv --pdeathsig KILL` so it dies with the spawning process, log to
// a file, wait for readiness, stop by process group; and short commands run to
// completion the same way. Every group is recorded in the run registry (registry.ts).
// Must never signal a process it did not start, and never send traffic off loopback.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { EnvError, sleep } from "./base.ts";
import { forgetGroup, installExitHandlers, procStartTime, recordGroup } from "./registry.ts";

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
      // A timer left pending would keep a process that stops servers (a globalSetup) alive.
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), graceMs)));
      const first = await Promise.race([this.exited.then(() => "exited" as const), timeout]);
      clearTimeout(timer);
      if (first === "timeout") {
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
