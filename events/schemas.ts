// zod (v4) schemas for every fastfence event: the CloudEvents 1.0 envelope, the `data`
// of each event type, and the dead-letter record. Schemas only: no transforms (so
// z.toJSONSchema can render them for AsyncAPI), no I/O. Types are inferred from them.
import { z } from "zod";
import { ATTEMPT_DRIVERS } from "../core/attempt.ts";
import { AttemptSchema, EvidenceSchema, ProofSchema } from "../core/incident.ts";
import { HOLD_REASON_CODES } from "../core/planned.ts";

export const Time = z.iso.datetime({ offset: true }).describe("RFC 3339 time");
/** A Kubernetes node name (DNS-1123 subdomain). */
export const NodeName = z
  .string()
  .min(1)
  .max(253)
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    "must be a DNS-1123 subdomain (node name)",
  );
export const IncidentName = NodeName.describe("NodeFence incident name: <node>-<first 8 of bootId>");
export const BootId = z
  .string()
  .min(1)
  .max(128)
  .describe("status.nodeInfo.bootID of the node (its incarnation)");

export const TRACEPARENT_RE = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
export const SOURCE_RE = /^\/fastfence\/[a-z0-9-]+\/[A-Za-z0-9._-]+$/;

/** The CloudEvents 1.0 envelope of every fastfence event (data checked per type). */
export const EnvelopeSchema = z.object({
  specversion: z.literal("1.0"),
  id: z.string().min(1).max(256),
  source: z.string().regex(SOURCE_RE, 'must be "/fastfence/<component>/<replica>"'),
  type: z.string().regex(/^io\.fastfence\.[a-z0-9.-]+\.v[0-9]+$/, "must be io.fastfence.<name>.v<N>"),
  subject: NodeName.describe("the node the event is about"),
  time: Time,
  datacontenttype: z.literal("application/json").default("application/json"),
  ffincident: IncidentName.optional().describe("incident correlation id (CloudEvents extension)"),
  traceparent: z
    .string()
    .regex(TRACEPARENT_RE, "must be a W3C traceparent 00-<32 hex>-<16 hex>-<2 hex>")
    .optional(),
  data: z.unknown(),
});

/** An observer replica: its pod name and the node it runs on. */
export const ObserverSchema = z.object({
  replica: z.string().min(1).max(253),
  node: NodeName,
});

export const NodeObservedSchema = z
  .object({
    observer: ObserverSchema,
    target: NodeName.describe("the probed node (= subject)"),
    targetBootId: z
      .string()
      .max(253)
      .describe(
        "the target's boot ID as the observer last saw it in the API when it probed (signed); a miss counts only against this boot",
      ),
    result: z.enum(["missed", "restored"]),
    consecutiveMisses: z.int().min(0),
    firstMissAt: Time.optional().describe("first miss of the current streak"),
    lastOkAt: Time.optional().describe("last successful probe"),
    at: Time.describe("when this probe finished"),
    probe: z.object({
      kind: z.literal("tcp"),
      port: z.int().min(1).max(65_535),
      address: z.string().min(1).optional(),
    }),
    rttMs: z.number().min(0).optional().describe("connect time of the last successful probe"),
    heartbeatSeenAt: Time.optional().describe(
      "observer's own clock: when it last saw the target's heartbeat Lease renewed (signed)",
    ),
    heartbeatRenewedBy: Time.optional().describe(
      "observer's own clock: the latest that sighted renewal can have been written (its renewTime plus the smallest recent delivery lag); absent when not dated (signed)",
    ),
    heartbeatSynced: z
      .boolean()
      .optional()
      .describe("whether the observer's heartbeat-Lease watch was listed and live (signed)"),
    proof: ProofSchema.optional().describe(
      "Ed25519 signature over the claim by a key published on the observer node's heartbeat Lease; unsigned claims are refused",
    ),
  })
  .describe(
    "One observer's probe result for one node (sent on every miss and on each restore). Signed: observer, target, targetBootId, result, consecutiveMisses, firstMissAt, at, heartbeatSeenAt, heartbeatRenewedBy, heartbeatSynced; lastOkAt, probe and rttMs are informational.",
  );

