// fence, the rounds that send no power command: a round a hold for planned work stops
// (core/planned.ts; the incident keeps its phase and says why) and a round in Observe mode
// (the incident is Closed, saying which level fence would have used). Pure: no I/O; it
// never asks for a power action.
import { OBSERVED_REASON, type NodeFence, type NodeFenceStatus } from "../../core/incident.ts";
import { ignored, iso, outgoing, processed, type Decision, type NodeInfo } from "../../core/decision.ts";
import type { Hold } from "../../core/planned.ts";
import type { ResolvedFencingLevel } from "../../core/policy.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import type { FenceObserved } from "../../events/schemas.ts";

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
): Decision {
  const name = inc.metadata.name;
  const first = levels[0]!;
  const message = `observe mode: would power off ${node.name} with level 1 of ${levels.length} (${first.driver} ${first.address}), round ${round}; no power command sent`;
  const status: NodeFenceStatus = { ...st, reason: OBSERVED_REASON, message };
  const data: FenceObserved = {
    incident: name,
    node: node.name,
    bootId: inc.spec.bootId,
    round,
    level: 1,
    levels: levels.length,
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
