// Process helper for the BMC test starters (ipmi_sim, sushy-emulator, simulated nodes):
// each server runs in its own process group under `setpriv --pdeathsig KILL` (so it dies
// with the test runner), its output goes to a log file whose tail is shown on failure,
// and stop() kills exactly that process group. Built on process.ts (the run registry
// lets scripts/reap.sh clean up after a killed run). Never kills anything it did not start.
import dgram from "node:dgram";
import { mkdirSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { ROOT, RUN_DIR } from "./base.ts";
import { ManagedProcess, tailFile } from "./process.ts";

export { ROOT, RUN_DIR };

export interface Spawned {
  readonly pid: number;
  readonly logFile: string;
  /** Resolves when the process group leader exited. */
  readonly exited: Promise<void>;
  alive(): boolean;
  logTail(lines?: number): string;
  /** SIGTERM the group, SIGKILL after graceMs (0: SIGKILL at once); resolves when the leader exited. */
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
  const mp = ManagedProcess.spawn({
    name,
    command: cmd,
    args,
    dir: logDir,
    env: opts.env,
    cwd: opts.cwd ?? logDir,
    logFile: `${name}-${process.pid}-${Date.now()}.log`,
  });
  return {
    pid: mp.pid,
    logFile: mp.logPath,
    exited: mp.waitExit(),
    alive: () => mp.running,
    logTail: (lines = 40) => tailFile(mp.logPath, lines),
    stop: (graceMs = 2000) => (graceMs === 0 ? mp.kill() : mp.stop(graceMs)),
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
      throw new Error(
        `${what}: not ready after ${opts.timeoutMs} ms\n--- log tail ---\n${opts.proc?.logTail() ?? ""}`,
      );
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
