// fence, re-driven without an event (level-triggered progress, core/decision.ts Resync):
// decides on an open incident as the API holds it, so a lost fence.requested or
// fence.failed, a crashed driver or a round cut short never leaves it stuck. Only the
// incident, the node and the node's fencing Lease count; the same checks as the event path
// (S3 incarnation, S6 trusted confirmation, S2 quorum) run before any power action, and a
// Lease that has not expired always wins (S3: one driver). Nothing here acts before its
// step is overdue by reconcile.stalledAfterMs (twice that on a replica that runs on the
// incident's node), so the event path normally gets there first. An incident whose spec
// no longer names the node and boot it was created for is refused (TargetMismatch). No I/O.
import { isFinalFenceFailed, statusOf, transition } from "../../core/incident.ts";
import { targetMismatch } from "../../core/incident-target.ts";
import {
  fenceLeaseName,
  ignored,
  iso,
  ms,
  outgoing,
  processed,
  rejected,
  type DecideInput,
  type Decision,
  type Resync,
  type ViewRequest,
} from "../../core/decision.ts";
import type { Phase } from "../../core/incident.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import { failedData, liveHolder, onOwnNode, onResult, startRound } from "./decide.pure.ts";
import { LOOK_AFTER_PHASES, escalationDue, lookAfterResync, watching } from "./look-after.pure.ts";
import { type FencingPolicySpec } from "../../core/policy.ts";
import { resolveLevels } from "../../core/policy-levels.ts";
import type { NodeFence } from "../../core/incident.ts";

/**
 * A replica on the incident's node waits this many stalled periods before it re-drives a
 * round: the replicas on other nodes get there first, and it steps in only when none is
 * left to (decide.pure.ts, OwnNode).
 */
export const OWN_NODE_STALLED_FACTOR = 2;

/** The phases fence re-drives; the reconciler lists only incidents in these. */
export const FENCE_RESYNC_PHASES: readonly Phase[] = [
  "Confirmed",
  "Fencing",
  "FenceFailed",
  ...LOOK_AFTER_PHASES,
];

/** Every incident fence drives, and a fenced one only while the look after watches it. */
export function resyncWants(inc: NodeFence, now: number, policy: FencingPolicySpec): boolean {
  const st = statusOf(inc);
  return (LOOK_AFTER_PHASES as readonly Phase[]).includes(st.phase) ? watching(st, policy, now) : true;
}

export function locateResync(r: Resync): ViewRequest {
  return {
    node: r.node,
    incident: r.incident,
    lease: fenceLeaseName(r.node),
    cluster: false,
    discovery: true,
    planned: true,
    freshPolicy: true,
    heartbeatLease: true, // the last look's baseline (last-look.pure.ts)
    observers: true, // the published keys: stored evidence counts only if it verifies (confirmation.pure.ts)
  };
}

export function resync(input: DecideInput<Resync>): Decision {
  const { view, now, self } = input;
  if (input.result) return onResult(input);
  const name = input.event.incident;
  const inc = view.incident;
  if (!inc || inc.metadata.name !== name)
    return ignored("IncidentNotFound", `no incident ${name} in the API`);
  const mismatch = targetMismatch(inc, [
    { from: "the resync", node: input.event.node },
    ...(view.node ? [{ from: "the node read for it", node: view.node.name }] : []),
  ]);
  if (mismatch) return rejected("TargetMismatch", mismatch);
  const st = statusOf(inc);
  if (!FENCE_RESYNC_PHASES.includes(st.phase))
    return ignored("NotThisStage", `incident ${name} is ${st.phase}: not fence's to re-drive`);
  if (st.phase === "FencedOff" || st.phase === "Released") {
    const { node, heartbeat, policy, discoveredLevels } = view;
    const levels = resolveLevels(policy, node ?? { name: inc.spec.nodeName }, discoveredLevels);
    return lookAfterResync({ inc, st, node, heartbeat, policy, now, levels });
  }
  const node = view.node;
  if (!node) return ignored("NodeNotFound", `node ${inc.spec.nodeName} is not in the API`);
  if (node.bootId !== inc.spec.bootId)
    return ignored(
      "StaleIncarnation",
      `${node.name} booted ${node.bootId} since incident boot ${inc.spec.bootId}; not powering off (S3)`,
    );
  const held = liveHolder(view.lease, now);
  if (held)
    return ignored(
      held.holder === self.replica ? "DrivenByThisReplica" : "DrivenByOtherReplica",
      `fencing of ${name} is driven by ${held.holder} (lease until ${iso(held.until)})`,
    );
  const policy = view.policy;
  const stalled = policy.reconcile.stalledAfterMs * (onOwnNode(self, inc) ? OWN_NODE_STALLED_FACTOR : 1);
  const overdue = (due: number, step: string): Decision | undefined =>
    Number.isFinite(due) && now >= due + stalled
      ? undefined
      : ignored("NotDue", `${step} of ${name} is not overdue (due ${iso(due)} + ${stalled} ms)`);

  if (st.phase === "Confirmed") {
    // fence.requested was lost, or every replica that got it failed before taking the Lease.
    return (
      overdue(ms(st.timestamps.confirmed), "round 1") ??
      startRound({ inc, st, node, view, self, now, round: 1 })
    );
  }
  if (st.phase === "FenceFailed") {
    if (isFinalFenceFailed(st, policy.fencing.maxRounds) && !escalationDue(st))
      return ignored("FencingGaveUp", `fencing of ${name} gave up after ${st.round} rounds`);
    // The retry's fence.failed was lost, or the replica waiting for retryNotBefore died.
    return (
      overdue(ms(st.retryNotBefore), `round ${st.round + 1}`) ??
      startRound({ inc, st, node, view, self, now, round: st.round + 1 })
    );
  }
  // Fencing, and nobody holds the Lease: the driver died or was cut off before recording
  // the round's result (a driver records the result before it releases the Lease). The
  // round is recorded as failed with no backoff; its fence.failed (or, if that is lost,
  // the next resync) starts the next round, within fencing.maxRounds.
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const round = Math.max(st.round, 1);
  const final = round >= policy.fencing.maxRounds;
  const why = `round ${round} by ${st.fencingBy ?? "an unknown replica"} ended without a recorded result (its Lease expired)`;
  const status = transition(st, "FenceFailed", iso(now), {
    reason: "RoundInterrupted",
    message: `${why}; power-off not confirmed, workloads stay (S1)${final ? "; giving up" : ""}`,
    ...(final ? { retryNotBefore: undefined } : { retryNotBefore: iso(now) }),
  });
  return processed(
    `recorded interrupted round ${round} of ${name}`,
    [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }],
    [
      outgoing(
        EVENT_TYPES.fenceFailed,
        inc.spec.nodeName,
        name,
        failedData(inc, status, why, "FF_CANCELLED", [], final),
      ),
    ],
  );
}
