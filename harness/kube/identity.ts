// Real service-account identities for the harness's components and the tests: a token
// from the TokenRequest API, optionally bound to a Pod object scheduled to a node (as the
// kubelet mounts it into a DaemonSet pod), so the API server puts the node claim
// (`authentication.kubernetes.io/node-name`) into the requester's identity. Returns a
// KubeConfig that authenticates with that token. It only talks to the API server it is
// given and never writes a token to disk or a log.
import { CoreV1Api, KubeConfig, type V1Toleration } from "@kubernetes/client-node";

/** The userInfo.extra key the API server fills from a pod-bound token's node claim. */
export const NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name";

export interface IdentityOptions {
  namespace: string;
  serviceAccount: string;
  /**
   * Bind the token to a Pod (created here, spec.nodeName = node, running as the
   * ServiceAccount): the token then carries that node's claim. Unset: an unbound token.
   */
  node?: string;
  /** Name of that Pod (default `<serviceAccount>-<node>`). */
  podName?: string;
  /**
   * That Pod's tolerations (default none). A DaemonSet's pod that tolerates every taint
   * (`[{ operator: "Exists" }]`) is not evicted by a NoExecute taint (unreachable,
   * out-of-service) still on a node that just came back, and neither is its token.
   */
  tolerations?: V1Toleration[];
  expirationSeconds?: number;
}

/** A KubeConfig for `kc`'s server that authenticates as a ServiceAccount token. */
export function tokenKubeConfig(kc: KubeConfig, user: string, token: string): KubeConfig {
  const cluster = kc.getCurrentCluster()!;
  const k = new KubeConfig();
  k.loadFromOptions({
    clusters: [cluster],
    users: [{ name: user, token }],
    contexts: [{ name: user, cluster: cluster.name, user }],
    currentContext: user,
  });
  return k;
}

/** A token for the ServiceAccount (bound to a Pod on `node` when given), as a KubeConfig. */
export async function serviceAccountKubeConfig(kc: KubeConfig, o: IdentityOptions): Promise<KubeConfig> {
  const core = kc.makeApiClient(CoreV1Api);
  let boundObjectRef: { kind: string; apiVersion: string; name: string; uid: string } | undefined;
  if (o.node) {
    const name = o.podName ?? `${o.serviceAccount}-${o.node}`.slice(0, 63);
    const pod = await core.createNamespacedPod({
      namespace: o.namespace,
      body: {
        metadata: { name, labels: { "app.kubernetes.io/part-of": "fastfence-harness" } },
        spec: {
          nodeName: o.node,
          serviceAccountName: o.serviceAccount,
          ...(o.tolerations ? { tolerations: o.tolerations } : {}),
          containers: [{ name: "main", image: "registry.invalid/fastfence-harness:none" }],
        },
      },
    });
    boundObjectRef = { kind: "Pod", apiVersion: "v1", name, uid: pod.metadata!.uid! };
  }
  const tr = await core.createNamespacedServiceAccountToken({
    name: o.serviceAccount,
    namespace: o.namespace,
    body: {
      spec: {
        audiences: [],
        expirationSeconds: o.expirationSeconds ?? 3600,
        ...(boundObjectRef ? { boundObjectRef } : {}),
      },
    },
  });
  return tokenKubeConfig(kc, `${o.serviceAccount}${o.node ? `@${o.node}` : ""}`, tr.status!.token!);
}
