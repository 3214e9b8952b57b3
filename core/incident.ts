// The fencing incident (namespaced NodeFence custom resource): its phases, the allowed
// transitions between them, the status shape (per-phase timestamps, evidence, attempts)
// and the naming rule (one incident per node and incarnation, i.e. boot ID). The CRD in
// knative/base/crds/nodefence.yaml uses these field names. Pure: no I/O, no clock.
import { z } from "zod";
import { FastfenceError } from "./errors.ts";
import { AttemptSchema } from "./attempt.ts";
import { BmcLieSchema } from "./bmc-lie.ts";
import { OperatorRequestSchema, OperatorWithdrawalSchema } from "./operator-request-schema.ts";

export const NODEFENCE_GROUP = "fastfence.io";
export const NODEFENCE_VERSION = "v1alpha1";
export const NODEFENCE_KIND = "NodeFence";
export const NODEFENCE_PLURAL = "nodefences";
/** Label on every incident: the node it is about (for list/watch by node). */
export const NODE_LABEL = "fastfence.io/node";
/** Label on every incident: the node's boot ID (incarnation) it is tied to. */
export const BOOT_ID_LABEL = "fastfence.io/boot-id";
/**
 * Annotation an operator sets on a final FenceFailed incident (`fastfence release-slot`) to
 * end it and free its storm-guard slot; the value is the operator's reason. Only identities
 * that are not fastfence stages may set it (knative/base/admission); recover acts on it.
 */
export const RELEASE_SLOT_ANNOTATION = "fastfence.io/release-slot";

export const PHASES = [
  "Suspected",
  "Confirmed",
  "Blocked",
  "Fencing",
  "FenceFailed",
  "FencedOff",
  "Released",
  "Recovered",
  "Closed",
] as const;
export type Phase = (typeof PHASES)[number];

/**
 * Allowed transitions. The happy path is Suspected → Confirmed → Fencing → FencedOff
 * (power-off read back) → Released (workloads) → Recovered (node back with a new boot ID).
 * Blocked: storm guard or control-plane quorum refused fencing (may be re-confirmed later).
 * FenceFailed: a round of levels ended without a confirmed power-off (retried, or final).
 * Closed: the incident ended without fencing (node rebooted on its own, stale incarnation).
 * FencedOff/Released → FenceFailed: the look after the power-off proved the read-back Off
 * false (reason BMCLied, functions/fence/look-after.pure.ts); the next level is tried.
 */
export const TRANSITIONS: Readonly<Record<Phase, readonly Phase[]>> = {
  Suspected: ["Confirmed", "Blocked", "Closed"],
  Confirmed: ["Fencing", "FenceFailed", "Closed"],
  Blocked: ["Confirmed", "Closed"],
  Fencing: ["Fencing", "FencedOff", "FenceFailed", "Closed"],
  FenceFailed: ["Fencing", "Recovered", "Closed"],
  FencedOff: ["Released", "Recovered", "FenceFailed"],
  Released: ["Recovered", "FenceFailed"],
  Recovered: ["Closed"],
  Closed: [],
};

export function canTransition(from: Phase, to: Phase): boolean {
  return TRANSITIONS[from].includes(to);
}

/**
 * Phases of an incident admitted to fencing (confirmed and not yet ended): each takes up
 * a slot of the storm guard and counts against the etcd-quorum rule (core/rules.ts).
 */
export const ADMITTED_PHASES: readonly Phase[] = [
  "Confirmed",
  "Fencing",
  "FenceFailed",
  "FencedOff",
  "Released",
];

/**
 * Phases that end an incident. Nothing more happens to the node for this incarnation, except
 * that an incident closed as back gives way to a later failure of it (core/superseded.ts).
 */
export const TERMINAL_PHASES: readonly Phase[] = ["Recovered", "Closed"];
export function isTerminal(phase: Phase): boolean {
  return TERMINAL_PHASES.includes(phase);
}

