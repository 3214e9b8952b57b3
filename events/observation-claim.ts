// The signed part of a node.observed event (core/evidence-proof.ts ObservationClaim):
// one mapping shared by the event source, which signs it, and detect, which verifies it;
// and the evidence a miss becomes (the same fields plus the proof, so confirm can verify
// the claim again). lastOkAt, probe and rttMs are informational and not signed. Pure: no I/O.
import type { ObservationClaim } from "../core/evidence-proof.ts";
import type { Evidence } from "../core/incident.ts";
import type { NodeObserved } from "./schemas.ts";

export function claimOfObservation(d: Omit<NodeObserved, "proof">): ObservationClaim {
  return {
    observer: d.observer.replica,
    observerNode: d.observer.node,
    target: d.target,
    targetBootId: d.targetBootId,
    result: d.result,
    consecutiveMisses: d.consecutiveMisses,
    firstMissAt: d.firstMissAt,
    at: d.at,
    heartbeatSeenAt: d.heartbeatSeenAt,
    heartbeatRenewedBy: d.heartbeatRenewedBy,
    heartbeatSynced: d.heartbeatSynced,
  };
}

/** The probe evidence a (missed) observation becomes: its signed claim and its proof. */
export function evidenceOfObservation(d: NodeObserved): Evidence {
  return {
    observer: d.observer.replica,
    observerNode: d.observer.node,
    node: d.target,
    targetBootId: d.targetBootId,
    at: d.at,
    kind: "probe",
    consecutiveMisses: d.consecutiveMisses,
    ...(d.firstMissAt ? { firstMissAt: d.firstMissAt } : {}),
    ...(d.heartbeatSeenAt ? { heartbeatSeenAt: d.heartbeatSeenAt } : {}),
    ...(d.heartbeatRenewedBy ? { heartbeatRenewedBy: d.heartbeatRenewedBy } : {}),
    ...(d.heartbeatSynced !== undefined ? { heartbeatSynced: d.heartbeatSynced } : {}),
    ...(d.proof ? { proof: d.proof } : {}),
  };
}
