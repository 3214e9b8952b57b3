// The shape of every pure decision: what a handler is given (event, a view of current state read by its
// adapter, now, its own identity) and what it returns (an outcome, typed commands for the adapter, events to
// publish). Like etcd's raft: a state machine fed events and state, returning decisions; the adapter does I/O.
//
// Execution contract for adapters (every function):
//  1. Run `actions` in order. Stop at the first failure; publish nothing then.
//  2. A write that fails on its guard (409 Conflict on a resourceVersion, AlreadyExists on a create, a Lease
//     held by someone else) means the view was stale: re-read the view and call decide again (bounded, e.g. 3
//     times), else dead-letter/redeliver as retriable.
//  3. Only after every action succeeded, publish `emit` (events follow the writes, so an event never
//     announces a state the API does not hold).
//  4. Actions that produce a result (powerOff; the release deletes) feed it back into the same stage's decide
//     as `DecideInput.result` (etcd raft's Ready → Step loop), with the view's incident as just written; that
//     decision is executed the same way, and its events follow the first decision's.
//  5. `releaseLease` is best effort (an unreleased Lease expires by itself): it is started in order but
//     neither awaited before the next action or `emit` nor able to fail them.
//  6. A `waitUntil` that opens the list and actually waits ends the decision: the view is read again and
//     decide called again (like a stale view), so what the wait was for is decided on current state (a pause
//     or a recovery that came meanwhile wins).
//  7. `handOffLeases` (best effort, never fails) is started in order but awaited by nothing, not even `emit`
//     (node.fenced never waits for it); its result is fed back (point 4) when it ends, to no action or event.
// This module declares types and tiny helpers only; it must never perform I/O.
import type { Attempt, NodeFence, NodeFenceStatus } from "./incident.ts";
import type { FencingPolicySpec, ResolvedFencingLevel } from "./policy.ts";
import type { ProbeTarget } from "./probe-address.ts";
import type { WatchdogPlan } from "./watchdog.ts";
import type { IgnoreCode, RejectCode } from "./reasons.ts";
import type { HandoffPlan, HandoffResult } from "./lease-handoff.ts";

/** An event a decision asks to publish once its actions succeeded; the runtime wraps it in a
 * CloudEvents envelope (events/envelope.ts) with id, source, time and trace context. */
export interface OutgoingEvent<T = unknown> {
  type: string;
  subject: string;
  ffincident?: string;
  data: T;
}

/**
 * What happened to one delivered input. Every input ends in exactly one outcome. An ignored
 * or rejected outcome carries a stable `code` (core/reasons.ts: match on it) and a human
 * `reason` (free text for logs and operators: never match on it).
 */
export type Outcome =
  /** The handler acted on it (state written and/or events emitted). */
  | { kind: "processed"; detail?: string }
  /** Valid but nothing to do (duplicate, stale, below threshold); code and reason are recorded. */
  | { kind: "ignored"; code: IgnoreCode; reason: string }
  /** Valid envelope but unusable content; goes to the dead-letter topic with the code and reason. */
  | { kind: "rejected"; code: RejectCode; reason: string };

export type ConditionStatus = "True" | "False" | "Unknown";

/** What the adapter knows about a Node (from its informer). */
export interface NodeInfo {
  name: string;
  /** status.nodeInfo.bootID: the node's incarnation. */
  bootId: string;
  /** The Ready condition's status. */
  ready: ConditionStatus;
  /** The node's labels (fencing level selectors; control-plane role: core/rules.ts isControlPlane). */
  labels: Record<string, string>;
  /** spec.unschedulable: the node is cordoned (core/planned.ts). */
  unschedulable?: boolean;
  /**
   * The node's annotations that say planned work (core/planned.ts PLANNED_ANNOTATIONS: the
   * fastfence pause, the machine-config daemon's state and configs); others are left out.
   */
  annotations?: Readonly<Record<string, string>>;
  /** Where the node is probed (core/probe-address.ts; port absent: the policy's); absent: no address. */
  probeAddress?: ProbeTarget;
  /**
   * The node carries the out-of-service taint (OUT_OF_SERVICE_TAINT's key, any value): it
   * was fenced off and is not back yet, so it is off the probe ring (core/ring.ts).
   */
  outOfService?: boolean;
  fencedOff?: string; // the annotation fastfence.io/fenced-off (core/fenced-off.ts); absent: none
}

/** A node's heartbeat Lease (fastfence-alive-<node>) as one read saw it. */
export interface HeartbeatRead {
  resourceVersion: string;
  /** RFC 3339 (renewTime, written with the node's clock). */
  renewTime?: string;
}

