// recover, re-driven without an event: ends a final FenceFailed incident an operator asked
// to release (annotation fastfence.io/release-slot, set by `fastfence release-slot`), as
// Closed with reason SlotReleased, which frees its storm-guard slot. Only a final one (no
// round will follow): a round under way or due is never cut off this way. Nothing is
// released on the node (S1: its power-off was never read back); the workloads stay until
// the node comes back or someone deals with them. It also closes an incident fence
// observed in Observe mode (Confirmed, reason Observed), and one whose node came back before
// any power-off (FenceFailed, reason NodeResponding: back.pure.ts). And it
// ends an incident in any phase it re-drives (Confirmed, FenceFailed, FencedOff, Released)
// whose node the API shows Ready with a new boot ID, as the node.condition event would have
// (decide.pure.ts), so a lost, stale or too-early event (one that came while a round was
// under way) never leaves a recovered node's incident open, holding its storm-guard slot:
// fence never powers off a later incarnation (S3), so nothing else would end it. No I/O.
import {
  OBSERVED_REASON,
  RELEASE_SLOT_ANNOTATION,
  isFinalFenceFailed,
  statusOf,
  transition,
  type NodeFence,
  type Phase,
} from "../../core/incident.ts";
import { closeIfBack } from "./back.pure.ts";
import { recovery } from "./decide.pure.ts";
import {
  ignored,
  iso,
  processed,
  rejected,
  type DecideInput,
  type Decision,
  type NodeInfo,
  type Resync,
  type ViewRequest,
} from "../../core/decision.ts";

/** The phases recover re-drives; the reconciler lists only incidents in these. */
export const RECOVER_RESYNC_PHASES: readonly Phase[] = ["FenceFailed", "Confirmed", "FencedOff", "Released"];

/** Fenced phases whose incident waits for the node to come back (Ready, new boot ID). */
const AWAITING_RECOVERY: readonly Phase[] = ["FencedOff", "Released"];

/** How much of the operator's reason is kept in the incident's message. */
const MAX_REASON = 256;

/**
 * Every incident in recover's phases: any of them ends if its node is back with a new boot,
 * which only the view (the Node) tells; the other reasons to act (a release-slot request,
 * an observed or found-back incident) are decided on the same view.
 */
export function resyncWants(inc: NodeFence): boolean {
  return RECOVER_RESYNC_PHASES.includes(statusOf(inc).phase);
}

/** The node, the incident, and the node's heartbeat Lease (back.pure.ts: a node back after abandoned rounds). */
export function locateResync(r: Resync): ViewRequest {
  return { node: r.node, incident: r.incident, cluster: false, heartbeatLease: true };
}

export function resync(input: DecideInput<Resync>): Decision {
  const { view, now } = input;
  const name = input.event.incident;
  const inc = view.incident;
  if (!inc || inc.metadata.name !== name)
    return ignored("IncidentNotFound", `no incident ${name} in the API`);
  const st = statusOf(inc);
  if (!RECOVER_RESYNC_PHASES.includes(st.phase))
    return ignored("NotThisStage", `incident ${name} is ${st.phase}: not recover's to re-drive`);
  const notBack = notRecovered(inc, view.node);
  if (!notBack) return recovery(inc, view.node!.name, view.node!.bootId, now);
  if (st.phase === "Confirmed") return closeObserved(input);
  if (AWAITING_RECOVERY.includes(st.phase)) return notBack;
  const why = inc.metadata.annotations?.[RELEASE_SLOT_ANNOTATION];
  const back = closeIfBack(input);
  // not back (yet): an operator's release-slot request still counts
  if (back && (back.outcome.kind !== "ignored" || why === undefined)) return back;
  if (why === undefined)
    return ignored(
      "NotDue",
      `incident ${name}: no release requested (annotation ${RELEASE_SLOT_ANNOTATION})`,
    );
  if (!isFinalFenceFailed(st, view.policy.fencing.maxRounds))
    return ignored(
      "NotDue",
      `incident ${name} is still being retried (round ${st.round} of ${view.policy.fencing.maxRounds}): its slot is released once it is final`,
    );
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const reason = why.trim().slice(0, MAX_REASON) || "no reason given";
  const status = transition(st, "Closed", iso(now), {
    reason: "SlotReleased",
    message: `storm-guard slot released by an operator after ${st.round} failed rounds: ${reason}; ${inc.spec.nodeName} was never read back Off, its workloads stay (S1)`,
  });
  return processed(`released the slot of ${name}`, [
    { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
  ]);
}

/**
 * Ends an incident fence observed in Observe mode (Confirmed, reason Observed; fence/hold.pure.ts)
 * as Closed with reason Observed, keeping fence's message: no slot stays taken by a record.
 */
function closeObserved({ view, now, event }: DecideInput<Resync>): Decision {
  const inc = view.incident!;
  const st = statusOf(inc);
  if (st.reason !== OBSERVED_REASON)
    return ignored("NotThisStage", `incident ${event.incident} is Confirmed: fence's to drive`);
  const rv = inc.metadata.resourceVersion;
  if (!rv)
    return rejected(
      "MissingResourceVersion",
      `incident ${event.incident} was read without a resourceVersion`,
    );
  const status = transition(st, "Closed", iso(now), {
    reason: OBSERVED_REASON,
    message: st.message ?? "observed",
  });
  return processed(`closed observed incident ${event.incident}`, [
    { kind: "updateIncidentStatus", name: event.incident, expectedResourceVersion: rv, status },
  ]);
}

/**
 * Why the incident's node is not back with a new boot (the decision to return), or undefined
 * when it is: Ready with a boot ID that is known and not the incident's, as on the
 * node.condition event (decide.pure.ts). A Node without a boot ID tells nothing of a reboot.
 */
function notRecovered(inc: NodeFence, node: NodeInfo | undefined): Decision | undefined {
  const name = inc.metadata.name;
  if (!node) return ignored("NodeNotFound", `node ${inc.spec.nodeName} is not in the API`);
  if (node.ready !== "True") return ignored("NodeNotReady", `${node.name} is not Ready`);
  if (!node.bootId)
    return ignored("NotARecovery", `${node.name} is Ready with no boot ID: not a recovery of ${name}`);
  if (node.bootId === inc.spec.bootId)
    return ignored(
      "NotARecovery",
      `${node.name} Ready with the incident's own boot ${node.bootId}: not a recovery of ${name}`,
    );
  return undefined;
}