/**
 * A FenceFailed incident no round will follow: its last round (fencing.maxRounds) failed,
 * or it failed without a retry time (no fencing levels, a final interrupted round). Its
 * storm-guard slot stays taken until the node comes back or an operator releases it.
 */
export function isFinalFenceFailed(st: NodeFenceStatus, maxRounds: number): boolean {
  return st.phase === "FenceFailed" && (st.round >= maxRounds || st.retryNotBefore === undefined);
}

/** Order along the happy path; used to say "already past this step". */
export const PHASE_ORDER: Readonly<Record<Phase, number>> = {
  Suspected: 0,
  Blocked: 1,
  Confirmed: 2,
  Fencing: 3,
  FenceFailed: 3,
  FencedOff: 4,
  Released: 5,
  Recovered: 6,
  Closed: 7,
};

/** Key of each phase in status.timestamps. */
export const PHASE_TIMESTAMP_KEY = {
  Suspected: "suspected",
  Confirmed: "confirmed",
  Blocked: "blocked",
  Fencing: "fencing",
  FenceFailed: "fenceFailed",
  FencedOff: "fencedOff",
  Released: "released",
  Recovered: "recovered",
  Closed: "closed",
} as const satisfies Record<Phase, string>;

const Time = z.iso.datetime({ offset: true });

export {
  ATTEMPT_RESULTS,
  AttemptSchema,
  LAST_LOOK_REASONS,
  LastLookSchema,
  POWER_STATES,
  WatchdogProofSchema,
  type Attempt,
  type AttemptResult,
  type LastLook,
  type LastLookReason,
  type PowerState,
  type WatchdogProof,
} from "./attempt.ts";

export const EVIDENCE_KINDS = ["probe", "condition", "lease"] as const;
export type EvidenceKind = (typeof EVIDENCE_KINDS)[number];

/** An observer's Ed25519 signature over its claim (core/evidence-proof.ts). */
export const ProofSchema = z.object({
  /** First 16 hex digits of sha256 over the signing key's SPKI DER. */
  keyId: z.string().min(1).max(64),
  /** Signature over the claim's canonical bytes, base64. */
  sig: z.string().min(1).max(256),
});

/** One observer's testimony that a node looks dead. */
export const EvidenceSchema = z.object({
  /** Observer replica id (pod name), e.g. "event-source-abc12". */
  observer: z.string().min(1),
  /** Node the observer runs on; independence is counted by this. */
  observerNode: z.string().min(1),
  /** The suspected node. */
  node: z.string().min(1),
  /** Probe evidence: the node's boot ID as the observer saw it (signed); counts only against that boot. */
  targetBootId: z.string().max(253).optional(),
  /** When the observation was made (last miss, condition change). */
  at: Time,
  kind: z.enum(EVIDENCE_KINDS),
  /** Consecutive misses (probe evidence). */
  consecutiveMisses: z.int().min(0).optional(),
  /** First miss of the streak (probe evidence). */
  firstMissAt: Time.optional(),
  /** Observer's clock: when it last saw the node's heartbeat Lease renewed (probe evidence, signed). */
  heartbeatSeenAt: Time.optional(),
  /** Observer's clock: the latest that sighted renewal can have been written (probe evidence, signed). */
  heartbeatRenewedBy: Time.optional(),
  /** Whether the observer's heartbeat watch was synced when it probed (probe evidence, signed). */
  heartbeatSynced: z.boolean().optional(),
  /**
   * The observer's Ed25519 signature over the claim (core/evidence-proof.ts), re-verified by
   * confirm and kept as the audit trail. Probe evidence only: condition and lease evidence
   * is re-read from the API instead.
   */
  proof: ProofSchema.optional(),
});
export type Evidence = z.infer<typeof EvidenceSchema>;

export {
  OperatorRequestSchema,
  OperatorWithdrawalSchema,
  type OperatorRequest,
  type OperatorWithdrawal,
} from "./operator-request-schema.ts";

/** status.reason of an incident confirmed on an operator's request. */
export const OPERATOR_REQUESTED_REASON = "OperatorRequested";
/** status.reason fence writes on a Confirmed incident it observed instead of fencing (Observe mode). */
export const OBSERVED_REASON = "Observed";

