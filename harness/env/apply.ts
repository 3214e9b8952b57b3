// Applies YAML manifests (multi-document files or folders) to a harness API server with
// @kubernetes/client-node's generic object API (typed YAML loading, so
// x-kubernetes-* schema fields survive serialisation), and waits for CRDs to be Established
// and admission policies to be in force.
// Test infrastructure; it never talks to any server but the test one.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  ApiextensionsV1Api,
  KubernetesObjectApi,
  loadAllYaml,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { waitAdmissionInForce } from "./admission-ready.ts";
import { ROOT, THIRD_PARTY_CRDS, sleep } from "./base.ts";
import { FASTFENCE_NAMESPACE } from "../kube/fencing-policy.ts";

export function readManifests(
  path: string,
  filter: (o: KubernetesObject) => boolean = () => true,
): KubernetesObject[] {
  const files = statSync(path).isDirectory()
    ? readdirSync(path)
        .filter((f) => /\.ya?ml$/.test(f))
        .sort()
        .map((f) => join(path, f))
    : [path];
  // kustomization files (knative/base/crds has one) describe a build, not an API object
  const notKustomize = (o: KubernetesObject) => o.kind !== "Kustomization" && o.kind !== "Component";
  return files.flatMap((f) =>
    (loadAllYaml(readFileSync(f, "utf8")) as KubernetesObject[]).filter(
      (o) => o && o.kind && notKustomize(o) && filter(o),
    ),
  );
}

/**
 * Creates `objects` in order; CRDs are Established before any later object is created (an
 * object of a kind they define may follow them, as the install's steps do).
 */
export async function applyObjects(kc: KubeConfig, objects: KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  let pending: string[] = [];
  for (const o of objects) {
    if (o.kind === "CustomResourceDefinition") pending.push(o.metadata!.name!);
    else if (pending.length) {
      await waitCrdsEstablished(kc, pending);
      pending = [];
    }
    await api.create(o);
  }
  if (pending.length) await waitCrdsEstablished(kc, pending);
  if (objects.some((o) => o.kind === "ValidatingAdmissionPolicyBinding")) await waitAdmissionInForce(kc);
}

/**
 * fastfence's access control as deployed, to apply in this order: its namespace, its CRDs,
 * the RBAC of knative/base/rbac (with the admission ledger Lease) and the admission
 * policies of knative/base/admission, less those named in `skipPolicies` (a test that
 * plays a writer such a policy would refuse, tested elsewhere).
 */
export function shippedAccessControl(opts: { skipPolicies?: readonly string[] } = {}): KubernetesObject[] {
  const skip = new Set(opts.skipPolicies ?? []);
  return [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: FASTFENCE_NAMESPACE } },
    ...readManifests(join(ROOT, "knative/base/crds")),
    ...readManifests(join(ROOT, "knative/base/rbac"), (o) => o.kind !== "Kustomization"),
    ...readManifests(
      join(ROOT, "knative/base/admission"),
      (o) => o.kind !== "Kustomization" && !skip.has(o.metadata?.name ?? ""),
    ),
  ];
}

/**
 * fastfence's CRDs (knative/base/crds), KubeVirt's (the VMs it releases), and the ones of
 * the planned work and remediators fastfence reads (NodeMaintenance, ClusterVersion,
 * NodeHealthCheck): a real cluster has them from their operators. Not MachineHealthCheck:
 * reading it needs the openshift overlay's RBAC, and these clusters run the base's.
 */
export async function applyFastfenceCrds(kc: KubeConfig): Promise<void> {
  await applyObjects(kc, [
    ...readManifests(join(ROOT, "knative/base/crds")),
    ...readManifests(join(THIRD_PARTY_CRDS, "kubevirt.io")),
    ...readManifests(join(THIRD_PARTY_CRDS, "nodemaintenance.medik8s.io")),
    ...readManifests(join(THIRD_PARTY_CRDS, "config.openshift.io")),
    ...readManifests(join(THIRD_PARTY_CRDS, "remediation.medik8s.io")),
  ]);
}

export async function waitCrdsEstablished(
  kc: KubeConfig,
  names: string[],
  timeoutMs = 30_000,
): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  const deadline = Date.now() + timeoutMs;
  for (const name of names) {
    for (;;) {
      const crd = await ext.readCustomResourceDefinition({ name });
      if (crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not Established after ${timeoutMs} ms`);
      await sleep(100);
    }
  }
  await sleep(500); // discovery caches in the apiserver catch up
}
