// fence's look after the power-off (issue 18): for lookAfter.windowMs after a level read the
// node's power back as Off, fence's reconciler keeps reading the node's heartbeat Lease and
// the Node. A node that really lost power comes back, if ever, with a new boot ID; a heartbeat
// renewed after the read-back (beyond the clock-skew bound) while the Node still carries the
// incident's boot ID proves the BMC's Off false. Then the incident leaves FencedOff or
// Released for FenceFailed with reason BMCLied (no proof of Off any more: powerOffConfirmedAt
// is cleared), the lie is recorded in status.bmcLied, and fence.failed asks for the next
// round at once, which tries only the levels that never lied, with no last look (the node is
// known to run and its workloads were released: powering it off is what safety needs now).
// When no level is left the incident stays FenceFailed, final, with the reason: an operator
// must act; it is never left Released as if all were well. An incident released on the
// watchdog level's proof (its armed watchdog surely reset the node) is watched the same way:
// a renewal with the incident's boot ID after it means the watchdog did not reset the node;
// the alarm is the same with reason WatchdogDidNotReset, the watchdog level recorded as the
// lying level (driver "watchdog"), so the next round never relies on it again (decide.pure.ts
// drops its plan) and tries the BMC levels. Pure: no I/O, no clock; it never asks for a
// power action itself (the next round is fence's decide, under the Lease, S3).
import {
  BMC_LIED_REASON,
  LIED_REASONS,
  WATCHDOG_DID_NOT_RESET_REASON,
  type BmcLie,
} from "../../core/bmc-lie.ts";
import {
  ignored,
  iso,
  ms,
  outgoing,
  processed,
  rejected,
  type Decision,
  type HeartbeatRead,
  type NodeInfo,
} from "../../core/decision.ts";
import { transition, type Attempt, type NodeFence, type NodeFenceStatus } from "../../core/incident.ts";
import type { FencingPolicySpec, ResolvedFencingLevel } from "../../core/policy.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import { failedData } from "./hold.pure.ts";

/** The phases the look after watches: the power-off was read back as Off. */
export const LOOK_AFTER_PHASES = ["FencedOff", "Released"] as const;

/** The attempt whose read-back Off the incident relies on now (the one powerOffConfirmedAt names). */
export function readBackInForce(st: NodeFenceStatus): Attempt | undefined {
  const offs = st.attempts.filter((a) => a.result === "off-confirmed" && a.readBackState === "Off");
  return offs.find((a) => a.readBackAt === st.powerOffConfirmedAt) ?? offs.at(-1);
}

/** The watchdog level's proof the incident relies on now (its verdict held at powerOffConfirmedAt). */
export function watchdogProofInForce(st: NodeFenceStatus): Attempt | undefined {
  const wds = st.attempts.filter((a) => a.result === "watchdog-expired" && a.driver === "watchdog");
  return wds.find((a) => a.finishedAt === st.powerOffConfirmedAt) ?? wds.at(-1);
}

/**
 * The proof the release relies on: the read-back Off powerOffConfirmedAt names, else the
 * watchdog proof it names, else the latest of either.
 */
export function proofInForce(st: NodeFenceStatus): Attempt | undefined {
  const off = readBackInForce(st);
  const wd = watchdogProofInForce(st);
  if (off?.readBackAt === st.powerOffConfirmedAt) return off;
  if (wd?.finishedAt === st.powerOffConfirmedAt) return wd;
  return off ?? wd;
}

/**
 * Whether the look after watches the incident at `now`: its power-off was read back as Off
 * less than lookAfter.windowMs ago, and nobody asked the BMC to power the node on (after a
 * power-on the node is expected back, and recover ends the incident on its new boot ID).
 */
export function watching(st: NodeFenceStatus, policy: FencingPolicySpec, now: number): boolean {
  const off = ms(st.powerOffConfirmedAt);
  const window = policy.lookAfter.windowMs;
  return (
    (LOOK_AFTER_PHASES as readonly string[]).includes(st.phase) &&
    window > 0 &&
    Number.isFinite(off) &&
    now <= off + window &&
    !st.powerOnRequestedAt
  );
}

/** What the look after concludes from one read of the node and its heartbeat Lease. */
export type AfterVerdict =
  | { kind: "over"; why: string }
  | { kind: "quiet"; why: string }
  | { kind: "lied"; lie: BmcLie; message: string };

export interface AfterInput {
  inc: NodeFence;
  st: NodeFenceStatus;
  /** The Node as read now (absent: not in the API). */
  node: NodeInfo | undefined;
  /** The node's heartbeat Lease as read now ("absent": there is none; undefined: not read). */
  heartbeat: HeartbeatRead | "absent" | undefined;
  policy: FencingPolicySpec;
  now: number;
}

/**
 * The rule: the BMC lied when, inside the window, the heartbeat Lease's renewTime (the node's
 * clock) is later than the read-back Off (fence's clock) by more than
 * corroboration.maxClockSkewMs, and the Node still carries the incident's boot ID. A renewal
 * dated within the skew bound may predate the power loss (it proves nothing); a Node with
 * another boot ID is a node that rebooted (recover's to end, S3: never powered off again).
 */
