// Fencing levels: an ordered list of BMC drivers per node (e.g. Redfish, then IPMI, then a
// fence agent). Each level runs powerOffAndConfirm within its own budget; an error or a
// timeout moves on to the next level; success only when power-off was read back (S1).
// Every attempt is returned (level, driver kind, target, start/end, result, error code)
// for the incident record. Attempts carry codes and secret-free messages only.
import { FastfenceError } from "../../core/errors.ts";
import { powerOffAndConfirm, type BmcDriver, type ConfirmResult } from "./driver.ts";

export interface FencingLevel {
  /** Short label, e.g. "redfish", "ipmi", "pdu". */
  name: string;
  driver: BmcDriver;
  /** Budget for this level: the off command plus the read-back. */
  timeoutMs: number;
  pollMs?: number;
  callTimeoutMs?: number;
}

export interface LevelAttempt {
  level: number;
  name: string;
  driver: string;
  target: string;
  startMs: number;
  endMs: number;
  result: "confirmed-off" | "failed" | "cancelled";
  errorCode?: string;
  error?: string;
  offIssuedAt?: number;
  confirmedAt?: number;
  readbacks?: number;
}

export interface FenceOutcome {
  confirmed: boolean;
  /** Index of the level that confirmed power-off. */
  level?: number;
  confirmedAt?: number;
  attempts: LevelAttempt[];
}

export async function fenceWithLevels(
  levels: FencingLevel[],
  opts: {
    now: () => number;
    signal?: AbortSignal;
    sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  },
): Promise<FenceOutcome> {
  const attempts: LevelAttempt[] = [];
  for (let i = 0; i < levels.length; i++) {
    const lv = levels[i]!;
    if (opts.signal?.aborted) break;
    const startMs = opts.now();
    const base = { level: i, name: lv.name, driver: lv.driver.kind, target: lv.driver.target, startMs };
    const ac = new AbortController();
    const onAbort = () => ac.abort(opts.signal?.reason);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    // a hard stop for this level even if a driver ignores its per-call timeout
    const hard = setTimeout(() => ac.abort(new Error("level timeout")), lv.timeoutMs + 1000);
    try {
      const r: ConfirmResult = await powerOffAndConfirm(lv.driver, {
        timeoutMs: lv.timeoutMs,
        pollMs: lv.pollMs ?? 200,
        callTimeoutMs: lv.callTimeoutMs,
        now: opts.now,
        signal: ac.signal,
        sleep: opts.sleep,
      });
      attempts.push({
        ...base,
        endMs: opts.now(),
        result: "confirmed-off",
        offIssuedAt: r.offIssuedAt,
        confirmedAt: r.confirmedAt,
        readbacks: r.readbacks.length,
      });
      return { confirmed: true, level: i, confirmedAt: r.confirmedAt, attempts };
    } catch (err) {
      const cancelled = opts.signal?.aborted === true;
      const fe = err instanceof FastfenceError ? err : undefined;
      attempts.push({
        ...base,
        endMs: opts.now(),
        result: cancelled ? "cancelled" : "failed",
        errorCode: fe?.code ?? (ac.signal.aborted ? "FF_BMC_TIMEOUT" : "FF_INTERNAL"),
        error: fe?.message ?? (ac.signal.aborted ? "level budget exhausted" : "unexpected error"),
      });
      if (cancelled) break;
    } finally {
      clearTimeout(hard);
      opts.signal?.removeEventListener("abort", onAbort);
    }
  }
  return { confirmed: false, attempts };
}