export const NodeConditionSchema = z
  .object({
    observer: ObserverSchema,
    node: NodeName,
    bootId: BootId,
    change: z.enum(["ready", "lease", "bootId"]),
    ready: z.enum(["True", "False", "Unknown"]),
    readyReason: z.string().optional(),
    readyTransitionAt: Time.optional(),
    leaseRenewAt: Time.optional().describe("kubelet Lease renewTime (informational: detect reads the API)"),
    at: Time,
  })
  .describe(
    "A Ready-condition, kubelet-Lease or boot-ID change seen by the informers: a hint only; detect re-reads the Node and the kubelet Lease from the API and never trusts these fields.",
  );

export const NodeSuspectedSchema = z
  .object({
    node: NodeName,
    bootId: BootId,
    incident: IncidentName,
    reason: z.enum(["ProbeMisses", "NotReady", "LeaseStale"]),
    evidence: EvidenceSchema,
  })
  .describe("One observer suspects a node; confirm needs a quorum of these from independent observers.");

export const FenceRequestedSchema = z
  .object({
    incident: IncidentName,
    node: NodeName,
    bootId: BootId,
    confirmedAt: Time,
    /** The independent observers that confirmed it; empty only for an operator's request. */
    observers: z.array(z.string().min(1)),
    /** Who asked for it (`fastfence fence`), when a person did. */
    requestedBy: z.string().min(1).optional(),
  })
  .refine((d) => d.observers.length > 0 || d.requestedBy !== undefined, {
    message: "observers must not be empty unless requestedBy is set",
    path: ["observers"],
  })
  .describe("Points fence at a Confirmed incident; fence re-reads the incident and trusts only it (S6).");

export const NodeFencedSchema = z
  .object({
    incident: IncidentName,
    node: NodeName,
    bootId: BootId,
    powerOffConfirmedAt: Time,
    round: z.int().min(1),
    level: z.int().min(0),
    /** "watchdog": no read-back; the node's armed watchdog surely reset it (S1's second proof). */
    driver: z.enum(ATTEMPT_DRIVERS),
    attempts: z.int().min(1),
  })
  .describe("The node's power-off was read back as Off, or its armed watchdog surely reset it (S1).");

export const FenceFailedSchema = z
  .object({
    incident: IncidentName,
    node: NodeName,
    bootId: BootId,
    round: z.int().min(1),
    reason: z.string().min(1),
    code: z.string().min(1),
    attempts: z.array(AttemptSchema),
    final: z.boolean().describe("no more rounds: an operator must act"),
    retryNotBefore: Time.optional(),
  })
  .describe("A fencing round ended without a confirmed power-off; workloads stay where they are.");

export const WorkloadsReleasedSchema = z
  .object({
    incident: IncidentName,
    node: NodeName,
    bootId: BootId,
    taint: z.string(),
    podsDeleted: z.int().min(0),
    volumeAttachmentsDeleted: z.int().min(0),
    /** 0 in an event of an earlier build, whose release deleted VMIs instead (vmisDeleted). */
    vmLaunchersDeleted: z.int().min(0).default(0),
    vmisDeleted: z.int().min(0).optional(),
    powerOffConfirmedAt: Time,
    releasedAt: Time,
  })
  .describe(
    "Out-of-service taint set and the node's pods, VolumeAttachments and VM launcher pods deleted (KubeVirt then restarts the VMs).",
  );

export const NodeRecoveredSchema = z
  .object({
    incident: IncidentName,
    node: NodeName,
    previousBootId: BootId,
    bootId: BootId,
    phase: z.enum(["Recovered", "Closed"]),
    taintRemoved: z.boolean(),
    at: Time,
  })
  .describe("The node is back with a new boot ID (Recovered), or the incident ended unfenced (Closed).");