/**
 * What fence's last look before an off command needs (functions/fence/last-look.pure.ts):
 * where to probe, which Lease to read and what it was when the round started, and the
 * incident's boot ID and confirmation time. Carried by the powerOff action.
 */
export interface LastLookPlan {
  node: string;
  /** The incident's boot ID. */
  bootId: string;
  /** The node's probe address and the policy's probe timeout; absent: the node has no address. */
  probe?: { host: string; port: number; timeoutMs: number };
  /** The node's heartbeat Lease and the fastfence namespace it lives in is the adapter's. */
  heartbeatLease: string;
  /** The heartbeat Lease as read when the round started ("absent": it did not exist; undefined: not read). */
  baseline?: HeartbeatRead | "absent";
  /**
   * When the incident was confirmed (RFC 3339, confirm's clock): a heartbeat renewal dated
   * later, beyond the skew bound, was written after the node was found dead.
   */
  confirmedAt: string;
  /** The policy's corroboration.maxClockSkewMs. */
  maxClockSkewMs: number;
}

/** The per-node fencing Lease as read (coordination.k8s.io/v1). */
export interface LeaseInfo {
  holder?: string;
  /** RFC 3339 (renewTime). */
  renewTime?: string;
  durationMs: number;
}

/**
 * An observer node as the API describes it: the keys its event-source replica published on
 * its heartbeat Lease (fastfence-alive-<node>; only that node's identity may write it) and
 * when that Lease was last renewed.
 */
export interface ObserverInfo {
  /** Published key annotations ("<keyId>:<base64 SPKI DER>"), current first, then the previous one. */
  keys: string[];
  /** RFC 3339 (renewTime, written with the observer node's clock). */
  renewTime?: string;
  durationMs: number;
}

/** One incident admitted to fencing in the AdmissionLedger. */
export interface AdmittedEntry {
  node: string;
  /** When it was admitted (RFC 3339). */
  at: string;
}

/**
 * The cluster-wide admission ledger (one Lease, ADMISSION_LEDGER_LEASE): the incidents
 * admitted to fencing, written with a resourceVersion-guarded update before each
 * Confirmed write. It is what makes the storm guard and the etcd-quorum rule hold under
 * concurrent confirmations: two confirmers that decided on the same ledger cannot both
 * write it, and the loser decides again with the winner's entry counted.
 */
export interface AdmissionLedger {
  /** Absent: the ledger object does not exist yet (the first admission creates it). */
  resourceVersion?: string;
  /** Incident name → its node and admission time. */
  admitted: Readonly<Record<string, AdmittedEntry>>;
}

/** Current state, read by the adapter before deciding. */
export interface View {
  /** The incident this event is about, if it exists (with metadata.resourceVersion). */
  incident?: NodeFence;
  /** The node the event is about (absent: not in the API). */
  node?: NodeInfo;
  /** All NodeFence incidents not in a terminal phase (storm guard, control-plane rule). */
  openIncidents: readonly NodeFence[];
  /** All nodes of the cluster. */
  nodes: readonly NodeInfo[];
  /** The admission ledger, read with the cluster lists (ViewRequest.cluster). */
  ledger?: AdmissionLedger;
  policy: FencingPolicySpec;
  /** The node's fencing Lease (fence stage only). */
  lease?: LeaseInfo;
  /**
   * Observer nodes by name (ViewRequest.observers): their published keys and heartbeat,
   * to check a claim's origin (core/evidence-checks.ts). Absent: not read.
   */
  observers?: Readonly<Record<string, ObserverInfo>>;
  /** The node's kubelet Lease (kube-node-lease/<node>, ViewRequest.kubeletLease), read from the API. */
  kubeletLease?: LeaseInfo;
  /** The node's own heartbeat Lease (ViewRequest.heartbeatLease; "absent": read, there is none); undefined: not read. */
  heartbeat?: HeartbeatRead | "absent";
  /**
   * Identities (service-account user names) whose Confirmed incidents may be fenced (S6).
   * From the deployment's configuration, never from an event.
   */
  trustedConfirmers: readonly string[];
  /**
   * Levels discovered for the node (ViewRequest.discovery; fencing.discovery "Metal3": from
   * its BareMetalHost), read only when the policy opts in and no policy entry matches it.
   */
  discoveredLevels?: ResolvedFencingLevel[];
  /** Why discovery found nothing (secret-free), for messages. */
  discoveryError?: string;
  /** Planned work and other remediators that concern the node (ViewRequest.planned), read from the API. */
  planned?: PlannedView;
}

