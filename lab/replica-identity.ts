// A lab replica's Kubernetes identity, as the kubelet gives a pod: a token from the
// TokenRequest API for the component's shipped ServiceAccount (`fastfence-<component>`,
// lab/shipped-access.ts applied them with their RBAC and admission policies). The event
// source's token is bound to a Pod object on its node, as the DaemonSet pod's is, so the
// API server puts the node claim into its identity; at each boot the node's earlier
// identity Pods are deleted first. The node agent mints these with the lab's own
// credentials, playing the kubelet; a replica never sees those credentials. It writes
// nothing but those Pods and never logs a token.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { tokenKubeConfig } from "../harness/kube/identity.ts";
import type { Component } from "../events/catalog.ts";

/** A label on the identity Pods: the node they stand for. */
export const IDENTITY_NODE_LABEL = "lab.fastfence.io/identity-node";

/**
 * Token lifetime. A pod's projected token is refreshed by the kubelet; the lab mints once
 * per boot, so a node agent up longer than this needs a power cycle (docs/lab.md).
 */
export const LAB_TOKEN_SECONDS = 48 * 3600;

/** The ServiceAccount a component runs as, as knative/base/rbac names it. */
export function serviceAccountOf(c: Component): string {
  return c === "event-source" ? "fastfence-source" : `fastfence-${c}`;
}

/** The event source's identity Pod for this node and boot (`boot` may carry an incarnation). */
export function identityPodName(node: string, boot: string): string {
  return `${serviceAccountOf("event-source")}-${node}-${boot}`.slice(0, 63);
}

/** Delete this node's identity Pods of earlier boots (grace 0: the node restarted). */
export async function forgetEarlierBoots(admin: KubeConfig, namespace: string, node: string): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  const old = await core.listNamespacedPod({ namespace, labelSelector: `${IDENTITY_NODE_LABEL}=${node}` });
  for (const p of old.items)
    await core
      .deleteNamespacedPod({ name: p.metadata!.name!, namespace, gracePeriodSeconds: 0 })
      .catch((err: { code?: number }) => {
        if (err.code !== 404) throw err;
      });
}

/**
 * A KubeConfig for the lab API endpoint of `admin` that authenticates as `component`'s
 * ServiceAccount; the event source's is bound to a Pod on `node` named for this boot.
 */
export async function replicaKubeConfig(
  admin: KubeConfig,
  o: { namespace: string; node: string; component: Component; boot: string },
): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const sa = serviceAccountOf(o.component);
  let boundObjectRef: { kind: string; apiVersion: string; name: string; uid: string } | undefined;
  if (o.component === "event-source") {
    const name = identityPodName(o.node, o.boot);
    const pod = await core.createNamespacedPod({
      namespace: o.namespace,
      body: {
        metadata: { name, labels: { [IDENTITY_NODE_LABEL]: o.node } },
        spec: {
          nodeName: o.node,
          serviceAccountName: sa,
          tolerations: [{ operator: "Exists" }], // as the DaemonSet's (knative/base/source)
          containers: [{ name: "main", image: "registry.invalid/fastfence-lab:identity" }],
        },
      },
    });
    boundObjectRef = { kind: "Pod", apiVersion: "v1", name, uid: pod.metadata!.uid! };
  }
  const tr = await core.createNamespacedServiceAccountToken({
    name: sa,
    namespace: o.namespace,
    body: {
      spec: {
        audiences: [],
        expirationSeconds: LAB_TOKEN_SECONDS,
        ...(boundObjectRef ? { boundObjectRef } : {}),
      },
    },
  });
  return tokenKubeConfig(admin, `${sa}@${o.node}`, tr.status!.token!);
}
