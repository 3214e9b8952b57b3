// The lab's access control as shipped: the Namespaces, ServiceAccounts, RBAC and
// ValidatingAdmissionPolicies of the rendered openshift overlay (the real kustomize),
// applied to the lab's API server before any fastfence process starts, and the hash of that
// render so a report can say which manifests its numbers ran under. It applies nothing
// else of the render (no Services, Kafka objects or Knative resources: the lab runs those
// its own way) and never changes a rendered object.
import { createHash } from "node:crypto";
import { join, relative } from "node:path";
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import { KubernetesObjectApi } from "@kubernetes/client-node";
import { waitAdmissionInForce } from "../harness/env/admission-ready.ts";
import { ROOT } from "./state.ts";
import { KNATIVE_DIR, buildYaml, groupOf, parseYamlDocs, type KubeObject } from "../harness/kustomize.ts";

/** The overlay whose identities and policies the lab runs under: the customer's platform. */
export const ACCESS_OVERLAY = join(KNATIVE_DIR, "overlays/openshift");

/**
 * What of the render is access control (group/kind), applied in this order: with the
 * identities and their rules, the objects the install creates for the rules to guard (the
 * admission ledger Lease, the fenced-nodes FencedNodeSet a policy reads as its param; its
 * CRD is applied before, with fastfence's others).
 */
export const ACCESS_KINDS: readonly string[] = [
  "/Namespace",
  "/ServiceAccount",
  "/ConfigMap",
  "coordination.k8s.io/Lease",
  "fastfence.io/FencedNodeSet",
  "rbac.authorization.k8s.io/ClusterRole",
  "rbac.authorization.k8s.io/ClusterRoleBinding",
  "rbac.authorization.k8s.io/Role",
  "rbac.authorization.k8s.io/RoleBinding",
  "admissionregistration.k8s.io/ValidatingAdmissionPolicy",
  "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding",
];

export interface ShippedAccess {
  /** The access-control objects of the render, in ACCESS_KINDS order. */
  objects: KubeObject[];
  /** sha256 (first 16 hex) of the whole rendered overlay's YAML. */
  renderHash: string;
  overlay: string;
}

/** The access-control objects of a rendered overlay (default: ACCESS_OVERLAY) and its hash. */
export function shippedAccess(overlay = ACCESS_OVERLAY): ShippedAccess {
  const yaml = buildYaml(overlay);
  const all = parseYamlDocs(yaml, overlay) as KubeObject[];
  const key = (o: KubeObject) => `${groupOf(o.apiVersion)}/${o.kind}`;
  const objects = ACCESS_KINDS.flatMap((k) => all.filter((o) => key(o) === k));
  const renderHash = createHash("sha256").update(yaml).digest("hex").slice(0, 16);
  return { objects, renderHash, overlay };
}

/**
 * Apply the shipped access control to the lab's API server (objects that already exist,
 * such as the fastfence namespace the lab seeds first, are left as they are) and wait until
 * the admission policies are in force. Returns what was applied.
 */
export async function applyShippedAccess(kc: KubeConfig, access = shippedAccess()): Promise<ShippedAccess> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  // Namespaces the render's objects live in but does not create (e.g. openshift-machine-api,
  // which OpenShift has): made here, as the platform would have them.
  const named = new Set(access.objects.filter((o) => o.kind === "Namespace").map((o) => o.metadata.name));
  const used = [
    ...new Set(access.objects.map((o) => o.metadata.namespace).filter((n) => n && !named.has(n))),
  ];
  const namespaces = used.map((name) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } }));
  for (const o of [...namespaces, ...access.objects]) {
    try {
      await api.create(o as KubernetesObject);
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
    }
  }
  await waitAdmissionInForce(kc);
  return access;
}

/**
 * The lab's step: apply the shipped access control, log it, and return what the lab state
 * records (the overlay, relative to the checkout, and its render's hash).
 */
export async function applyLabAccess(
  kc: KubeConfig,
  log: (line: string) => void,
): Promise<{ overlay: string; renderHash: string }> {
  const access = await applyShippedAccess(kc);
  const overlay = relative(ROOT, access.overlay);
  log(`access control: ${access.objects.length} objects of ${overlay} (render ${access.renderHash})`);
  return { overlay, renderHash: access.renderHash };
}

/** The report's line naming the identities and policies a lab ran under. */
export function accessLine(a: { overlay: string; renderHash: string } | undefined): string {
  return a
    ? `Every fastfence process ran as its ServiceAccount under the RBAC and admission policies of ${a.overlay} (render sha256:${a.renderHash}…).`
    : "Ran with no shipped access control recorded (a lab from before lab/shipped-access.ts).";
}
