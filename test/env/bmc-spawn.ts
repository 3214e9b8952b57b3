// Process helper for the BMC test starters (ipmi_sim, sushy-emulator, simulated nodes):
// each server runs in its own process group under `setpriv --pdeathsig KILL` (so it dies
// with the test runner), its output goes to a log file whose tail is shown on failure,
// and stop() kills exactly that process group. Switch to test/env/process.ts once it
// exists. Never kills anything it did not start.
import { spawn, type ChildProcess } from "node:child_process";
import dgram from "node:dgram";
import { mkdirSync, openSync, readFileSync, closeSync } from "node:fs";
import net from "node:net";
import path from "node:path";

export const ROOT = path.resolve(import.meta.dirname, "../..");
export const RUN_DIR = path.join(ROOT, ".cache/run");

export interface Spawned {
  readonly pid: number;
  readonly logFile: string;
  readonly child: ChildProcess;
  /** Resolves with the exit code (or signal name) when the process ends. */
  readonly exited: Promise<number | string>;
  alive(): boolean;
  logTail(lines?: number): string;
  /** SIGTERM the group, SIGKILL after graceMs; resolves when the leader exited. */
  stop(graceMs?: number): Promise<void>;
}

export function spawnGroup(
  name: string,
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; logDir?: string } = {},
): Spawned {
  const logDir = opts.logDir ?? path.join(RUN_DIR, "logs");
  mkdirSync(logDir, { recursive: true });
  const logFile = path.join(logDir, `${name}-${process.pid}-${Date.now()}.log`);
  const fd = openSync(logFile, "a");
  const child = spawn("setpriv", ["--pdeathsig", "KILL", "--", cmd, ...args], {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    detached: true,
    stdio: ["ignore", fd, fd],
  });
  closeSync(fd);
  let done = false;
  const exited = new Promise<number | string>((resolve) => {
    child.on("exit", (code, sig) => {
      done = true;
      resolve(code ?? sig ?? -1);
    });
    child.on("error", () => {
      done = true;
      resolve(-1);
    });
  });
  const pid = child.pid ?? -1;
  return {
    pid,
    logFile,
    child,
    exited,
    alive: () => !done,
    logTail: (lines = 40) => {
      try {
        return readFileSync(logFile, "utf8").split("\n").slice(-lines).join("\n");
      } catch {
        return "";
      }
    },
    stop: async (graceMs = 2000) => {
      if (done || pid < 0) return;
      try {
        process.kill(-pid, graceMs === 0 ? "SIGKILL" : "SIGTERM");
      } catch {
        return;
      }
      const t = setTimeout(() => {
        try {
          process.kill(-pid, "SIGKILL");
        } catch {
          // already gone
        }
      }, graceMs);
      await exited;
      clearTimeout(t);
      try {
        process.kill(-pid, "SIGKILL"); // leftovers of the group
      } catch {
        // none
      }
    },
  };
}

export async function freeTcpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export async function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket("udp4");
    s.once("error", reject);
    s.bind(0, "127.0.0.1", () => {
      const port = s.address().port;
      s.close(() => resolve(port));
    });
  });
}

/** Polls `probe` until it resolves true or the budget ends; throws with the log tail. */
export async function waitFor(
  what: string,
  probe: () => Promise<boolean>,
  opts: { timeoutMs: number; intervalMs?: number; proc?: Spawned },
): Promise<void> {
  const end = Date.now() + opts.timeoutMs;
  for (;;) {
    if (opts.proc && !opts.proc.alive()) {
      throw new Error(`${what}: process exited early\n--- log tail ---\n${opts.proc.logTail()}`);
    }
    try {
      if (await probe()) return;
    } catch {
      // not yet
    }
    if (Date.now() > end) {
      throw new Error(`${what}: not ready after ${opts.timeoutMs} ms\n--- log tail ---\n${opts.proc?.logTail() ?? ""}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100));
  }
}

/** Direct children of a process (Linux /proc). */
export function childPids(pid: number): number[] {
  try {
    const tasks = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
    return tasks ? tasks.split(/\s+/).map(Number) : [];
  } catch {
    return [];
  }
}

export function pidAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // a zombie counts as dead: it runs nothing any more
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return false;
  }
}
