// Needs real kube-apiserver (+ etcd): impersonated identities as admission policies see them.
// Needs the real API server: impersonation and the identity an admission policy then sees are the API server's own machinery, not something a unit test can stand in for.
// What impersonation gives (issue "least privilege and proofs that cannot be bent", 4b):
// an admission policy sees the impersonated identity, extras included, and cannot tell it
// from a real token. The heartbeat-Lease policy trusts the node claim
// (userInfo.extra["authentication.kubernetes.io/node-name"]) of the event source's
// identity; a requester allowed to impersonate that ServiceAccount and that extra — and
// nothing else: no RBAC on Leases of its own — writes another node's heartbeat Lease and
// its observer key. No admission policy can refuse this; the boundary is RBAC's (who holds
// `impersonate`), which docs/threat-model.md and docs/rbac.md now state. This test keeps
// that statement true: it fails the day the API server stops admitting it. The boundary
// holds only if no identity fastfence ships or documents may impersonate: every shipped
// ServiceAccount and the operator role block of docs/rbac.md are asked the API server's
// own question (SubjectAccessReview) for each way to impersonate the event source, and
// each is denied; mallory, who may, is allowed (the check can fail).
import {
  AuthorizationV1Api,
  CoordinationV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Lease,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { MicroTime } from "../../infra/kube/lease.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { NODE_NAME_EXTRA } from "../../harness/kube/identity.ts";
import { OPERATOR_GROUP, operatorRbacFromDocs } from "../../harness/kube/operator-rbac.ts";

const SOURCE = `system:serviceaccount:${NS}:fastfence-source`;

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...shippedAccessControl(),
    ...operatorRbacFromDocs(),
    { apiVersion: "v1", kind: "Node", metadata: { name: "node-b" } },
  ] as Parameters<typeof applyObjects>[1]);
  // mallory may impersonate the event source and the node claim; nothing else
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: "impersonate-source" },
      rules: [
        {
          apiGroups: [""],
          resources: ["serviceaccounts"],
          verbs: ["impersonate"],
          resourceNames: ["fastfence-source"],
        },
        {
          apiGroups: ["authentication.k8s.io"],
          resources: [`userextras/${NODE_NAME_EXTRA}`],
          verbs: ["impersonate"],
        },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "impersonate-source" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "impersonate-source" },
      subjects: [{ kind: "User", name: "mallory", apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
  const mallory = new KubeConfig();
  mallory.loadFromFile(await cp.makeUserKubeconfig("mallory"));
  await sleep(1500); // the policies' type checking and bindings settle in the apiserver
  return {
    kc,
    mallory: mallory.makeApiClient(CoordinationV1Api),
    authz: kc.makeApiClient(AuthorizationV1Api),
  };
});

const asSourceOn = (node: string) =>
  setHeaderOptions(
    `Impersonate-Extra-${encodeURIComponent(NODE_NAME_EXTRA)}`,
    node,
    setHeaderOptions("Impersonate-User", SOURCE),
  );

function lease(node: string): V1Lease {
  const now = new MicroTime(Date.now());
  return {
    metadata: {
      name: heartbeatLeaseName(node),
      namespace: NS,
      annotations: { "fastfence.io/observer-key": "0123456789abcdef:forged" },
    },
    spec: { holderIdentity: `source-${node}`, leaseDurationSeconds: 4, acquireTime: now, renewTime: now },
  };
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    return (err as { code?: number }).code ?? 0;
  }
}

describe("impersonation and the heartbeat-Lease policy", () => {
  it("mallory on her own may not write Leases (premise: RBAC)", async () => {
    expect(await status(env().mallory.createNamespacedLease({ namespace: NS, body: lease("node-b") }))).toBe(
      403,
    );
  });

  it("impersonating the event source without a node claim is refused by the policy", async () => {
    const r = await status(
      env().mallory.createNamespacedLease(
        { namespace: NS, body: lease("node-b") },
        setHeaderOptions("Impersonate-User", SOURCE),
      ),
    );
    expect(r).toBe(403);
  });

  it("impersonating the event source with node-b's claim writes node-b's Lease and key (trust boundary: impersonate)", async () => {
    const r = await status(
      env().mallory.createNamespacedLease({ namespace: NS, body: lease("node-b") }, asSourceOn("node-b")),
    );
    expect(r).toBe(200);
    const stored = await env()
      .kc.makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: heartbeatLeaseName("node-b"), namespace: NS });
    expect(stored.metadata?.annotations?.["fastfence.io/observer-key"]).toBe("0123456789abcdef:forged");
  });

  /** Each way to become the event source of node-b: the ServiceAccount, its user name, the node claim. */
  const IMPERSONATIONS = [
    { verb: "impersonate", resource: "serviceaccounts", namespace: NS, name: "fastfence-source" },
    { verb: "impersonate", resource: "users", name: SOURCE },
    {
      verb: "impersonate",
      group: "authentication.k8s.io",
      resource: "userextras",
      subresource: NODE_NAME_EXTRA,
    },
  ];
  const mayImpersonate = async (user: string, groups: string[]) =>
    Promise.all(
      IMPERSONATIONS.map(async (resourceAttributes) => {
        const r = await env().authz.createSubjectAccessReview({
          body: { spec: { user, groups: [...groups, "system:authenticated"], resourceAttributes } },
        });
        return `${resourceAttributes.resource}: ${r.status?.allowed ? "allowed" : "denied"}`;
      }),
    );

  it("no shipped ServiceAccount and no documented operator may impersonate the event source (SubjectAccessReview)", async () => {
    const accounts = shippedAccessControl()
      .filter((o) => o.kind === "ServiceAccount")
      .map((o) => o.metadata!.name!);
    expect(accounts).toContain("fastfence-source");
    for (const sa of accounts)
      expect(
        await mayImpersonate(`system:serviceaccount:${NS}:${sa}`, [
          "system:serviceaccounts",
          `system:serviceaccounts:${NS}`,
        ]),
        sa,
      ).toEqual(["serviceaccounts: denied", "users: denied", "userextras: denied"]);
    expect(await mayImpersonate("olivia", [OPERATOR_GROUP]), "the operator role of docs/rbac.md").toEqual([
      "serviceaccounts: denied",
      "users: denied",
      "userextras: denied",
    ]);
    // The same question for mallory, whom this test's own role lets impersonate the account and the claim.
    expect(await mayImpersonate("mallory", [])).toEqual([
      "serviceaccounts: allowed",
      "users: denied",
      "userextras: allowed",
    ]);
  });
});
