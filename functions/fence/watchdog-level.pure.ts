// fence's watchdog level (issue 18), the pure half: when a round may try it (every BMC
// level of the round failed without a BMC answering: unreachable or timed out), what the
// fencing replica's own watch of the heartbeat Leases says at a moment (core/watchdog.ts
// watchdogVerdict: wait, refuse, or the node was surely reset by its armed watchdog), the
// attempt that records it, and the check that such an attempt is S1's second proof. It
// never counts a node without an armed watchdog report of the incident's boot, never takes
// another machine's clock, and never decides before the full renewGraceMs + timeoutMs +
// marginMs of quiet. The waiting, the watch and the last look are effects done in
// infra/fence/watchdog-wait.ts; their results come back here as plain data. No I/O.
import type { Attempt, WatchdogProof } from "../../core/incident.ts";
import type { ErrorCode } from "../../core/errors.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import { watchdogForNode } from "../../core/policy.ts";
import {
  effectiveRenewGraceMs,
  parseWatchdogReport,
  watchdogVerdict,
  type ParsedReport,
  type WatchdogPlan,
} from "../../core/watchdog.ts";

/**
 * The plan of a node entry's watchdog level, placed after its `bmcLevels` BMC levels; none
 * when the look after found its proof false for this incident (its index in `lied`).
 */
export function watchdogPlan(
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> },
  bmcLevels: number,
  bootId: string,
  lied: readonly number[] = [],
): WatchdogPlan | undefined {
  const w = watchdogForNode(policy, node);
  if (!w || lied.includes(bmcLevels)) return undefined;
  return { level: bmcLevels, bootId, renewGraceMs: w.renewGraceMs, marginMs: w.marginMs };
}

/** BMC results that mean no BMC answered (a dead or cut-off BMC): only these leave the watchdog level. */
const NO_ANSWER: ReadonlySet<Attempt["result"]> = new Set(["unreachable", "timeout"]);

/**
 * Whether the round's BMC attempts leave the watchdog level to try: none read back Off,
 * none was abandoned by the last look, and every one failed without a BMC answering. A BMC
 * that answered (still on, refused the credentials, a protocol error) is not a dead one.
 */
export function watchdogMayTry(bmcAttempts: readonly Attempt[]): boolean {
  return bmcAttempts.every((a) => NO_ANSWER.has(a.result));
}

/** What the fencing replica's own watch of the heartbeat Leases has seen of the node, on its monotonic clock. */
export interface WatchSeen {
  /** The node's fastfence.io/watchdog annotation as last seen on its heartbeat Lease. */
  report: string | undefined;
  watchSyncedSince: number | undefined;
  lastRenewalSeenAt: number | undefined;
  lastVouchSeenAt: number | undefined;
}

export type WatchdogStep =
  | { kind: "expired"; proof: WatchdogProof; message: string }
  | { kind: "wait"; ms: number; message: string }
  | { kind: "refused"; code: ErrorCode; message: string }
  | { kind: "outOfTime"; code: ErrorCode; retryInMs: number; message: string };

/** How often an unsynced watch is looked at again, ms. */
export const WATCH_POLL_MS = 250;

/**
 * One look at the watch at monotonic `now`: the node is reset (expired), or wait (at most
 * until `endsAt`, the round's end on the same clock), or never by this level (refused).
 * The longest grace any source states counts (core/watchdog.ts effectiveRenewGraceMs): the
 * policy's, the report's, and for a report that states none, the agents' default.
 */
export function watchdogStep(plan: WatchdogPlan, seen: WatchSeen, now: number, endsAt: number): WatchdogStep {
  const report: ParsedReport = parseWatchdogReport(seen.report);
  const grace = effectiveRenewGraceMs(plan.renewGraceMs, report);
  const v = watchdogVerdict({
    now,
    report,
    bootId: plan.bootId,
    watchSyncedSince: seen.watchSyncedSince,
    lastRenewalSeenAt: seen.lastRenewalSeenAt,
    lastVouchSeenAt: seen.lastVouchSeenAt,
    renewGraceMs: grace,
    marginMs: plan.marginMs,
  });
  if (v.reset && report.ok) {
    const quietSince = Math.max(
      seen.watchSyncedSince ?? now,
      seen.lastRenewalSeenAt ?? -Infinity,
      seen.lastVouchSeenAt ?? -Infinity,
    );
    return {
      kind: "expired",
      proof: {
        timeoutMs: report.report.timeoutMs,
        renewGraceMs: grace,
        marginMs: plan.marginMs,
        quietMs: Math.floor(now - quietSince),
        bootId: report.report.bootId,
      },
      message: v.message,
    };
  }
  if (v.reset || v.code === "NoWatchdog")
    return {
      kind: "refused",
      code: "FF_WATCHDOG_NOT_ARMED",
      message: `never fenced by its watchdog: ${v.reset ? "no report" : v.message}`,
    };
  const retryInMs = Math.max(1, Math.ceil(v.retryInMs ?? WATCH_POLL_MS));
  if (now + retryInMs > endsAt)
    return {
      kind: "outOfTime",
      code: "FF_WATCHDOG_NOT_EXPIRED",
      retryInMs,
      message: `${v.message}; the round ends first (retry in ${retryInMs} ms)`,
    };
  return { kind: "wait", ms: Math.min(retryInMs, 1_000), message: v.message };
}

/** The attempt a final step records (a "wait" is never recorded). */
export function watchdogAttempt(
  base: Pick<Attempt, "round" | "by" | "startedAt">,
  level: number,
  step: Exclude<WatchdogStep, { kind: "wait" }>,
  finishedAt: string,
): Attempt {
  const head = { ...base, level, driver: "watchdog" as const, finishedAt };
  if (step.kind === "expired")
    return { ...head, result: "watchdog-expired", watchdog: step.proof, message: step.message };
  return {
    ...head,
    result: step.kind === "outOfTime" ? "timeout" : "error",
    errorCode: step.code,
    message: step.message,
  };
}

/**
 * S1's second proof, checked once more on what the attempt claims: a watchdog level's
 * "watchdog-expired" whose recorded quiet time is at least grace + timeout + margin.
 */
export function watchdogExpired(attempts: readonly Attempt[]): Attempt | undefined {
  return attempts.find((a) => {
    const p = a.watchdog;
    return (
      a.result === "watchdog-expired" &&
      a.driver === "watchdog" &&
      p !== undefined &&
      p.timeoutMs > 0 &&
      p.quietMs >= p.renewGraceMs + p.timeoutMs + p.marginMs
    );
  });
}

/** The FencedOff message of a watchdog proof. */
export function watchdogFencedMessage(a: Attempt): string {
  const p = a.watchdog!;
  return `watchdog (level ${a.level}): armed ${p.timeoutMs} ms watchdog of boot ${p.bootId}; quiet ${p.quietMs} ms ≥ grace ${p.renewGraceMs} + timeout ${p.timeoutMs} + margin ${p.marginMs} ms on the fencing replica's clock: reset by its watchdog`;
}
