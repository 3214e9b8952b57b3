// Leader hand-off, the pure part (issue 46): once fence has proven a node powered off (S1),
// every process of that node is dead, so a coordination.k8s.io Lease one of them held can be
// released at once. This module says which Lease holder runs on which node (from the way
// client-go identities are formed), whether one Lease may be released, what the release
// writes (what client-go's own ReleaseOnCancel writes), and the facts the admission policy
// knative/base/admission/lease-handoff-policy.yaml checks on that write. It must never
// release a Lease whose holder it cannot place on the fenced node, nor one renewed after the
// power-off was proven. Pure: no I/O, never reads the clock.
import { z } from "zod";
import type { LeaseHandoffEntry, LeaseHandoffSettings } from "./policy-lease-handoff.ts";

/** On a released Lease: the node whose power-off made the release safe. */
export const HANDOFF_NODE_ANNOTATION = "fastfence.io/handed-off-node";
/** On a released Lease: the incident that proved the power-off. */
export const HANDOFF_INCIDENT_ANNOTATION = "fastfence.io/handed-off-incident";
/** On a released Lease: the holder identity the release cleared. */
export const HANDOFF_HOLDER_ANNOTATION = "fastfence.io/handed-off-holder";

/**
 * The FencedNodeSet (fastfence namespace) listing fenced nodes, the admission policy's
 * param: spec.nodes[<node>] = { incident, provenAt }. Only fence writes it. A custom
 * resource, not a ConfigMap: a kube-apiserver before the fix of kubernetes/kubernetes#130887
 * freezes its cache of a built-in param kind for good once no binding uses that kind (an
 * uninstall and install again), and then judges releases against the old list.
 */
export const FENCED_NODES = {
  group: "fastfence.io",
  version: "v1alpha1",
  kind: "FencedNodeSet",
  plural: "fencednodesets",
  name: "fastfence-fenced-nodes",
} as const;

/** One fenced node's entry: the incident that proved its power-off, and when (RFC 3339). */
export const FencedNodeEntrySchema = z.object({
  incident: z.string().min(1).max(253).describe("The NodeFence incident that proved the power-off."),
  provenAt: z.iso.datetime({ offset: true }).describe("When the power-off was proven (RFC 3339)."),
});
export type FencedNodeEntry = z.infer<typeof FencedNodeEntrySchema>;

/** FencedNodeSet spec: the nodes fence has proven powered off, by node name (latest proof). */
export const FencedNodeSetSpecSchema = z.object({
  nodes: z
    .record(z.string().min(1).max(253), FencedNodeEntrySchema)
    .default({})
    .meta({ maxProperties: 10000 })
    .describe(
      "Fenced nodes by name; written by fence only (admission policy fastfence-fenced-nodes-writers).",
    ),
});

/** What fence must do after a proven power-off: the Leases to look at, and the proof. */
export interface HandoffPlan {
  node: string;
  incident: string;
  /** When the power-off was proven (RFC 3339: the read-back Off, or the watchdog verdict). */
  provenAt: string;
  leases: LeaseHandoffEntry[];
}

/** One Lease as read (coordination.k8s.io/v1), the fields the hand-off decides on. */
export interface LeaseRead {
  namespace: string;
  name: string;
  resourceVersion: string;
  holder?: string;
  /** RFC 3339 (renewTime, the holder's clock). */
  renewTime?: string;
}

/** How a holder identity places its process, by the form client-go components give it. */
export type HolderForm =
  /** `<hostname>_<uuid>`: client-go leader election of a host-network component (kube-controller-manager, kube-scheduler). */
  | { kind: "host"; host: string }
  /** A pod name (no `_` can occur in one): a component that uses its pod's hostname (KubeVirt's virt-controller, virt-operator). */
  | { kind: "pod"; pod: string };

/** The form of a holder identity; undefined when it is empty. */
export function holderForm(holder: string | undefined): HolderForm | undefined {
  if (!holder) return undefined;
  const i = holder.indexOf("_");
  return i >= 0 ? { kind: "host", host: holder.slice(0, i) } : { kind: "pod", pod: holder };
}

export type SkipCode = "NoHolder" | "OtherNode" | "Unmapped" | "RenewedAfterProof";

export type Verdict = { release: true } | { release: false; code: SkipCode; reason: string };

export interface JudgeInput {
  lease: LeaseRead;
  /** The fenced node. */
  node: string;
  provenAt: string;
  /**
   * For a pod-form holder: the node the pod is bound to (its spec.nodeName), "" when the
   * pod is not bound, null when there is no such pod in the Lease's namespace.
   */
  podNode?: string | null;
}

