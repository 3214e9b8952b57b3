// Drives a running lab from a test, the way an operator does: `fastfence lab <args>` as a
// child process, the lab controller's fault-injection endpoints (POST /crash, /power-cycle…)
// and polling until a condition holds. Test infrastructure: it only talks to the lab of
// .cache/lab/state.json, and never starts or stops processes other than the CLI it runs.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { ROOT, readState } from "../lab/state.ts";

/** `fastfence lab <args>`; its stdout, or an Error with its output when it exits non-zero. */
export function labCli(args: readonly string[], timeoutMs = 300_000): string {
  const r = spawnSync(process.execPath, [join(ROOT, "cli/main.ts"), "lab", ...args], {
    encoding: "utf8",
    timeout: timeoutMs,
    cwd: ROOT,
  });
  if (r.status !== 0) throw new Error(`lab ${args.join(" ")}: ${r.stderr}${r.stdout}`); // the reason first
  return r.stdout;
}

/** `fastfence lab down`, best effort (for afterAll: a failure there must not hide the test's). */
export function labDown(timeoutMs = 120_000): void {
  spawnSync(process.execPath, [join(ROOT, "cli/main.ts"), "lab", "down"], { cwd: ROOT, timeout: timeoutMs });
}

/** POST to the running lab controller's `path`; its JSON answer, or an Error naming it. */
export async function labControl(
  path: string,
  q: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const s = readState();
  if (!s) throw new Error(`lab control ${path}: no lab is running (.cache/lab/state.json missing)`);
  const r = await fetch(`http://127.0.0.1:${s.controlPort}${path}?${new URLSearchParams(q).toString()}`, {
    method: "POST",
  });
  const body = (await r.json()) as Record<string, unknown>;
  if (!r.ok) throw new Error(`${path}: ${JSON.stringify(body)}`);
  return body;
}

/**
 * Polls `f` every `every` ms until it returns something other than undefined (a throw counts
 * as not yet); after `ms` an Error naming `what` and the last error.
 */
export async function until<T>(
  what: string,
  f: () => Promise<T | undefined>,
  ms: number,
  every = 250,
): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, every));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}

/** What `lab status -o json` says that waitLabHealthy reads. */
interface HealthStatus {
  etcdMembersUp?: number;
  apiBackends?: { up: boolean }[];
  brokersUp?: number | null;
  nodes: { name: string; power: string; ready: string; taints: string[]; agent: string }[];
}

/**
 * Waits until the whole lab is as a trial needs it: every node powered on, Ready, untainted,
 * its agent ready since its last power-on, every Kafka broker back and (compact plane) every
 * etcd member and API server up; then `settleMs` more for a rebooted broker to take its
 * preferred leaderships back (as lab/trial-reset.ts does). The last status in the error.
 */
export async function waitLabHealthy(timeoutMs = 180_000, settleMs = 6000): Promise<void> {
  let last: HealthStatus | undefined;
  try {
    await until(
      "the whole lab healthy",
      async () => {
        const s = (last = JSON.parse(labCli(["status", "-o", "json"])) as HealthStatus);
        const nodesOk = s.nodes.every(
          (n) => n.power === "On" && n.ready === "True" && n.taints.length === 0 && n.agent === "ready",
        );
        const planeOk =
          (s.etcdMembersUp === undefined || s.etcdMembersUp >= Math.min(3, s.nodes.length)) &&
          (s.apiBackends ?? []).every((b) => b.up);
        const brokersOk = s.brokersUp === undefined || s.brokersUp === s.nodes.length;
        return nodesOk && planeOk && brokersOk ? true : undefined;
      },
      timeoutMs,
      2000,
    );
  } catch (err) {
    throw new Error(`${String(err)}; last status: ${JSON.stringify(last)}`, { cause: err });
  }
  await new Promise((r) => setTimeout(r, settleMs));
}
