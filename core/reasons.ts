// The stable reason codes of "ignored" and "rejected" outcomes (core/decision.ts
// Outcome), in the style of Kubernetes condition reasons: a CamelCase code that logs,
// dead-letter records, metrics queries and tests match on, beside a free human message
// that may change at any time. Every code is defined here once, with one line saying what
// it means; `ignored(code, …)` and `rejected(code, …)` (core/decision.ts) accept only
// these, so an unknown code is a type error. Declarations only; no I/O.

/** Why a valid event needed nothing done. The event is acknowledged; nothing is written or emitted. */
export const IGNORE_CODES = {
  UnhandledEventType: "The stage does not act on this event type.",
  UnhandledInput: "The stage does not act on this kind of input (e.g. a resync of an open incident).",
  NodeNotFound: "The node the event is about is not in the API.",
  IncidentNotFound: "No incident in the API matches the event: an event alone changes nothing (S6).",
  StaleIncarnation: "The event is about an older boot of the node than the one it runs now (S3).",
  StaleEvent: "The event or its evidence is older than the policy allows (maxEventAgeMs, evidenceWindowMs).",
  PhasePassed: "The incident is already past the phase this event acts on (duplicate or reordered delivery).",
  WrongPhase: "The incident is not in the phase this event acts on (early, forged or out of order).",
  ProbeRestored: "The observer reaches the node again: nothing to suspect.",
  NodeOutOfService:
    "The node carries the out-of-service taint (fenced off, not yet recovered): it is off the probe ring, and probes of it count for nothing.",
  ObserverOnNode: "The observer runs on the node it reports on, so it is not independent (S2).",
  ConditionsNotCounted: "Policy suspicion.countNodeCondition is off: node conditions are not observers.",
  TooFewMisses: "Fewer consecutive probe misses than suspicion.missThreshold.",
  StreakTooShort: "The miss streak is shorter than suspicion.minSuspectMs.",
  SuspicionNotDue:
    "This miss streak was already suspected; its next repeat (suspicion.repeatEvery) is not due.",
  BootIdChanged: "A boot-ID change ends incidents (recover); it is no suspicion.",
  NodeReady: "The node is Ready: nothing to suspect.",
  LeaseNotStale: "The kubelet Lease was renewed within suspicion.leaseStaleMs (or has no renew time).",
  DuplicateEvidence: "The observer's evidence is already recorded and still fresh: no write needed.",
  HeartbeatSeen:
    "The node renewed its heartbeat after the misses began (partitioned, not dead); already recorded.",
  StillBlocked: "The storm guard or etcd-quorum rule still blocks the incident for the same reason.",
  DrivenByOtherReplica: "Another fence replica holds the node's fencing Lease or drives the incident.",
  DrivenByThisReplica: "This replica already drives the incident's fencing.",
  OwnNode:
    "This fence replica runs on the node to fence: a replica on another node drives the round (this one would power itself off mid-round); it steps in only when none has by twice reconcile.stalledAfterMs.",
  StaleRound: "The fence.failed event is of another round than the incident's.",
  FencingGaveUp: "The last fencing round (fencing.maxRounds) failed; an operator must act.",
  NodeNotReady: "The node is not Ready: nothing to recover.",
  NotARecovery: "Ready with the incident's own boot ID (the lagging Ready of a dead node), not a new boot.",
  FencingInProgress: "Fencing is in progress; recovery waits for its result.",
  PowerOnDisabled: "Policy powerOnAfterFence is off: the node stays off.",
  PowerOnRequested: "Power-on was already requested for this incident.",
  NoFencingLevels: "No fencing level matches the node, so it cannot be powered on.",
  NotDue:
    "A resync found the incident's next step not overdue yet (reconcile.stalledAfterMs): the event path still has it.",
  NotThisStage: "A resync of an incident in a phase another stage owns.",
  Held: "A hold for planned work (core/planned.ts) still stops fencing; the incident already says why.",
  AlreadyObserved:
    "The incident was observed in Observe mode (reason Observed): it is never fenced, and recover closes it.",
  LostRaces: "Another replica won every guarded write for this event; its outcome is the recorded one.",
  FencedOffNotMarked:
    "The node carries no fenced-off fact (fastfence.io/fenced-off) naming the incident and its boot, so the admission policy would refuse the out-of-service taint: remediate-workloads waits, and its resync retries.",
  HeartbeatWatchNotSynced:
    "The observer's heartbeat-Lease watch was not synced when it probed: with suspicion.heartbeatVeto on, evidence the veto cannot check does not count.",
} as const satisfies Record<string, string>;

/** Why a valid event could not be used. The event goes to the dead-letter topic with the code. */
export const REJECT_CODES = {
  InconsistentEvent: "The event contradicts itself (incident name vs node and boot ID, evidence node).",
  ViewMismatch: "The state read for the event is not the state the event names (an adapter bug).",
  MissingResourceVersion: "The incident was read without a resourceVersion: no guarded write is possible.",
  UntrustedConfirmation: "The incident's confirmedBy is not a trusted confirm identity (S6).",
  NoConfirmationTime: "The incident is Confirmed without a confirmed timestamp.",
  StoredEvidenceUnverified:
    "The incident's stored evidence makes a quorum only with pieces whose signature does not verify against the keys published on the observers' heartbeat Leases (forged, unsigned, altered, or of another boot): fence counts only verified evidence (S2).",
  ConfirmationBelowQuorum: "The incident records fewer fresh independent observers than the quorum (S2).",
  PowerOffUnproven: "The incident is FencedOff without a recorded Off read-back after the command (S1).",
  TargetMismatch:
    "The incident's spec names another node or boot than its name and labels, the event, or the node read for it (core/incident-target.ts): nothing is fenced or released.",
  MissingProof: "A probe claim carries no signature: only a signed observation can become evidence (S6).",
  UnknownObserverKey:
    "The claim's key is not published on its observer node's heartbeat Lease (another node's key, or none).",
  BadSignature: "The signature does not verify over the claim: a field was changed, or it was never signed.",
  ObserverNotReady: "The observer node the claim names is not in the API or not Ready.",
  ObserverHeartbeatStale:
    "The observer node's heartbeat Lease was not renewed within its duration plus corroboration.maxClockSkewMs.",
  ObserverNotAssigned:
    "The ring (core/ring.ts) does not assign the observer node to probe the claim's target.",
  FutureTimestamp:
    "A timestamp of the input is later than the receiver's clock plus corroboration.maxClockSkewMs.",
  OperatorRequestExpired:
    "The incident stands on an operator's request that was not confirmed within fencing.operatorRequestMaxAgeMs of being made, and the observers' evidence is below quorum (core/operator-request.ts).",
  OperatorRequestWithdrawn:
    "The incident stands on an operator's request that was withdrawn (spec.operatorWithdrawal), and the observers' evidence is below quorum.",
} as const satisfies Record<string, string>;

/**
 * Rejections that refuse untrusted input (forged, unverifiable or time-shifted evidence):
 * counted in fastfence_inputs_refused_total{stage,reason} besides being dead-lettered.
 */
export const REFUSAL_CODES: ReadonlySet<RejectCode> = new Set<RejectCode>([
  "MissingProof",
  "UnknownObserverKey",
  "BadSignature",
  "ObserverNotReady",
  "ObserverHeartbeatStale",
  "ObserverNotAssigned",
  "FutureTimestamp",
  "TargetMismatch",
  "OperatorRequestExpired",
  "OperatorRequestWithdrawn",
]);

export type IgnoreCode = keyof typeof IGNORE_CODES;
export type RejectCode = keyof typeof REJECT_CODES;