export const IncidentBlockedSchema = z
  .object({
    incident: IncidentName,
    node: NodeName,
    bootId: BootId,
    /** A guard (StormGuard, ControlPlaneQuorum, NoFencingLevels), an operator's request that expired or was withdrawn, or a hold for planned work (core/planned.ts). */
    reason: z.enum([
      "StormGuard",
      "ControlPlaneQuorum",
      "NoFencingLevels",
      "OperatorRequestExpired",
      "OperatorRequestWithdrawn",
      ...HOLD_REASON_CODES,
    ]),
    message: z.string(),
    count: z.int().min(0),
    limit: z.int().min(0),
  })
  .describe(
    "Fencing refused (storm guard S4, etcd quorum, no levels) or held for planned work (pause, maintenance, planned reboot, upgrade, another remediator); reported for an operator.",
  );

export const FenceObservedSchema = z
  .object({
    incident: IncidentName,
    node: NodeName,
    bootId: BootId,
    round: z.int().min(1),
    /** The level it would have used first (1-based) and how many the node has. */
    level: z.int().min(1),
    levels: z.int().min(1),
    driver: z.enum(ATTEMPT_DRIVERS),
    /** The BMC address of that level (never credentials). */
    address: z.string(),
    message: z.string(),
  })
  .describe("Observe mode: what fence would have done (no power command was sent).");

/** What a consumer writes to fastfence.dead-letter for an event it could not process (S5). */
export const DeadLetterSchema = z
  .object({
    reason: z.string().min(1),
    code: z.string().min(1).describe("FastfenceError code, e.g. FF_INVALID_EVENT"),
    reasonCode: z
      .string()
      .min(1)
      .optional()
      .describe(
        "for an event a stage rejected: its stable reason code (core/reasons.ts), e.g. PowerOffUnproven",
      ),
    issues: z.array(z.string()).optional(),
    consumer: z.string().min(1).describe("function and replica that gave up"),
    topic: z.string().min(1),
    partition: z.int().min(0),
    offset: z.string().min(1).describe("Kafka offset (string: int64)"),
    count: z
      .int()
      .min(2)
      .optional()
      .describe(
        "when several malformed records of one partition share this dead letter: how many (the copy, key, headers, reason and issues are the first one's, at `offset`)",
      ),
    offsets: z
      .string()
      .regex(/^\d+(-\d+)?(,\d+(-\d+)?)*$/)
      .optional()
      .describe(
        "with `count`: the offsets of all of them as ranges, e.g. 100-199,201 (never cut: a longer list is split over several dead letters)",
      ),
    otherReasons: z
      .array(z.object({ reason: z.string().min(1), count: z.int().min(1) }))
      .optional()
      .describe(
        "with `count`: the reasons other than the first one's, each with how many records failed for it, most frequent first",
      ),
    key: z.string().optional(),
    originalBase64: z
      .string()
      .describe("the original message value, base64 (only its first bytes when `truncated`)"),
    originalHeaders: z
      .record(z.string(), z.string())
      .describe("original Kafka headers (values as UTF-8 or base64; long ones cut when `truncated`)"),
    truncated: z
      .boolean()
      .optional()
      .describe(
        "true when the copy was cut so the dead letter fits the topic (infra/runtime/dead-letter.ts): originalBase64 holds the first bytes, long keys, headers, issues and reasons are shortened",
      ),
    originalBytes: z.int().min(0).optional().describe("size of the original value, bytes"),
    originalSha256: z
      .string()
      .optional()
      .describe("SHA-256 of the whole original value (hex), to match a truncated copy to the record"),
    failedAt: Time,
  })
  .describe("A message that could not be processed, with the reason and the original bytes.");

export type NodeObserved = z.infer<typeof NodeObservedSchema>;
export type NodeCondition = z.infer<typeof NodeConditionSchema>;
export type NodeSuspected = z.infer<typeof NodeSuspectedSchema>;
export type FenceRequested = z.infer<typeof FenceRequestedSchema>;
export type NodeFenced = z.infer<typeof NodeFencedSchema>;
export type FenceFailed = z.infer<typeof FenceFailedSchema>;
export type WorkloadsReleased = z.infer<typeof WorkloadsReleasedSchema>;
export type NodeRecovered = z.infer<typeof NodeRecoveredSchema>;
export type IncidentBlocked = z.infer<typeof IncidentBlockedSchema>;
export type FenceObserved = z.infer<typeof FenceObservedSchema>;
export type DeadLetter = z.infer<typeof DeadLetterSchema>;
