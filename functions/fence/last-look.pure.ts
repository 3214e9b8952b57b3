// fence's last look before an off command (issue 18): just before each off command (every
// round, every level) the fencing replica looks at the node for itself — its own TCP probe
// of the node's probe address, its own read of the node's heartbeat Lease and of the Node —
// and this module decides whether the off command may go. The node is "back" when the probe
// answers or the heartbeat was renewed since the incident began; then the round is abandoned
// with a stable reason and nothing is powered off. A failed look (probe timeout, refused,
// unreachable; a read that failed or came too late) is "still unreachable": the look can only
// stop a power-off, never cause one. Pure: the probe and the reads are effects done in
// infra/fence/last-look.ts, whose results come back here as plain data.
import { heartbeatLeaseName, ms } from "../../core/decision.ts";
import type { ConditionStatus, HeartbeatRead, LastLookPlan, NodeInfo, View } from "../../core/decision.ts";
import type { LastLook, NodeFence, NodeFenceStatus } from "../../core/incident.ts";

/** What the look saw: each part independently, none of it guessed. */
export interface LookSeen {
  /** The TCP probe: "missed" covers a timeout, a refusal and an unreachable host; "none": no address. */
  probe: "answered" | "missed" | "none";
  /** The heartbeat Lease as read now; "unread": the read failed or was late; undefined: no such Lease. */
  lease: HeartbeatRead | "unread" | undefined;
  /** The Node as read now; "unread": the read failed or was late; undefined: no such Node. */
  node: { bootId: string; ready: ConditionStatus } | "unread" | undefined;
}

export type LookVerdict =
  { go: true; heartbeat: LastLook["heartbeat"] } | { go: false; look: LastLook; message: string };

/** The plan a round's powerOff action carries, from the incident, its node and the view read when the round started. */
export function lookPlan(inc: NodeFence, st: NodeFenceStatus, node: NodeInfo, view: View): LastLookPlan {
  const policy = view.policy;
  const addr = node.probeAddress;
  // Not the suspicion: an incident may stay Suspected through a partition the heartbeat veto
  // saw (the node alive and renewing), so only the confirmation dates the silence.
  const confirmedAt = st.timestamps.confirmed ?? st.timestamps.fencing ?? "";
  return {
    node: node.name,
    bootId: inc.spec.bootId,
    ...(addr
      ? {
          probe: { host: addr.host, port: addr.port ?? policy.probe.port, timeoutMs: policy.probe.timeoutMs },
        }
      : {}),
    heartbeatLease: heartbeatLeaseName(node.name),
    ...(view.heartbeat ? { baseline: view.heartbeat } : {}),
    confirmedAt,
    maxClockSkewMs: policy.corroboration.maxClockSkewMs,
  };
}

/**
 * Whether the node renewed its heartbeat since the incident began. Either proof suffices:
 * (a) on this replica's own timeline: the Lease changed (a new resourceVersion, or it was
 * created) between the read when the round started and this one (a round whose view did
 * not read the Lease has no baseline: (a) does not apply); only the node's own
 * identity may write it, so that is a sign of life seen after the round began; (b) the
 * Lease's renewTime, on the node's clock, is later than the incident's confirmation, on
 * confirm's clock, by more than the policy's clock-skew bound: written after the node was
 * found dead (confirm's heartbeat veto covers the time before). Not the suspicion time: an
 * incident can stay Suspected through a partition while the node renews. A Lease not read
 * in time is "unread", never "renewed".
 */
export function heartbeatState(plan: LastLookPlan, lease: LookSeen["lease"]): LastLook["heartbeat"] {
  if (lease === "unread") return "unread";
  if (!lease) return "silent";
  // (a) only with a baseline read when the round started (undefined: none was read)
  if (plan.baseline === "absent") return "renewed";
  if (plan.baseline && lease.resourceVersion !== plan.baseline.resourceVersion) return "renewed";
  return renewedAfterConfirmation(lease, plan.confirmedAt, plan.maxClockSkewMs) ? "renewed" : "silent";
}

/**
 * Rule (b) of `heartbeatState`, on its own: the Lease's renewTime (the node's clock) is later
 * than the confirmation (confirm's clock) by more than the clock-skew bound. Also used by
 * recover (functions/recover/back.pure.ts), which reads the Lease without a baseline.
 */
export function renewedAfterConfirmation(
  lease: HeartbeatRead,
  confirmedAt: string,
  maxClockSkewMs: number,
): boolean {
  const renew = ms(lease.renewTime);
  const confirmed = ms(confirmedAt);
  return Number.isFinite(renew) && Number.isFinite(confirmed) && renew > confirmed + maxClockSkewMs;
}

/**
 * The last look's verdict before the off command of `level` (0-based): go, or abandon the
 * round with a reason. NodeRebooted when the Node now carries another boot ID (S3: another
 * incarnation is never powered off); NodeResponding when the probe answered or the heartbeat
 * was renewed. `back` (the incident can be closed): the heartbeat renewed, Ready True and the
 * incident's boot ID, all in this look; a Ready alone may be the lagging one of a dead node.
 */
export function lastLook(plan: LastLookPlan, seen: LookSeen, level: number): LookVerdict {
  const heartbeat = heartbeatState(plan, seen.lease);
  const node = seen.node === "unread" ? undefined : seen.node;
  const before = `last look before the level ${level + 1} off command`;
  const parts = {
    probe: seen.probe,
    heartbeat,
    ...(node ? { ready: node.ready, bootId: node.bootId } : {}),
  };
  if (node && node.bootId && node.bootId !== plan.bootId)
    return {
      go: false,
      look: { reason: "NodeRebooted", ...parts, back: false },
      message: `${before}: ${plan.node} booted ${node.bootId} since incident boot ${plan.bootId}; nothing powered off (S3)`,
    };
  if (seen.probe !== "answered" && heartbeat !== "renewed") return { go: true, heartbeat };
  const back = heartbeat === "renewed" && node?.ready === "True" && node.bootId === plan.bootId;
  const saw = [
    seen.probe === "answered" ? `answered its probe at ${plan.probe!.host}:${plan.probe!.port}` : undefined,
    heartbeat === "renewed" ? "renewed its heartbeat since the incident began" : undefined,
  ].filter(Boolean);
  return {
    go: false,
    look: { reason: "NodeResponding", ...parts, back },
    message: `${before}: ${plan.node} ${saw.join(" and ")}${back ? "; Ready with the incident's boot: the node is back" : ""}; nothing powered off`,
  };
}
