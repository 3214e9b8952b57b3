// The fencing policy (cluster-scoped FencingPolicy custom resource, `spec`): every knob
// of detection, corroboration, the storm guard, the control-plane rule, fencing levels,
// remediation and timeouts, with its unit, default and trade-off documented beside it
// (hashicorp/memberlist style). The zod schema is the single source of truth: parsing a
// partial spec fills the defaults, and the CRD in knative/base/crds must use the same
// field names (a unit test compares them). Cross-field rules (the timeout chain: BMC call
// < level ≤ round < round + margin < Lease) are written once as CEL for the CRD and once
// as a zod refinement, with the same messages (core/timeout-chain.ts). Pure: no I/O, never
// reads the clock.
import { z } from "zod";
import { insecureLevelProblem } from "./level-security.ts";
import {
  LEVELS_IN_CHAIN,
  MAX_POWER_OFF_TIMEOUT_MS,
  TIMEOUT_RULES,
  levelInChain,
  timeoutChainIssues,
} from "./timeout-chain.ts";
import { PlannedWorkSettingsSchema, POLICY_MODES } from "./policy-planned.ts";
import { LookAfterSettingsSchema } from "./policy-look-after.ts";
import { LeaseHandoffSettingsSchema } from "./policy-lease-handoff.ts";
import { entryForNode, LEVELS_OR_WATCHDOG, WatchdogLevelSchema } from "./policy-watchdog.ts";

export { watchdogForNode, type WatchdogLevel } from "./policy-watchdog.ts";
export { PlannedWorkSettingsSchema, POLICY_MODES, type PolicyMode } from "./policy-planned.ts";
export { MAX_POWER_OFF_TIMEOUT_MS, ROUND_RECORD_MARGIN_MS, roundDeadline } from "./timeout-chain.ts";

/** Probe settings for the event source (observer replicas). */
export const ProbeSettingsSchema = z
  .object({
    // How often each observer probes each node it watches. Unit: ms. Default 200.
    // Lower detects faster but costs more connections per second (linear in nodes).
    intervalMs: z.int().min(20).max(60_000).default(200),
    // Deadline of one probe (connect and answer). Unit: ms. Default 250. Too low reports
    // misses for healthy nodes on a loaded network; quorum absorbs single observers.
    timeoutMs: z.int().min(10).max(60_000).default(250),
    // Port probed on the node (the kubelet's). Default 10250. Its process must answer an HTTP
    // request line or close; a connect alone is no answer (a frozen node's kernel accepts).
    port: z.int().min(1).max(65_535).default(10_250),
    // How many observer replicas (on other nodes) probe each node: its k successors on
    // a ring of node names. Default 2; must be >= corroboration.quorum or nothing confirms.
    observersPerNode: z.int().min(2).max(16).default(2),
    // How often each event-source replica renews its own node's heartbeat Lease
    // (fastfence-alive-<node>) through the API server. Unit: ms. Default 250. It lets
    // confirm tell a node its peers cannot reach (partition) from a dead one: lower makes
    // that distinction quicker; each node costs 1000/interval API writes per second.
    heartbeatIntervalMs: z.int().min(50).max(60_000).default(250),
  })
  .prefault({});

/** When one observer's view turns into a suspicion (detect stage). */
export const SuspicionSettingsSchema = z
  .object({
    // Consecutive missed probes from one observer before it suspects the node. Unit:
    // probes. Default 3. Lower is faster and noisier; corroboration absorbs the noise.
    missThreshold: z.int().min(1).max(1000).default(3),
    // Minimum time between the first miss and the suspicion. Unit: ms. Default 400.
    // Guards against a burst of misses from one stalled observer event loop.
    minSuspectMs: z.int().min(0).max(600_000).default(400),
    // After the threshold, re-emit the suspicion every N further misses, so a lost event
    // or an expired evidence window is healed. Unit: probes. Default 5.
    repeatEvery: z.int().min(1).max(10_000).default(5),
    // A node whose kubelet Lease was not renewed for this long is suspected (by the
    // informer observer). Unit: ms. Default 40000 (kubelet renews every 10 s).
    leaseStaleMs: z.int().min(1_000).max(3_600_000).default(40_000),
    // Observations older than this (event time vs. now) never create a suspicion: a late,
    // replayed event must not start an incident. Unit: ms. Default 10000.
    maxEventAgeMs: z.int().min(100).max(3_600_000).default(10_000),
    // Whether a node's Ready=False/Unknown condition (set by the node lifecycle controller)
    // counts as one independent observer. Default true. It is slow (40-50 s) but independent.
    countNodeCondition: z.boolean().default(true),
    // Never confirm a node that an observer saw renew its heartbeat Lease after that
    // observer's miss streak began (both times on the observer's own clock): it still
    // reaches the API server, so it is partitioned from its peers, not dead. While on,
    // evidence from an observer whose heartbeat watch was not synced does not count.
    // Default true. Off only if nodes' event sources cannot reach the API.
    heartbeatVeto: z.boolean().default(true),
  })
  .prefault({});

