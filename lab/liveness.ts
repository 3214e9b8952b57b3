// The liveness checker of `make chaos`: after a schedule (lab/chaos-schedule.ts), did
// everything that had to finish finish in time? Two rules, each with its bound stated from
// the policy in force (never tuned to pass; detection assumes a silent node, whose probes
// each wait their whole timeout):
//  L1 a node that stayed broken (crashed, or hung / partitioned and never resumed), whose
//     BMC answered and whose peers could observe it, is Released within
//     T + detection + 2 rounds (round + backoff) + the Lease (a driver that died) +
//     2 reconcile intervals + the release, where T is when all of that last became true;
//     unless its BMC came back only after every round had already failed, or could have
//     (then the incident must be a final FenceFailed, which is an operator's case, not a
//     wedge): at the latest after detection + maxRounds × (round + backoff), or earlier when
//     the incident's own attempts all ran while the BMC was broken and it ended final;
//  L2 no incident is left without progress: none still Confirmed or Fencing, and no
//     retriable FenceFailed, longer than one round, the Lease and two reconcile intervals
//     after it entered that state.
// Pure: no I/O, no clock.
import { isFinalFenceFailed, type NodeFence } from "../core/incident.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import type { Schedule } from "./chaos-schedule.ts";

/** The policy's timings the bounds are built from, ms. */
export interface Timings {
  /** Probe misses of a silent node to a suspicion, plus one evidence window to corroborate it. */
  detectMs: number;
  roundMs: number;
  backoffMs: number;
  maxRounds: number;
  leaseMs: number;
  reconcileMs: number;
  /** From FencedOff to Released (taint and deletes): a fixed allowance. */
  releaseMs: number;
}

/** Allowance for the release (taint, deletes, one status write). */
const RELEASE_MS = 5_000;

/**
 * How long an observer takes, at the most, to count `misses` probe misses of a node that
 * answers nothing (the lab's crash is silent): each probe waits its whole timeout T, and the
 * prober skips the ticks (every interval I) that come while its probe is in flight, so a
 * probe starts every P = (floor(T / I) + 1) × I; the first one that sees the death starts
 * within P of it. So misses × P + T. A node that refuses at once (proc-crash) needs only
 * misses × I; the bound takes the silent case.
 */
export function silentMissesMs(probe: { intervalMs: number; timeoutMs: number }, misses: number): number {
  const period = (Math.floor(probe.timeoutMs / probe.intervalMs) + 1) * probe.intervalMs;
  return misses * period + probe.timeoutMs;
}

export function timingsOf(p: FencingPolicySpec): Timings {
  return {
    detectMs:
      silentMissesMs(p.probe, p.suspicion.missThreshold) +
      p.suspicion.minSuspectMs +
      p.corroboration.evidenceWindowMs,
    roundMs: p.timeouts.powerOffTimeoutMs,
    backoffMs: p.fencing.retryBackoffMs,
    maxRounds: p.fencing.maxRounds,
    leaseMs: p.timeouts.leaseDurationMs,
    reconcileMs: p.reconcile.intervalMs * 1.2 + p.reconcile.stalledAfterMs,
    releaseMs: RELEASE_MS,
  };
}

export interface LivenessFailure {
  rule: "L1" | "L2";
  node: string;
  incident?: string;
  detail: string;
}

export interface LivenessVerdict {
  /** ms from the schedule's start by which the broken node must be Released, if it must. */
  releaseBoundMs?: number;
  /** Why no release is expected (no break, resumed, BMC never answered, ...). */
  noReleaseBecause?: string;
  /** ms from the schedule's start at which the broken node's incident was Released. */
  releasedMs?: number;
  failures: LivenessFailure[];
}

export interface LivenessInput {
  schedule: Schedule;
  /** ms epoch of the schedule's start (step times are relative to it). */
  t0: number;
  /** ms epoch at which the checker looks (the end of the follow window). */
  now: number;
  /** Incidents opened during the schedule, as the API holds them now. */
  incidents: readonly NodeFence[];
  timings: Timings;
}

/**
 * Whether a BMC with this fault still powers the node off when asked: a slow one does, and
 * so, for the release, does a lying one (it reads Off at once; whether the node really went
 * off is the lie report's, lab/bmc-lies.ts, not liveness').
 */
function answers(fault: string): boolean {
  return fault === "none" || fault === "slow" || fault === "lying";
}

const rel = (iso: string | undefined, t0: number) => (iso ? Date.parse(iso) - t0 : undefined);

/**
 * Why no release is owed although the BMC came back in time: the node's incident ended a
 * final FenceFailed, every one of its attempts ran while the BMC was still broken (a
 * refused connection fails a round in milliseconds, so the rounds may all be spent long
 * before the worst case above), none after it answered again. The policy's end for that
 * is a final FenceFailed, an operator's case. Undefined when that is not what happened.
 */