/** What the API says about planned work for one node and the cluster (core/planned.ts decides on it). */
export interface PlannedView {
  /** The medik8s NodeMaintenance objects for the node (names); empty: none (or no such CRD). */
  nodeMaintenances: readonly string[];
  /** ClusterVersion "version" Progressing=True: its message (absent: no upgrade, or not OpenShift). */
  clusterUpgrade?: string;
  /** Other remediators that select the node (core/remediators.ts), as "Kind/name (remediation …)". */
  otherRemediators: readonly string[];
}

/** Who is deciding: the adapter's authenticated identity (service account) and replica. */
export interface Self {
  /** e.g. "system:serviceaccount:fastfence:confirm". Written as confirmedBy / lease holder. */
  identity: string;
  /** Pod name, for logs and lease holder uniqueness. */
  replica: string;
  /**
   * The node this replica runs on (FASTFENCE_NODE_NAME, the Downward API's spec.nodeName),
   * when known. fence leaves a round for its own node to replicas on other nodes.
   */
  node?: string;
}

/** Release counts of one remediation: what the deletes removed. */
export interface ReleaseCounts {
  podsDeleted: number;
  volumeAttachmentsDeleted: number;
  vmLaunchersDeleted: number; // virt-launcher pods (one per VMI of the node; KubeVirt restarts it)
}

// The result of an action, fed back into the stage that asked for it (contract point 4). `powerOff`:
// every attempt of the round, in order. `released`: what the deletes removed. handOffLeases: HandoffResult.
export type ActionResult =
  { kind: "powerOff"; attempts: Attempt[] } | { kind: "released"; counts: ReleaseCounts } | HandoffResult;

export interface DecideInput<E = unknown> {
  event: E;
  view: View;
  /** Epoch milliseconds. */
  now: number;
  self: Self;
  /**
   * Set when this call decides on the result of an action the previous decision for the
   * same event asked for; `view.incident` is then the incident as that decision wrote it.
   */
  result?: ActionResult;
}

/**
 * An input that is not an event: a periodic re-drive of one open incident from its state in
 * the API (level-triggered progress). A stage that accepts it says what to read
 * (`PureStage.locateResync`) and decides on the fresh view like for an event.
 */
export interface Resync {
  kind: "resync";
  incident: string;
  node: string;
}

export const OUT_OF_SERVICE_TAINT = {
  key: "node.kubernetes.io/out-of-service",
  value: "nodeshutdown",
  effect: "NoExecute",
} as const;
export type Taint = { key: string; value: string; effect: "NoExecute" | "NoSchedule" | "PreferNoSchedule" };

/** Commands a handler asks its adapter to execute, in order. */
export type Action =
  /** Create the incident (AlreadyExists = conflict), then write `incident.status` on the new resourceVersion. */
  | { kind: "createIncident"; incident: NodeFence }
  /** Delete a Closed incident a new failure supersedes (core/superseded.ts supersededBy), guarded like an update; gone: done. */
  | { kind: "removeClosedIncident"; name: string; expectedResourceVersion: string }
  /** Replace the incident status, guarded by the resourceVersion read (409 = conflict). */
  | { kind: "updateIncidentStatus"; name: string; expectedResourceVersion: string; status: NodeFenceStatus }
  /**
   * Replace the admission ledger with `admitted`, guarded by the resourceVersion read
   * (absent: create it; 409 or AlreadyExists = conflict). Comes before the Confirmed write.
   */
  | { kind: "writeLedger"; expectedResourceVersion?: string; admitted: Record<string, AdmittedEntry> }
  /** Acquire or renew the per-node Lease; fails if another holder's lease has not expired. */
  | { kind: "takeLease"; leaseName: string; node: string; holder: string; durationMs: number }
  /** Release the Lease if still held by `holder` (best effort, not awaited: contract 5). */
  | { kind: "releaseLease"; leaseName: string; node: string; holder: string }
  /** Sleep until epoch ms `at` (bounded by the delivery timeout). */
  | { kind: "waitUntil"; at: number }
  /**
   * Run the levels in order until one reads back Off; produces a PowerOffResult for
   * fence.onPowerOffResult. Each level: off command, then poll the power state until Off
   * or its timeout. Never report off-confirmed without a read-back of exactly Off (S1).
   */
  | {
      kind: "powerOff";
      node: string;
      incident: string;
      round: number;
      holder: string;
      /** Policy levels, or discovered ones (BareMetalHost: Secret in the host's namespace, hold annotation). */
      levels: ResolvedFencingLevel[];
      timeoutMs: number;
      /** The last look before each off command (absent: none, e.g. an old caller's action). */
      look?: LastLookPlan;
      /** The watchdog level after `levels` (functions/fence/watchdog-level.pure.ts); absent: none. */
      watchdog?: WatchdogPlan;
      /** Level indexes not to use: they read back Off while the node ran (fence/look-after.pure.ts). */
      skipLevels?: number[];
    }
  | { kind: "powerOn"; node: string; incident: string; levels: ResolvedFencingLevel[] }
  | { kind: "markFencedOff"; node: string; value: string } // fence: the fenced-off fact (core/fenced-off.ts)
  | { kind: "handOffLeases"; plan: HandoffPlan } // after S1: release the node's Leases (core/lease-handoff.ts)
  | { kind: "setTaint"; node: string; taint: Taint }
  | { kind: "removeTaint"; node: string; taint: Taint }
  /** Force-delete every pod bound to the node (gracePeriodSeconds 0); result: count. */
  | { kind: "deletePods"; node: string; gracePeriodSeconds: 0 }
  /** Delete every VolumeAttachment whose spec.nodeName is the node; result: count. */
  | { kind: "deleteVolumeAttachments"; node: string }
  /** Force-delete the node's virt-launcher pods, never VMIs (docs/safety.md); result: count. */
  | { kind: "deleteVmLaunchers"; node: string };