/** How suspicions become a confirmed incident (confirm stage, S2). */
export const CorroborationSettingsSchema = z
  .object({
    // Distinct independent observers (by observer node, never the suspected node itself)
    // needed to confirm. Default 2; minimum 2 (S2: one broken observer fences nobody).
    quorum: z.int().min(2).max(16).default(2),
    // Evidence counts only if it is at most this old when confirming. Unit: ms. Default
    // 5000. Longer tolerates slow observers; shorter refuses to combine stale views.
    evidenceWindowMs: z.int().min(100).max(600_000).default(5_000),
    // How far an input's timestamps (an observation's at, firstMissAt, heartbeatSeenAt,
    // heartbeatRenewedBy, the envelope time) and an observer's heartbeat renewal may lie
    // ahead of the receiver's clock. Later input is refused (FutureTimestamp) to the
    // dead-letter topic. Unit: ms.
    // Default 2000. Larger tolerates badly synchronised clocks; smaller narrows how far a
    // forger can stretch evidence into the future (evidence stays fresh that much longer).
    maxClockSkewMs: z.int().min(0).max(60_000).default(2_000),
  })
  .prefault({});

/** S4: refuse automatic fencing when too many nodes look dead at once. */
export const StormGuardSettingsSchema = z
  .object({
    // Nodes that may be in a fencing incident (Confirmed .. Released, Blocked, FenceFailed)
    // at the same time, this one included. Default 1. Higher recovers more from multiple
    // failures; lower protects against a partition that makes many healthy nodes look dead.
    maxConcurrentFenced: z.int().min(0).max(1000).default(1),
    // The same limit as a fraction of all nodes (the stricter one wins). Default 0.5.
    maxFraction: z.number().min(0).max(1).default(0.5),
  })
  .prefault({});

/** Default of controlPlane.roleLabels: the well-known control-plane role labels. */
const CONTROL_PLANE_ROLE_LABELS = ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"];

/** Never fence a control-plane node if that would cost etcd its quorum. */
export const ControlPlaneSettingsSchema = z
  .object({
    // Refuse to fence a control-plane node when the control-plane nodes left (not fenced,
    // not in an incident, Ready) would be fewer than a majority. Default true.
    protectEtcdQuorum: z.boolean().default(true),
    // Node labels that mark control-plane (etcd) nodes for the rule above: a node carrying
    // any of them, with any value, is one. Default the well-known
    // node-role.kubernetes.io/control-plane and node-role.kubernetes.io/master (older
    // clusters and OpenShift set the latter). A list of your own replaces the default.
    roleLabels: z.array(z.string().min(1)).min(1).default(CONTROL_PLANE_ROLE_LABELS),
  })
  .prefault({});

/** At most this many levels per node entry (bounds the cost of the CRD's level-timeout rule). */
const MAX_LEVELS = 8;

export const FENCING_DRIVERS = ["redfish", "ipmi", "fence-agent"] as const;
export type FencingDriver = (typeof FENCING_DRIVERS)[number];

/** One way to power a node off: tried in order, the next one is the escalation. */
export const FencingLevelSchema = z
  .object({
    driver: z.enum(FENCING_DRIVERS),
    // BMC address, e.g. "redfish+https://10.0.0.5/redfish/v1/Systems/1" or "ipmi://10.0.0.5:623".
    address: z.string().min(1),
    // Name of a Secret (in the fastfence namespace) with `username` and `password`.
    credentialsSecret: z.string().min(1),
    // Time for this level: getting the BMC ready (Redfish discovery and login, when not done
    // yet), the off command and the read-back until Off. Unit: ms. Default 20000. Must be
    // above timeouts.bmcCallTimeoutMs and at most timeouts.powerOffTimeoutMs; a level that
    // starts late in a round gets only what is left of the round. Longer lets a slow BMC
    // (a cold Redfish session is about 5 requests) finish; shorter escalates to the next
    // level sooner when this one hangs.
    timeoutMs: z.int().min(100).max(MAX_POWER_OFF_TIMEOUT_MS).default(20_000),
    // Driver options (e.g. fence agent name, cipher suite "3", insecure "true": no certificate checks).
    options: z.record(z.string(), z.string()).optional(),
    // Allow this level to reach its BMC insecurely: a plain-HTTP address (redfish+http://) or
    // options.insecure "true". Without it such a level is refused. Logged, exported
    // (fastfence_bmc_insecure) and shown by `fastfence bmc check` as insecure.
    insecure: z.boolean().optional(),
  })
  .superRefine((level, ctx) => {
    const problem = insecureLevelProblem(level, "this fencing level");
    if (problem) ctx.addIssue({ code: "custom", path: ["insecure"], message: problem });
  });