function spentWhileBroken(
  input: LivenessInput,
  broken: string,
  bmcSteps: readonly Schedule["steps"][number][],
  bmcOk: number,
): string | undefined {
  const { t0, timings: t } = input;
  // the BMC's last broken stretch before it answered again
  const brokenFrom = bmcSteps
    .filter((x) => x.kind === "bmc" && x.at < bmcOk && !answers(x.fault))
    .map((x) => x.at)
    .at(-1);
  if (brokenFrom === undefined) return undefined;
  for (const i of input.incidents.filter((x) => x.spec.nodeName === broken)) {
    const st = i.status;
    if (!st || !isFinalFenceFailed(st, t.maxRounds) || st.attempts.length === 0) continue;
    const inStretch = st.attempts.every((a) => {
      const from = rel(a.startedAt, t0);
      const to = rel(a.finishedAt, t0);
      return from !== undefined && to !== undefined && from >= brokenFrom && to <= bmcOk;
    });
    if (inStretch)
      return `every round of ${i.metadata.name} ran while the BMC of ${broken} was broken (${brokenFrom}..${bmcOk} ms): a final FenceFailed is the policy's end`;
  }
  return undefined;
}

export function checkLiveness(input: LivenessInput): LivenessVerdict {
  const { schedule: s, t0, timings: t } = input;
  const failures: LivenessFailure[] = [];
  const verdict: LivenessVerdict = { failures };
  const broken = s.broken;
  const brk = s.steps.find((x) => x.node === broken && ["crash", "hang", "partition"].includes(x.kind));
  if (!broken || !brk) verdict.noReleaseBecause = "no node was broken";
  else if (s.steps.some((x) => x.node === broken && (x.kind === "resume" || x.kind === "heal")))
    verdict.noReleaseBecause = `${broken} was back before the end (it may or may not be fenced)`;
  else {
    // The BMC: answering from `bmcOk` on (its last fault cleared), or never.
    const bmc = s.steps.filter((x) => x.kind === "bmc" && x.node === broken);
    const last = bmc.at(-1);
    const bmcBroken = last && last.kind === "bmc" && !answers(last.fault);
    const bmcOk = bmc.length && !bmcBroken ? Math.max(...bmc.map((x) => x.at)) : 0;
    // Its peers observe it once their own partial faults healed.
    const peersOk = Math.max(
      0,
      ...s.steps.filter((x) => x.node !== broken && x.kind === "partial-heal").map((x) => x.at),
    );
    if (bmcBroken) verdict.noReleaseBecause = `the BMC of ${broken} never answered again (S1: no release)`;
    else {
      const from = Math.max(brk.at, bmcOk, peersOk);
      // Every round failed before the BMC came back: a final FenceFailed is the right end.
      const exhaustedAt = brk.at + t.detectMs + t.maxRounds * (t.roundMs + t.backoffMs);
      const spent = bmcOk > 0 ? spentWhileBroken(input, broken, bmc, bmcOk) : undefined;
      if (bmcOk > 0 && bmcOk > brk.at && bmcOk >= exhaustedAt)
        verdict.noReleaseBecause = `the BMC of ${broken} answered only after every round could have failed`;
      else if (spent) verdict.noReleaseBecause = spent;
      else
        verdict.releaseBoundMs = Math.round(
          from + t.detectMs + 2 * (t.roundMs + t.backoffMs) + t.leaseMs + 2 * t.reconcileMs + t.releaseMs,
        );
    }
    const mine = input.incidents.filter((i) => i.spec.nodeName === broken);
    const released = mine
      .map((i) => rel(i.status?.timestamps.released, t0))
      .filter((x): x is number => x !== undefined)
      .sort((a, b) => a - b)[0];
    if (released !== undefined) verdict.releasedMs = released;
    if (verdict.releaseBoundMs !== undefined && (released === undefined || released > verdict.releaseBoundMs))
      failures.push({
        rule: "L1",
        node: broken,
        ...(mine[0] ? { incident: mine[0].metadata.name } : {}),
        detail:
          released === undefined
            ? `not released within ${verdict.releaseBoundMs} ms (incidents: ${mine.map((i) => `${i.metadata.name}:${i.status?.phase}:${i.status?.reason ?? ""}`).join(", ") || "none"})`
            : `released at ${released} ms, bound ${verdict.releaseBoundMs} ms`,
      });
  }
  // L2: nothing sits in a state that should have moved on.
  const stall = t.roundMs + t.backoffMs + t.leaseMs + 2 * t.reconcileMs;
  const atNow = input.now - t0;
  for (const i of input.incidents) {
    const st = i.status;
    if (!st) continue;
    const since =
      st.phase === "Confirmed"
        ? rel(st.timestamps.confirmed, t0)
        : st.phase === "Fencing"
          ? rel(st.attempts.at(-1)?.finishedAt ?? st.timestamps.fencing, t0)
          : st.phase === "FenceFailed" && !isFinalFenceFailed(st, t.maxRounds)
            ? rel(st.retryNotBefore, t0)
            : undefined;
    if (since !== undefined && atNow - since > stall)
      failures.push({
        rule: "L2",
        node: i.spec.nodeName,
        incident: i.metadata.name,
        detail: `${st.phase} since ${since} ms, ${atNow - since} ms without progress (allowed ${stall} ms)`,
      });
  }
  return verdict;
}