export function lookAfter(i: AfterInput): AfterVerdict {
  const { inc, st, node, heartbeat, policy, now } = i;
  if (!watching(st, policy, now))
    return { kind: "over", why: `the look after does not watch ${inc.metadata.name} (${st.phase})` };
  if (node && node.bootId !== inc.spec.bootId)
    return { kind: "over", why: `${node.name} booted ${node.bootId} since: it really went down` };
  if (!node) return { kind: "quiet", why: `${inc.spec.nodeName} is not in the API` };
  if (!heartbeat || heartbeat === "absent")
    return { kind: "quiet", why: `no heartbeat Lease of ${node.name} to look at` };
  const off = ms(st.powerOffConfirmedAt);
  const renew = ms(heartbeat.renewTime);
  const skew = policy.corroboration.maxClockSkewMs;
  if (!Number.isFinite(renew) || renew <= off + skew)
    return { kind: "quiet", why: `${node.name} has not renewed its heartbeat since the read-back Off` };
  const a = proofInForce(st);
  if (!a)
    return {
      kind: "quiet",
      why: `incident ${inc.metadata.name} records no attempt that read back Off nor a watchdog proof`,
    };
  const lie: BmcLie = {
    level: a.level,
    driver: a.driver,
    round: a.round,
    readBackAt: st.powerOffConfirmedAt!,
    renewTime: heartbeat.renewTime!,
    seenAt: iso(now),
  };
  const message =
    a.driver === "watchdog"
      ? `watchdog did not reset ${node.name}: fence counted it reset by its armed watchdog (level ${a.level + 1}) at ${lie.readBackAt}, but the node renewed its heartbeat at ${lie.renewTime} (more than ${skew} ms later) with the same boot ${inc.spec.bootId}: it still runs`
      : `BMC lied: ${a.driver} (level ${a.level + 1}) read ${node.name} back Off at ${lie.readBackAt}, but the node renewed its heartbeat at ${lie.renewTime} (more than ${skew} ms later) with the same boot ${inc.spec.bootId}: it still runs`;
  return { kind: "lied", lie, message };
}

/** Level indexes (0-based) whose read-back Off the node proved false for this incident. */
export function liedLevels(st: NodeFenceStatus): number[] {
  return [...new Set((st.bmcLied ?? []).map((l) => l.level))].sort((a, b) => a - b);
}

/** The levels a round may still use: every level but the ones that lied. */
export function trustedLevelCount(levels: readonly ResolvedFencingLevel[], st: NodeFenceStatus): number {
  const lied = liedLevels(st);
  return levels.filter((_, i) => !lied.includes(i)).length;
}

/**
 * An escalation is due: the look after recorded a lie and asked for the next round at once
 * (retryNotBefore set). Such a round runs even past fencing.maxRounds: the node is known to
 * run with its workloads released elsewhere.
 */
export function escalationDue(st: NodeFenceStatus): boolean {
  return (
    st.phase === "FenceFailed" && LIED_REASONS.includes(st.reason ?? "") && st.retryNotBefore !== undefined
  );
}

/**
 * The alarm and the escalation: FencedOff/Released → FenceFailed, reason BMCLied, the lie
 * appended to status.bmcLied, powerOffConfirmedAt cleared (the Off is no proof), and
 * fence.failed for the next round now; final when no level that never lied is left.
 */
export function bmcLied(
  i: AfterInput & { lie: BmcLie; message: string; levels: readonly ResolvedFencingLevel[] | undefined },
): Decision {
  const { inc, st, now, lie } = i;
  const name = inc.metadata.name;
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const after = { ...st, bmcLied: [...(st.bmcLied ?? []), lie].slice(-16) };
  const left = i.levels ? trustedLevelCount(i.levels, after) : 0;
  const final = left === 0;
  const status = transition(st, "FenceFailed", iso(now), {
    bmcLied: after.bmcLied,
    powerOffConfirmedAt: undefined,
    reason: lie.driver === "watchdog" ? WATCHDOG_DID_NOT_RESET_REASON : BMC_LIED_REASON,
    message: `${i.message}; ${final ? "no other fencing level can prove it off: an operator must power it off" : `escalating to the ${left} level(s) that never lied`} (its workloads were released: it may run twice)`,
    retryNotBefore: final ? undefined : iso(now),
  });
  return processed(
    `${inc.spec.nodeName}: ${lie.driver === "watchdog" ? "watchdog" : "BMC"} level ${lie.level + 1} lied${final ? ", no level left" : ", escalating"}`,
    [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }],
    [
      outgoing(
        EVENT_TYPES.fenceFailed,
        inc.spec.nodeName,
        name,
        failedData(inc, status, i.message, "FF_BMC_STILL_ON", [], final),
      ),
    ],
  );
}

/** fence's resync of a FencedOff or Released incident: the look after, then the alarm. */
export function lookAfterResync(
  i: AfterInput & { levels: readonly ResolvedFencingLevel[] | undefined },
): Decision {
  const v = lookAfter(i);
  if (v.kind !== "lied") return ignored("NotDue", v.why);
  return bmcLied({ ...i, lie: v.lie, message: v.message });
}
