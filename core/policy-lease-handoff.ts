// The FencingPolicy's leader hand-off settings (spec.leaseHandoff, issue 46): which
// coordination.k8s.io Leases fence releases for their holder once it has proven the holder's
// node powered off (S1), so a standby leader takes over at its next retry instead of after
// the Lease's whole duration (core/lease-handoff.ts maps holders to nodes). Kept beside
// core/policy.ts, which composes it into the spec schema. Declarations only: no I/O.
import { z } from "zod";

/** At most this many labels per Lease selector (bounds what the API server lists). */
const MAX_MATCH_LABELS = 8;

/** Exactly one of `name` and `matchLabels` (the CRD's rule and the zod refinement). */
export const NAME_OR_LABELS = {
  rule: "has(self.name) != has(self.matchLabels)",
  message: "a Lease entry names one Lease (name) or selects Leases by labels (matchLabels), not both",
};

/**
 * Leases to hand off: one by namespace and name, or every Lease of a namespace that carries
 * all of `matchLabels`. A Lease is released only when its holder maps to the fenced node.
 */
export const LeaseHandoffEntrySchema = z
  .object({
    // The Lease's namespace.
    namespace: z.string().min(1).max(63),
    // The Lease's name (exactly one of name and matchLabels).
    name: z.string().min(1).max(253).optional(),
    // Labels a Lease of the namespace must all carry (exactly one of name and matchLabels;
    // at most 8). Listing needs fence's ServiceAccount to list Leases there (docs/rbac.md).
    matchLabels: z.record(z.string(), z.string()).optional().meta({ maxProperties: MAX_MATCH_LABELS }),
  })
  .refine((e) => (e.name === undefined) !== (e.matchLabels === undefined), {
    message: NAME_OR_LABELS.message,
  })
  .refine((e) => Object.keys(e.matchLabels ?? {}).length <= MAX_MATCH_LABELS, {
    path: ["matchLabels"],
    message: `at most ${MAX_MATCH_LABELS} labels`,
  })
  .meta({ "x-kubernetes-validations": [NAME_OR_LABELS] });
export type LeaseHandoffEntry = z.infer<typeof LeaseHandoffEntrySchema>;

/**
 * The Leases of the components that hold back a VM's or a pod's return after a node died:
 * the controller manager, the scheduler (upstream and OpenShift's), and KubeVirt's
 * virt-controller and virt-operator (namespace `kubevirt` upstream, `openshift-cnv` in
 * OpenShift Virtualization). A Lease that does not exist is skipped.
 */
export const DEFAULT_HANDOFF_LEASES: LeaseHandoffEntry[] = [
  { namespace: "kube-system", name: "kube-controller-manager" },
  { namespace: "kube-system", name: "kube-scheduler" },
  { namespace: "openshift-kube-scheduler", name: "kube-scheduler" },
  { namespace: "kubevirt", name: "virt-controller" },
  { namespace: "kubevirt", name: "virt-operator" },
  { namespace: "openshift-cnv", name: "virt-controller" },
  { namespace: "openshift-cnv", name: "virt-operator" },
];

export const LeaseHandoffSettingsSchema = z
  .object({
    // Hand off the Leases below once a node's power-off is proven. Default true. Off: a
    // dead leader's Lease runs out its duration (plus a standby's retry period, up to
    // 1.2× jittered) before a standby leads: about 15–20 s for the controller manager,
    // 137–170 s for OpenShift's scheduler. On: fence writes each such Lease once per
    // fenced node; a Lease whose holder it cannot map to the node is left alone.
    enabled: z.boolean().default(true),
    // The Leases fence may hand off (default: the controller manager, the schedulers,
    // KubeVirt's virt-controller and virt-operator). A list of your own replaces it; to add
    // to it, use additionalLeases. At most 32 entries.
    leases: z.array(LeaseHandoffEntrySchema).max(32).default(DEFAULT_HANDOFF_LEASES),
    // Your own components' Leases, handed off as well as `leases`. Default none. At most 32
    // entries. Only Leases whose holders use client-go's identity forms (`<hostname>_<uuid>`
    // of a host-network component on the node, or the name of a pod bound to the node)
    // are ever released; fence's ServiceAccount needs get/list/update on Leases in their
    // namespace (docs/rbac.md).
    additionalLeases: z.array(LeaseHandoffEntrySchema).max(32).default([]),
  })
  .prefault({});
export type LeaseHandoffSettings = z.infer<typeof LeaseHandoffSettingsSchema>;
