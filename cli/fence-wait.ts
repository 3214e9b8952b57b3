// `fastfence fence --wait`: follows one NodeFence after the request, polling it from the
// API, printing a line for each phase change and ending on an outcome (workloads released,
// Blocked, every round failed, ended, deleted) or when the time is up. Read-only: it
// never writes anything, and a poll the API does not answer is only retried.
import { FastfenceError } from "../core/errors.ts";
import { statusOf, type NodeFence } from "../core/incident.ts";
import type { Kube } from "../infra/kube/client.ts";
import { IncidentStore } from "../infra/kube/incidents.ts";
import { progressLine, stepKey, waitVerdict } from "./fence-state.ts";

export interface WaitResult {
  outcome: "released" | "blocked" | "failed" | "ended" | "deleted" | "timeout";
  ok: boolean;
  /** How long it waited, s. */
  seconds: number;
  message: string;
  /** Each phase change seen, in order. */
  steps: { phase: string; reason?: string; message?: string; round: number; elapsedMs: number }[];
}

/**
 * Polls the incident every `pollMs` until an outcome (waitVerdict) or `waitMs` passed,
 * calling `progress` with a line for each phase change. A poll the API does not answer is
 * retried on the next tick.
 */
export async function waitForFence(
  kube: Kube,
  o: { incident: string; namespace: string; maxRounds: number; waitMs: number; pollMs?: number },
  progress: (line: string) => void = () => undefined,
): Promise<WaitResult> {
  const store = new IncidentStore(kube, o.namespace);
  const t0 = Date.now();
  const steps: WaitResult["steps"] = [];
  const seconds = () => Math.round((Date.now() - t0) / 100) / 10;
  let last: string | undefined;
  let phase = "Suspected";
  for (;;) {
    let inc: NodeFence | undefined;
    let read = true;
    try {
      inc = await store.get(o.incident);
    } catch (err) {
      if (!(err instanceof FastfenceError && err.retriable)) throw err;
      read = false;
      progress(`+${seconds()}s ${o.incident}: the API did not answer (${err.message}); trying again`);
    }
    if (read) {
      const key = stepKey(inc);
      if (key !== last) {
        last = key;
        const elapsedMs = Date.now() - t0;
        progress(progressLine(inc, o.incident, elapsedMs, o.maxRounds));
        const st = inc && statusOf(inc);
        if (st) phase = st.phase;
        steps.push({
          phase: inc ? (inc.status ? phase : "Suspected") : "(deleted)",
          ...(st?.reason ? { reason: st.reason } : {}),
          ...(st?.message ? { message: st.message } : {}),
          round: st?.round ?? 0,
          elapsedMs,
        });
      }
      const v = waitVerdict(inc, o.incident, o.maxRounds);
      if (v.done) return { outcome: v.outcome, ok: v.ok, seconds: seconds(), message: v.message, steps };
    }
    const left = o.waitMs - (Date.now() - t0);
    if (left <= 0)
      return {
        outcome: "timeout",
        ok: false,
        seconds: seconds(),
        message:
          `no outcome within ${o.waitMs / 1000} s: incident ${o.incident} is still ${phase}. The request stands and ` +
          `the stages go on with it (is confirm running? It takes up requests every reconcile.intervalMs). ` +
          `Follow it: kubectl -n ${o.namespace} get nodefence ${o.incident} -w`,
        steps,
      };
    await new Promise((r) => setTimeout(r, Math.min(o.pollMs ?? 1000, left)));
  }
}