export type FencingLevel = z.infer<typeof FencingLevelSchema>;

/**
 * The only label prefix a fencing level may be selected by: the NodeRestriction admission
 * plugin forbids a kubelet to set labels under it on its own Node, so root on a node cannot
 * relabel itself into another node's levels (issue 13). Any other label is refused.
 */
export const TRUSTED_NODE_LABEL_PREFIX = "node-restriction.kubernetes.io/";

/** At most this many labels per selector (bounds the CRD's CEL rule cost for the API server). */
const MAX_MATCH_LABELS = 16;

const MatchLabelsSchema = z
  .record(z.string(), z.string())
  .superRefine((labels, ctx) => {
    if (Object.keys(labels).length > MAX_MATCH_LABELS)
      ctx.addIssue({ code: "custom", message: `at most ${MAX_MATCH_LABELS} labels` });
    for (const key of Object.keys(labels))
      if (!key.startsWith(TRUSTED_NODE_LABEL_PREFIX))
        ctx.addIssue({
          code: "custom",
          path: [key],
          message: `label ${key} is not under ${TRUSTED_NODE_LABEL_PREFIX}: a kubelet can set it on its own Node`,
        });
  })
  .meta({
    maxProperties: MAX_MATCH_LABELS,
    description: `Labels the node must carry (all of them, at most ${MAX_MATCH_LABELS}). Only keys under ${TRUSTED_NODE_LABEL_PREFIX} (labels a kubelet cannot set on its own Node; NodeRestriction admission): other labels are refused.`,
    "x-kubernetes-validations": [
      {
        rule: `self.all(k, k.startsWith('${TRUSTED_NODE_LABEL_PREFIX}'))`,
        message: `only labels under ${TRUSTED_NODE_LABEL_PREFIX} may select fencing levels (a kubelet cannot set those on its own Node)`,
      },
    ],
  });

/**
 * Levels for the nodes a selector matches: by name, or by labels (all must match), and
 * only labels a kubelet cannot set on itself (TRUSTED_NODE_LABEL_PREFIX).
 */
export const NodeFencingSchema = z
  .object({
    nodeSelector: z.object({
      names: z.array(z.string().min(1)).optional(),
      matchLabels: MatchLabelsSchema.optional(),
    }),
    // BMC levels, tried in order; may be empty only when `watchdog` is set.
    levels: z.array(FencingLevelSchema).max(MAX_LEVELS),
    // The watchdog level, after the BMC levels (core/policy-watchdog.ts). Default: none.
    watchdog: WatchdogLevelSchema.optional(),
  })
  .refine((e) => e.levels.length > 0 || e.watchdog !== undefined, { message: LEVELS_OR_WATCHDOG.message })
  .meta({ "x-kubernetes-validations": [LEVELS_OR_WATCHDOG] });
export type NodeFencing = z.infer<typeof NodeFencingSchema>;

/** Sources of fencing levels besides the policy's own entries. */
export const FENCING_DISCOVERY = ["None", "Metal3"] as const;
export type FencingDiscovery = (typeof FENCING_DISCOVERY)[number];

/**
 * A level the adapter found by discovery (never written in a policy, so a policy cannot
 * point at Secrets outside the fastfence namespace): its credentials Secret lives in the
 * BareMetalHost's namespace, and that host carries the power-off hold while fenced.
 */
export interface DiscoveredFrom {
  kind: "BareMetalHost";
  namespace: string;
  name: string;
}

/** A policy level, or a discovered one (with `discovered` set). */
export type ResolvedFencingLevel = FencingLevel & { discovered?: DiscoveredFrom };