/**
 * Whether one Lease may be released for the fenced node: its holder runs on that node (a
 * `<hostname>_<uuid>` holder whose hostname is the node's name, or a pod bound to the node)
 * and it was last renewed before the power-off was proven (a renewal after it came from a
 * live process, whatever the identity says).
 */
export function judge(j: JudgeInput): Verdict {
  const { lease, node } = j;
  const id = `${lease.namespace}/${lease.name}`;
  const form = holderForm(lease.holder);
  if (!form) return { release: false, code: "NoHolder", reason: `${id} has no holder` };
  if (form.kind === "host" && form.host !== node)
    return { release: false, code: "OtherNode", reason: `${id} is held from host ${form.host}, not ${node}` };
  if (form.kind === "pod") {
    if (j.podNode === undefined || j.podNode === null || j.podNode === "")
      return {
        release: false,
        code: "Unmapped",
        reason: `${id} is held by ${form.pod}, which is no pod bound to a node in ${lease.namespace}`,
      };
    if (j.podNode !== node)
      return {
        release: false,
        code: "OtherNode",
        reason: `${id} is held by pod ${form.pod} on ${j.podNode}`,
      };
  }
  const renewed = Date.parse(lease.renewTime ?? "");
  const proven = Date.parse(j.provenAt);
  if (!Number.isFinite(renewed) || !Number.isFinite(proven) || renewed >= proven)
    return {
      release: false,
      code: "RenewedAfterProof",
      reason: `${id} was renewed at ${lease.renewTime ?? "(never)"}, not before ${node}'s power-off was proven at ${j.provenAt}`,
    };
  return { release: true };
}

/** What the release writes: client-go's release (holder cleared, 1 s, both times now). */
export interface ReleaseWrite {
  annotations: Record<string, string>;
  /** Cleared holder; leaseDurationSeconds 1; acquireTime = renewTime = now (never backdated). */
  spec: { leaseDurationSeconds: 1; acquireTime: string; renewTime: string };
}

/** The release of `lease` for the plan, at `nowIso` (fence's clock, RFC 3339 with microseconds). */
export function releaseWrite(plan: HandoffPlan, lease: LeaseRead, nowIso: string): ReleaseWrite {
  return {
    annotations: {
      [HANDOFF_NODE_ANNOTATION]: plan.node,
      [HANDOFF_INCIDENT_ANNOTATION]: plan.incident,
      [HANDOFF_HOLDER_ANNOTATION]: lease.holder ?? "",
    },
    spec: { leaseDurationSeconds: 1, acquireTime: nowIso, renewTime: nowIso },
  };
}

/** The fenced-nodes entry for a proven power-off. */
export function fencedNodeEntry(incident: string, provenAt: string): FencedNodeEntry {
  return { incident, provenAt };
}

/** The Leases the policy hands off (none when turned off). */
export function handoffEntries(s: LeaseHandoffSettings): LeaseHandoffEntry[] {
  return s.enabled ? [...s.leases, ...s.additionalLeases] : [];
}

/** The plan fence returns after a proven power-off; undefined when nothing is to be handed off. */
export function handoffPlan(
  s: LeaseHandoffSettings,
  incident: string,
  node: string,
  provenAt: string | undefined,
): HandoffPlan | undefined {
  const leases = handoffEntries(s);
  if (!leases.length || !provenAt) return undefined;
  return { node, incident, provenAt, leases };
}

/** What happened to one Lease (the result fed back to fence's decide, the Events, the trace). */
export interface LeaseOutcome {
  namespace: string;
  name: string;
  holder?: string;
  outcome: "released" | "skipped" | "failed";
  /** Skipped: the SkipCode; failed: "Conflict" (renewed each time), "Refused" or "Error". */
  code?: string;
  reason?: string;
}

/** What the handOffLeases action produced, fed back into fence's decide (core/decision.ts contract 4). */
export interface HandoffResult {
  kind: "leasesHandedOff";
  node: string;
  incident: string;
  results: LeaseOutcome[];
}

/** A one-line summary of the outcomes, for logs and the decision's detail. */
export function summarize(node: string, results: readonly LeaseOutcome[]): string {
  const by = (o: LeaseOutcome["outcome"]) => results.filter((r) => r.outcome === o);
  const names = (rs: LeaseOutcome[]) => rs.map((r) => `${r.namespace}/${r.name}`).join(", ");
  const released = by("released");
  const failed = by("failed");
  return (
    `lease hand-off for ${node}: ${released.length ? `released ${names(released)}` : "nothing released"}` +
    `${failed.length ? `; failed ${names(failed)}` : ""}; ${by("skipped").length} left alone`
  );
}