/**
 * The CRD's transition rules on the spec (run by the API server for every writer, admins
 * included): the fields naming the incident's target, the node and its boot, never change.
 * On spec, not on each field (a field's transition rule does not run when the field is
 * absent from the old or new object). A changed one would turn a live incident on another,
 * healthy node; core/incident-target.ts checks the same again before a stage acts.
 */
export const NODEFENCE_TARGET_RULES = [
  {
    rule: "self.nodeName == oldSelf.nodeName",
    message:
      "spec.nodeName is immutable: an incident is about the node it was created for (open a new incident for another node)",
  },
  {
    rule: "self.bootId == oldSelf.bootId",
    message:
      "spec.bootId is immutable: an incident is about the boot of its node it was created for (a new boot gets a new incident)",
  },
] as const;

export const NodeFenceSpecSchema = z
  .object({
    /** The node this incident is about (immutable: NODEFENCE_TARGET_RULES). */
    nodeName: z.string().min(1),
    /** The node's boot ID (incarnation) when the incident began (immutable). */
    bootId: z.string().min(1),
    /** FencingPolicy in force (cluster-scoped name). */
    policyRef: z.string().optional(),
    /** Set when a person asked for this fencing (`fastfence fence`); absent for detected failures. */
    operatorRequest: OperatorRequestSchema.optional(),
    /** Set when a person withdrew the request (`fastfence fence NODE --withdraw`). */
    operatorWithdrawal: OperatorWithdrawalSchema.optional(),
  })
  .meta({ "x-kubernetes-validations": [...NODEFENCE_TARGET_RULES] });
export type NodeFenceSpec = z.infer<typeof NodeFenceSpecSchema>;

export const NodeFenceStatusSchema = z.object({
  phase: z.enum(PHASES),
  /** Machine-readable reason of the last transition (e.g. "StormGuard", "PowerOffConfirmed"). */
  reason: z.string().optional(),
  /** Human-readable detail of the last transition. */
  message: z.string().optional(),
  /** When each phase was entered (first time). */
  timestamps: z
    .object({
      suspected: Time.optional(),
      confirmed: Time.optional(),
      blocked: Time.optional(),
      fencing: Time.optional(),
      fenceFailed: Time.optional(),
      fencedOff: Time.optional(),
      released: Time.optional(),
      recovered: Time.optional(),
      closed: Time.optional(),
    })
    .default({}),
  /** Identity of the confirm stage that wrote phase Confirmed (S6). */
  confirmedBy: z.string().optional(),
  evidence: z.array(EvidenceSchema).default([]),
  /** Fencing round in progress or last finished (1-based; 0 = none yet). */
  round: z.int().min(0).default(0),
  /** Lease holder that drives the power actions of the current round (S3). */
  fencingBy: z.string().optional(),
  attempts: z.array(AttemptSchema).default([]),
  /** Power-off read back as Off at this time (S1); the only licence to release workloads. */
  powerOffConfirmedAt: Time.optional(),
  /** Levels whose read-back Off the node proved false (the look after); never trusted again here. */
  bmcLied: z.array(BmcLieSchema).max(16).optional(),
  /** Earliest time the next fencing round may start (after FenceFailed). */
  retryNotBefore: Time.optional(),
  /** Workloads released by remediate-workloads. */
  released: z
    .object({
      taint: z.string(),
      podsDeleted: z.int().min(0),
      volumeAttachmentsDeleted: z.int().min(0),
      /** virt-launcher pods force-deleted (one per VMI that ran on the node); 0 in a status written before it existed. */
      vmLaunchersDeleted: z.int().min(0).default(0),
      /** VMIs deleted: written by earlier builds, whose release deleted VMIs; kept, never written now. */
      vmisDeleted: z.int().min(0).optional(),
    })
    .optional(),
  /** Boot ID the node came back with (recover). */
  recoveredBootId: z.string().optional(),
  /** When recover asked the BMC to power the node back on (policy powerOnAfterFence). */
  powerOnRequestedAt: Time.optional(),
  /**
   * Confirmed, Fenced, Released, ReadyForRecovery: derived from the fields above at every
   * status write (core/incident-conditions.ts) for `kubectl wait`; no decision reads them.
   */
  conditions: z
    .array(
      z.object({
        type: z.enum(["Confirmed", "Fenced", "Released", "ReadyForRecovery"]),
        status: z.enum(["True", "False", "Unknown"]),
        reason: z.string().min(1).max(1024),
        message: z.string().max(32768),
        lastTransitionTime: Time,
      }),
    )
    .max(8)
    .optional(),
});
export type NodeFenceStatus = z.infer<typeof NodeFenceStatusSchema>;