export const FencingSettingsSchema = z
  .object({
    // First matching entry wins. A node that no entry matches cannot be fenced (blocked),
    // unless `discovery` below finds its BMC. At most 2000 entries (bounds the cost of the
    // CRD's matchLabels rule, which the API server estimates per entry).
    nodes: z.array(NodeFencingSchema).max(2000).default([]),
    // Rounds over all levels before giving up (fence.failed final). Default 3.
    maxRounds: z.int().min(1).max(100).default(3),
    // Wait between rounds. Unit: ms. Default 2000.
    retryBackoffMs: z.int().min(0).max(600_000).default(2_000),
    // Where levels come from for a node that no entry above matches. "None" (default):
    // such a node is not fenced. "Metal3": its metal3 BareMetalHost (found through the
    // Machine whose status.nodeRef names the node, never the node's own fields) gives one
    // level: spec.bmc.address, the credentials Secret in the host's namespace, and
    // disableCertificateVerification; the host is annotated reboot.metal3.io/fastfence-<incident>
    // while the incident is open so the Bare Metal Operator keeps it off. Trade-off: no
    // per-node policy to write, but fastfence then needs to read BareMetalHosts and the
    // Secrets they name in other namespaces, and trusts whoever may edit those hosts.
    discovery: z.enum(FENCING_DISCOVERY).default("None"),
    // How long an operator's request (`fastfence fence NODE`, NodeFence
    // spec.operatorRequest) stands: confirm confirms it only within this long of its `at`
    // (plus corroboration.maxClockSkewMs); after that it is refused (Blocked,
    // OperatorRequestExpired) and fence no longer lets it stand in for the observers. A
    // request confirmed in time keeps its retry rounds. Unit: ms. Default 600000 (10 min).
    // Trade-off: longer lets a request wait out a storm guard or a pause for longer, but a
    // request made for a reason that has since passed can still fence the node hours later;
    // shorter means asking again after a long block.
    operatorRequestMaxAgeMs: z.int().min(10_000).max(86_400_000).default(600_000),
  })
  .prefault({});

export const REMEDIATION_STRATEGIES = ["OutOfServiceTaint"] as const;

export const RemediationSettingsSchema = z
  .object({
    // How workloads are released after a confirmed power-off. Only OutOfServiceTaint:
    // node.kubernetes.io/out-of-service=nodeshutdown:NoExecute plus explicit deletes.
    strategy: z.enum(REMEDIATION_STRATEGIES).default("OutOfServiceTaint"),
    // Force-delete the node's pods (grace period 0) instead of waiting for pod GC.
    deletePods: z.boolean().default(true),
    // Delete the node's VolumeAttachments so RWO volumes attach elsewhere at once.
    deleteVolumeAttachments: z.boolean().default(true),
    // Release the node's KubeVirt VMs: force-delete their virt-launcher pods (never the
    // VMIs); KubeVirt fails the VMIs and restarts the VMs elsewhere (docs/safety.md). The
    // name is kept from when the release deleted VMIs. The launcher pods also go with the
    // node's other pods when pod deletes are on; this switch releases them on their own.
    deleteVirtualMachineInstances: z.boolean().default(true),
  })
  .prefault({});

export const TimeoutSettingsSchema = z
  .object({
    // One BMC call: one power-state read or the off command (infra/bmc/driver.ts).
    // Unit: ms. Default 5000. Must be below every level's timeoutMs. Longer waits out a
    // slow BMC (many answer 2-3 s late); shorter reads again sooner after a lost answer.
    bmcCallTimeoutMs: z.int().min(100).max(120_000).default(5_000),
    // One fencing round: every level, in order, until one reads back Off. Unit: ms.
    // Default 30000. Every level's timeoutMs must fit in it; a level that would start after
    // it is not started. At most 240000, so leaseDurationMs (at most 600000) can cover a
    // round with its margin; fence consumes Kafka, so no Knative timeout cuts it. Longer
    // gives several slow levels their full time; shorter fails over to the next round (and
    // its retryBackoffMs) sooner.
    powerOffTimeoutMs: z.int().min(1_000).max(MAX_POWER_OFF_TIMEOUT_MS).default(30_000),
    // Per-node fencing Lease duration (S3: one driver per node): taken before a round and
    // not renewed during it, so it must exceed powerOffTimeoutMs plus the fixed recording
    // margin of 5000 ms (the status writes before and after the round).
    // Unit: ms. Default 40000. Longer is never unsafe, but a replica that crashed while
    // driving a round delays the takeover by up to this; too short would let a second
    // driver start while the first still runs, and is refused.
    leaseDurationMs: z.int().min(1_000).max(600_000).default(40_000),
  })
  .superRefine((t, ctx) => {
    for (const issue of timeoutChainIssues(t)) ctx.addIssue({ code: "custom", ...issue });
  })
  .meta({ "x-kubernetes-validations": TIMEOUT_RULES })
  .prefault({});