export type ActionKind = Action["kind"];

export interface Decision {
  outcome: Outcome;
  actions: Action[];
  emit: OutgoingEvent[];
}

/** Nothing to do: a stable code (core/reasons.ts) and the human reason. */
export function ignored(code: IgnoreCode, reason: string): Decision {
  return { outcome: { kind: "ignored", code, reason }, actions: [], emit: [] };
}

/** Unusable event (dead-lettered): a stable code (core/reasons.ts) and the human reason. */
export function rejected(code: RejectCode, reason: string): Decision {
  return { outcome: { kind: "rejected", code, reason }, actions: [], emit: [] };
}

export function processed(detail: string, actions: Action[], emit: OutgoingEvent[] = []): Decision {
  return { outcome: { kind: "processed", detail }, actions, emit };
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Epoch ms of an RFC 3339 string, or NaN. */
export function ms(time: string | undefined): number {
  return time === undefined ? Number.NaN : Date.parse(time);
}

/** Name of the Lease a node's own event-source replica renews to show it reaches the API. */
export function heartbeatLeaseName(node: string): string {
  return `fastfence-alive-${node}`.slice(0, 253);
}

/** Name of the per-node fencing Lease. */
export function fenceLeaseName(node: string): string {
  return `fastfence-fence-${node}`.slice(0, 253);
}

/** An event to publish once the actions succeeded. */
export function outgoing<T>(
  type: string,
  subject: string,
  incident: string | undefined,
  data: T,
): OutgoingEvent<T> {
  return { type, subject, ...(incident ? { ffincident: incident } : {}), data };
}

/** What the adapter must read before calling decide for one event. */
export interface ViewRequest {
  /** The node the event is about (View.node). */
  node: string;
  /** Read this incident by name (View.incident). */
  incident?: string;
  /** Else read the node's newest non-terminal incident, by label fastfence.io/node (View.incident). */
  openIncidentOfNode?: boolean;
  /** With openIncidentOfNode: leave out the incidents of this boot (recover looks for an earlier boot's). */
  exceptBootId?: string;
  /** Read the node's fencing Lease (View.lease). */
  lease?: string;
  /** Read all nodes and all open incidents (View.nodes, View.openIncidents); otherwise they may be empty. */
  cluster: boolean;
  /** Read all nodes (View.nodes) even when `cluster` is false: the ring check of a claim needs them. */
  nodeList?: boolean;
  /** Read every observer node's published keys and heartbeat (View.observers). */
  observers?: boolean;
  /** Read the node's kubelet Lease (View.kubeletLease). */
  kubeletLease?: boolean;
  /** Read the node's heartbeat Lease fastfence-alive-<node> (View.heartbeat). */
  heartbeatLease?: boolean;
  /** Discover the node's fencing levels (View.discoveredLevels / discoveryError) when the policy opts in. */
  discovery?: boolean;
  /** Read planned work and other remediators for the node (View.planned). */
  planned?: boolean;
  /** Read the FencingPolicy afresh, not from the reader's short cache (a pause must act at once). */
  freshPolicy?: boolean;
}

/** Who holds a Lease now, if anyone (an expired Lease is held by nobody). */
export function liveHolder(
  lease: LeaseInfo | undefined,
  now: number,
): { holder: string; until: number } | undefined {
  if (!lease?.holder) return undefined;
  const until = ms(lease.renewTime) + lease.durationMs;
  return Number.isFinite(until) && until > now ? { holder: lease.holder, until } : undefined;
}