export interface ObjectMeta {
  name: string;
  namespace?: string;
  /** Set by the API server. */
  uid?: string;
  /** Set by the API server; every status write carries the one it read. */
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  creationTimestamp?: string;
}

/** A NodeFence as read from (or written to) the API. */
export interface NodeFence {
  apiVersion: "fastfence.io/v1alpha1";
  kind: "NodeFence";
  metadata: ObjectMeta;
  spec: NodeFenceSpec;
  status?: NodeFenceStatus;
}

const DNS_LABEL_MAX = 63;

/**
 * The incident name for a node incarnation: `<node>-<first 8 of bootId>`, lowercased and
 * kept a valid DNS subdomain. Equal inputs give equal names, so two confirm replicas that
 * race to create the same incident collide on the API server (AlreadyExists) by design.
 */
export function incidentName(node: string, bootId: string): string {
  const boot =
    bootId
      .toLowerCase()
      .replace(/[^a-z0-9]/g, "")
      .slice(0, 8) || "noboot";
  const base = node
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 253 - 1 - boot.length)
    .replace(/[^a-z0-9]+$/, "");
  return `${base || "node"}-${boot}`;
}

/** Label value safe form of a boot ID (labels are at most 63 chars of [A-Za-z0-9._-]). */
export function bootIdLabel(bootId: string): string {
  return bootId.replace(/[^A-Za-z0-9._-]/g, "").slice(0, DNS_LABEL_MAX);
}

/** A new incident object (status is written by a follow-up status write). */
export function newIncident(
  node: string,
  bootId: string,
  status: NodeFenceStatus,
  policyRef?: string,
): NodeFence {
  return {
    apiVersion: "fastfence.io/v1alpha1",
    kind: "NodeFence",
    metadata: {
      name: incidentName(node, bootId),
      labels: { [NODE_LABEL]: node, [BOOT_ID_LABEL]: bootIdLabel(bootId) },
    },
    spec: { nodeName: node, bootId, ...(policyRef ? { policyRef } : {}) },
    status,
  };
}

/** The incident's status, or an empty Suspected one when none was written yet. */
export function statusOf(incident: NodeFence): NodeFenceStatus {
  return incident.status ?? emptyStatus();
}

/** The status of an incident nothing has been recorded in yet. */
export function emptyStatus(): NodeFenceStatus {
  return { phase: "Suspected", timestamps: {}, evidence: [], round: 0, attempts: [] };
}

/**
 * Returns `status` moved to `to`, stamping the phase's timestamp (first entry only).
 * Throws on a transition the table forbids: a programming error, never input-driven.
 */
export function transition(
  status: NodeFenceStatus,
  to: Phase,
  nowIso: string,
  changes: Partial<NodeFenceStatus> = {},
): NodeFenceStatus {
  if (status.phase !== to && !canTransition(status.phase, to)) {
    throw new FastfenceError("FF_INTERNAL", `illegal NodeFence transition ${status.phase} -> ${to}`);
  }
  const key = PHASE_TIMESTAMP_KEY[to];
  return {
    ...status,
    ...changes,
    phase: to,
    timestamps: { ...status.timestamps, [key]: status.timestamps[key] ?? nowIso },
  };
}