/**
 * Level-triggered progress: every replica of a stage that owns an incident phase
 * re-reads the open incidents and re-drives those that made no progress (infra/runtime/
 * reconciler.ts), so a lost event, a crashed driver or an interrupted round never leaves
 * an incident stuck. Re-driving is always safe: guarded writes and the per-node Lease
 * decide who acts; these settings only trade API reads against how long a stall lasts.
 */
export const ReconcileSettingsSchema = z
  .object({
    // How often each replica lists the open NodeFences and re-drives stalled ones. Unit:
    // ms. Default 5000, jittered by ±20 % per replica. Shorter ends a stall sooner; each
    // replica of fence and remediate-workloads lists NodeFences once per interval.
    intervalMs: z.int().min(500).max(300_000).default(5_000),
    // An incident is stalled when its phase's next step was due this long ago and nothing
    // happened: Confirmed this long without a driver, FenceFailed this long past
    // retryNotBefore, FencedOff this long unreleased. Unit: ms. Default 3000. Shorter takes
    // over sooner from a slow event path (duplicate work, never unsafe); longer leaves
    // more room to the events, which normally arrive within a second.
    stalledAfterMs: z.int().min(0).max(600_000).default(3_000),
  })
  .prefault({});

export const FencingPolicySpecSchema = z
  .object({
    // Enforce (default) fences. Observe runs the whole pipeline and records each incident,
    // but fence stops short of the power command and closes the incident with reason
    // Observed, saying which level it would have used: run a cluster in Observe for weeks
    // before trusting fastfence to power nodes off.
    mode: z.enum(POLICY_MODES).default("Enforce"),
    // Cluster-wide pause (`fastfence pause`): no incident is confirmed or fenced while
    // true; incidents say FencingPaused. Rounds already sending a power command finish.
    paused: z.boolean().default(false),
    // Why fencing is paused (shown in every held incident's message). At most 1024 chars.
    pausedReason: z.string().max(1024).optional(),
    plannedWork: PlannedWorkSettingsSchema,
    probe: ProbeSettingsSchema,
    suspicion: SuspicionSettingsSchema,
    corroboration: CorroborationSettingsSchema,
    stormGuard: StormGuardSettingsSchema,
    controlPlane: ControlPlaneSettingsSchema,
    fencing: FencingSettingsSchema,
    remediation: RemediationSettingsSchema,
    // Power a fenced node back on once its workloads are released. Default false: a node
    // that died for a reason stays off until someone looks at it.
    powerOnAfterFence: z.boolean().default(false),
    timeouts: TimeoutSettingsSchema,
    reconcile: ReconcileSettingsSchema,
    lookAfter: LookAfterSettingsSchema,
    leaseHandoff: LeaseHandoffSettingsSchema,
  })
  .superRefine((spec, ctx) => {
    const t = spec.timeouts;
    spec.fencing.nodes.forEach((n, i) =>
      n.levels.forEach((l, j) => {
        if (!levelInChain(l.timeoutMs, t))
          ctx.addIssue({
            code: "custom",
            path: ["fencing", "nodes", i, "levels", j, "timeoutMs"],
            message: LEVELS_IN_CHAIN.message,
          });
      }),
    );
  })
  .meta({ "x-kubernetes-validations": [LEVELS_IN_CHAIN] });

export type FencingPolicySpec = z.infer<typeof FencingPolicySpecSchema>;
/** What a user writes: every field optional. */
export type FencingPolicySpecInput = z.input<typeof FencingPolicySpecSchema>;

export const FENCING_POLICY_GROUP = "fastfence.io";
export const FENCING_POLICY_VERSION = "v1alpha1";
export const FENCING_POLICY_KIND = "FencingPolicy";

/** A complete policy from a partial spec (throws ZodError on invalid input). */
export function resolvePolicy(spec: unknown = {}): FencingPolicySpec {
  return FencingPolicySpecSchema.parse(spec ?? {});
}

/** The policy with every default. */
export const DEFAULT_POLICY: FencingPolicySpec = resolvePolicy({});

/** The fencing levels for a node: first matching entry, or undefined when none matches. */
export function levelsForNode(
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> },
): FencingLevel[] | undefined {
  return entryForNode(policy, node)?.levels;
}
