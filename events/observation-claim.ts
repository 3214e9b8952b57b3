// The signed part of a node.observed event (core/evidence-proof.ts ObservationClaim):
// one mapping shared by the event source, which signs it, and detect, which verifies it.
// lastOkAt, probe and rttMs are informational and not signed. Pure: no I/O.
import type { ObservationClaim } from "../core/evidence-proof.ts";
import type { NodeObserved } from "./schemas.ts";

export function claimOfObservation(d: Omit<NodeObserved, "proof">): ObservationClaim {
  return {
    observer: d.observer.replica,
    observerNode: d.observer.node,
    target: d.target,
    result: d.result,
    consecutiveMisses: d.consecutiveMisses,
    firstMissAt: d.firstMissAt,
    at: d.at,
    heartbeatSeenAt: d.heartbeatSeenAt,
    heartbeatSynced: d.heartbeatSynced,
  };
}
