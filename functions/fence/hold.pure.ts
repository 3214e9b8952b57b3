// fence, the rounds that send no power command: a round a hold for planned work stops
// (core/planned.ts; the incident keeps its phase and says why), a round in Observe mode
// (the incident is Closed, saying which level fence would have used), and a round the last
// look abandoned because the node responds (last-look.pure.ts: FenceFailed with the reason;
// recover closes it once the look saw the node back), and a round that would stand on an
// operator's request withdrawn since (Closed). Also the fence.failed event's data.
// Pure: no I/O; it never asks for a power action.
import {
  OBSERVED_REASON,
  transition,
  type Attempt,
  type NodeFence,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import {
  ignored,
  iso,
  outgoing,
  processed,
  rejected,
  type Action,
  type Decision,
  type NodeInfo,
} from "../../core/decision.ts";
import type { Hold } from "../../core/planned.ts";
import type { FencingPolicySpec, ResolvedFencingLevel } from "../../core/policy.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import type { FenceFailed, FenceObserved } from "../../events/schemas.ts";

/**
 * A round that a hold stops before any power command: the incident keeps its phase and
 * says why (reason = the hold, written once; the Kubernetes Event tells the operator), and the
 * reconciler tries again once the hold ends.
 */
export function heldRound(
  inc: NodeFence,
  st: NodeFenceStatus,
  rv: string,
  hold: Hold,
  now: number,
): Decision {
  const name = inc.metadata.name;
  if (st.reason === hold.reason) return ignored("Held", `not fencing ${inc.spec.nodeName}: ${hold.message}`);
  const status: NodeFenceStatus = { ...st, reason: hold.reason, message: `held: ${hold.message}` };
  return processed(`held ${inc.spec.nodeName} (${hold.reason}) at ${iso(now)}`, [
    { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
  ]);
}

/**
 * Observe mode (policy mode Observe): everything but the power command. The incident
 * stays Confirmed with reason Observed and a message naming the level fence would have
 * used first, and fence.observed says the same; recover then closes it (Closed, reason
 * Observed), so it holds no storm-guard slot. Nothing is powered off or released, and an
 * observed incident is never fenced later, even if the mode changes to Enforce: its
 * evidence is as old as the observation.
 */
export function observed(
  inc: NodeFence,
  st: NodeFenceStatus,
  rv: string,
  node: NodeInfo,
  levels: readonly ResolvedFencingLevel[],
  round: number,
  watchdog = false,
): Decision {
  const name = inc.metadata.name;
  // a node with only the watchdog level: that level, which has no BMC address
  const first = levels[0] ?? { driver: "watchdog" as const, address: "" };
  const count = levels.length + (watchdog ? 1 : 0);
  const message = `observe mode: would power off ${node.name} with level 1 of ${count} (${first.driver}${first.address ? ` ${first.address}` : ""}), round ${round}; no power command sent`;
  const status: NodeFenceStatus = { ...st, reason: OBSERVED_REASON, message };
  const data: FenceObserved = {
    incident: name,
    node: node.name,
    bootId: inc.spec.bootId,
    round,
    level: 1,
    levels: count,
    driver: first.driver,
    address: first.address,
    message,
  };
  return processed(
    message,
    [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }],
    [outgoing(EVENT_TYPES.fenceObserved, node.name, name, data)],
  );
}

/** A round the last look stopped before an off command, as onPowerOffResult hands it over. */
export interface AbandonedRound {
  inc: NodeFence;
  st: NodeFenceStatus;
  rv: string;
  /** The incident's attempts with this round's appended. */
  attempts: Attempt[];
  /** The attempt the look abandoned (result "abandoned", with lastLook). */
  looked: Attempt;
  /** Releases this replica's fencing Lease. */
  release: Action;
  policy: FencingPolicySpec;
  now: number;
}

/**
 * A round abandoned by the last look (nothing was powered off in it) ends FenceFailed with the
 * look's reason (NodeResponding, NodeRebooted), like any round without a read-back Off, and
 * nothing is released (S1). When the look found the node back (the incident's boot ID, Ready,
 * heartbeat renewed) recover closes the incident (functions/recover/resync.pure.ts: only
 * recover may close one); until then, or when it answers but is not back yet, the next round
 * after the backoff looks again and is abandoned again while the node responds; recover
 * closes a rebooted node's incident when it is Ready with its new boot ID.
 */
export function abandonedRound(r: AbandonedRound): Decision {
  const { inc, st, rv, attempts, looked, release, policy, now } = r;
  const name = inc.metadata.name;
  const node = inc.spec.nodeName;
  const look = looked.lastLook!;
  const why = looked.message ?? `${node} responded in the last look`;
  const final = st.round >= policy.fencing.maxRounds;
  const retryNotBefore = final ? undefined : iso(now + policy.fencing.retryBackoffMs);
  const status = transition(st, "FenceFailed", iso(now), {
    attempts,
    reason: look.reason,
    message: `round ${st.round}/${policy.fencing.maxRounds} abandoned: ${why}${look.back ? "; recover closes the incident" : final ? "; giving up" : ""}`,
    retryNotBefore,
  });
  return processed(
    `fencing ${node} round ${st.round} abandoned (${look.reason}${look.back ? ", node back" : ""})`,
    [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }, release],
    [
      outgoing(
        EVENT_TYPES.fenceFailed,
        node,
        name,
        failedData(inc, status, why, "FF_NODE_RESPONDING", [looked], final),
      ),
    ],
  );
}

/** The fence.failed event's data for a failed round (`final`: no round follows). */
export function failedData(
  inc: NodeFence,
  status: NodeFenceStatus,
  reason: string,
  code: string,
  attempts: Attempt[],
  final: boolean,
): FenceFailed {
  return {
    incident: inc.metadata.name,
    node: inc.spec.nodeName,
    bootId: inc.spec.bootId,
    round: Math.max(status.round, 1),
    reason,
    code,
    attempts,
    final,
    ...(status.retryNotBefore && !final ? { retryNotBefore: status.retryNotBefore } : {}),
  };
}

/**
 * A round that stood on an operator's request withdrawn since (and no quorum of evidence):
 * nothing is powered off; the incident is Closed with OperatorRequestWithdrawn, which frees
 * its storm-guard slot. Only before a round (Confirmed, or FenceFailed awaiting a retry).
 */
export function withdrawnRound(inc: NodeFence, st: NodeFenceStatus, message: string, now: number): Decision {
  const name = inc.metadata.name;
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  if (st.phase !== "Confirmed" && st.phase !== "FenceFailed")
    return rejected("OperatorRequestWithdrawn", message);
  const status = transition(st, "Closed", iso(now), { reason: "OperatorRequestWithdrawn", message });
  return processed(`${inc.spec.nodeName}: the operator's request was withdrawn; nothing powered off`, [
    { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
  ]);
}
