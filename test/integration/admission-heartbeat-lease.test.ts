// Needs real kube-apiserver (+ etcd): admission reads the node claim of a pod-bound token.
// One node cannot speak for another through its heartbeat Lease (issue 13): under the
// admission policy of knative/base/admission/heartbeat-lease-policy.yaml, a real
// kube-apiserver lets the event source's ServiceAccount write fastfence-alive-<node> only
// with a token bound to a Pod on that same node (the node claim). Node A's replica renews
// its own Lease through the product's LeaseManager; creating, renewing or re-annotating
// node B's Lease (the public-key registry) with node A's token is refused, and so is any
// write with a token without a node claim, another stage's token, or the admin's cert.
// The watchdog report the watchdog level trusts lives on that Lease: node A cannot claim
// node B's watchdog armed, nor can fence.
import {
  AuthenticationV1Api,
  CoordinationV1Api,
  type KubeConfig,
  type V1Lease,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { refusal } from "./refusal.ts";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { formatWatchdogReport, parseWatchdogReport, WATCHDOG_ANNOTATION } from "../../core/watchdog.ts";
import { Kube } from "../../infra/kube/client.ts";
import { LeaseManager, MicroTime } from "../../infra/kube/lease.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { NODE_NAME_EXTRA, serviceAccountKubeConfig } from "../../harness/kube/identity.ts";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...shippedAccessControl(),
    { apiVersion: "v1", kind: "Node", metadata: { name: "node-a" } },
    { apiVersion: "v1", kind: "Node", metadata: { name: "node-b" } },
  ] as Parameters<typeof applyObjects>[1]);
  const id = (serviceAccount: string, node?: string) =>
    serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount, ...(node ? { node } : {}) });
  const ids = {
    sourceA: await id("fastfence-source", "node-a"),
    sourceB: await id("fastfence-source", "node-b"),
    sourceUnbound: await id("fastfence-source"),
    fenceA: await id("fastfence-fence", "node-a"),
  };
  await sleep(1500); // the policies' type checking and bindings settle in the apiserver
  return { kc, ...ids };
});

const leases = (kc: KubeConfig) =>
  new LeaseManager(new Kube(kc, { requestTimeoutMs: 5000 }), { namespace: NS, durationSeconds: 4 });

function leaseBody(node: string, holder: string): V1Lease {
  const now = new MicroTime(Date.now());
  return {
    metadata: { name: heartbeatLeaseName(node), namespace: NS },
    spec: { holderIdentity: holder, leaseDurationSeconds: 4, acquireTime: now, renewTime: now },
  };
}

describe("heartbeat Lease admission: a node's event source writes only its own Lease", () => {
  it("the pod-bound token carries the node claim (premise: the control plane issues it)", async () => {
    const { sourceA, sourceUnbound } = env();
    const who = async (kc: KubeConfig) => {
      const r = await fetchSelf(kc);
      return (r.status?.userInfo?.extra as Record<string, string[]> | undefined)?.[NODE_NAME_EXTRA];
    };
    expect(await who(sourceA)).toEqual(["node-a"]);
    expect(await who(sourceUnbound)).toBeUndefined();
  });

  it("node A's event source creates and renews fastfence-alive-node-a", async () => {
    const { sourceA, kc } = env();
    const m = leases(sourceA);
    const first = await m.acquire(heartbeatLeaseName("node-a"), "source-node-a", Date.now());
    expect(first.acquired).toBe(true);
    await sleep(20);
    const again = await m.acquire(heartbeatLeaseName("node-a"), "source-node-a", Date.now());
    expect(again.acquired).toBe(true);
    const stored = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: heartbeatLeaseName("node-a"), namespace: NS });
    expect(stored.spec?.holderIdentity).toBe("source-node-a");
  });

  it("node A's token cannot create node B's Lease", async () => {
    const { sourceA } = env();
    const r = await refusal(
      leases(sourceA).acquire(heartbeatLeaseName("node-b"), "source-node-a", Date.now()),
    );
    expect(r?.status).toBe(403);
    expect(r?.message).toMatch(
      /belongs to another node: a replica on node node-a may only write fastfence-alive-node-a/,
    );
  });

  it("node A's token cannot renew or re-annotate node B's existing Lease (the key registry)", async () => {
    const { sourceA, sourceB, kc } = env();
    // node B's event source holds its Lease (created, or renewed if another case made it)
    const own = await leases(sourceB).acquire(heartbeatLeaseName("node-b"), "source-node-b", Date.now());
    expect(own.acquired).toBe(true);
    const aApi = sourceA.makeApiClient(CoordinationV1Api);
    // keeping node B's heartbeat alive on its behalf (same holder: LeaseManager renews)
    const renew = await refusal(
      leases(sourceA).acquire(heartbeatLeaseName("node-b"), "source-node-b", Date.now()),
    );
    expect(renew?.status).toBe(403);
    // a forged public key in the annotations, everything else unchanged
    const cur = await aApi.readNamespacedLease({ name: heartbeatLeaseName("node-b"), namespace: NS });
    const forged = await refusal(
      aApi.replaceNamespacedLease({
        name: heartbeatLeaseName("node-b"),
        namespace: NS,
        body: { ...cur, metadata: { ...cur.metadata, annotations: { "fastfence.io/public-key": "forged" } } },
      }),
    );
    expect(forged?.status).toBe(403);
    const stored = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: heartbeatLeaseName("node-b"), namespace: NS });
    expect(stored.spec?.holderIdentity).toBe("source-node-b");
    expect(stored.metadata?.annotations?.["fastfence.io/public-key"]).toBeUndefined();
  });

  it("the watchdog report (fastfence.io/watchdog) is written only by its node: node A cannot claim node B armed", async () => {
    const { sourceA, sourceB, kc } = env();
    const name = heartbeatLeaseName("node-b");
    const bApi = sourceB.makeApiClient(CoordinationV1Api);
    const aApi = sourceA.makeApiClient(CoordinationV1Api);
    const report = (armed: boolean) =>
      formatWatchdogReport({
        armed,
        timeoutMs: 5000,
        bootId: "boot-b",
        ...(armed ? {} : { reason: "none" }),
      });
    // node B reports no armed watchdog, on its own Lease: allowed
    await leases(sourceB).acquire(name, "source-node-b", Date.now());
    const own = await bApi.readNamespacedLease({ name, namespace: NS });
    await bApi.replaceNamespacedLease({
      name,
      namespace: NS,
      body: { ...own, metadata: { ...own.metadata, annotations: { [WATCHDOG_ANNOTATION]: report(false) } } },
    });
    // node A claims node B's watchdog armed (which would let fence count B as reset): refused
    const cur = await aApi.readNamespacedLease({ name, namespace: NS });
    const forged = await refusal(
      aApi.replaceNamespacedLease({
        name,
        namespace: NS,
        body: { ...cur, metadata: { ...cur.metadata, annotations: { [WATCHDOG_ANNOTATION]: report(true) } } },
      }),
    );
    expect(forged?.status).toBe(403);
    expect(forged?.message).toMatch(/belongs to another node/);
    // and neither may fence, which watches these Leases for the watchdog level
    const fence = await refusal(
      env()
        .fenceA.makeApiClient(CoordinationV1Api)
        .replaceNamespacedLease({
          name,
          namespace: NS,
          body: {
            ...cur,
            metadata: { ...cur.metadata, annotations: { [WATCHDOG_ANNOTATION]: report(true) } },
          },
        }),
    );
    expect(fence?.status).toBe(403);
    const stored = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name, namespace: NS });
    expect(parseWatchdogReport(stored.metadata?.annotations?.[WATCHDOG_ANNOTATION])).toMatchObject({
      ok: true,
      report: { armed: false },
    });
  });

  it("a token without a node claim, another stage on the node, and the admin are all refused", async () => {
    const { sourceA, sourceUnbound, fenceA, kc } = env();
    const name = heartbeatLeaseName("node-a");
    // node A's Lease exists, held by its event source (the cases run in any order)
    expect((await leases(sourceA).acquire(name, "source-node-a", Date.now())).acquired).toBe(true);
    const unbound = await refusal(
      leases(sourceUnbound).acquire(heartbeatLeaseName("node-c"), "x", Date.now()),
    );
    expect(unbound?.status).toBe(403);
    expect(unbound?.message).toMatch(/carries no node claim/);
    const fence = await refusal(
      fenceA
        .makeApiClient(CoordinationV1Api)
        .createNamespacedLease({ namespace: NS, body: leaseBody("node-c", "x") }),
    );
    expect(fence?.status).toBe(403);
    expect(fence?.message).toMatch(/may only be written by the event source/);
    const admin = kc.makeApiClient(CoordinationV1Api);
    const cur = await admin.readNamespacedLease({ name, namespace: NS });
    const byAdmin = await refusal(
      admin.replaceNamespacedLease({
        name,
        namespace: NS,
        body: {
          ...cur,
          spec: { ...cur.spec, holderIdentity: "admin", renewTime: new MicroTime(Date.now()) },
        },
      }),
    );
    expect(byAdmin?.status).toBe(403);
  });

  it("other Leases in the namespace (fence's per-node driver Lease) are not affected", async () => {
    const { fenceA } = env();
    const m = leases(fenceA);
    const r = await m.acquire("fastfence-fence-node-b", "fence-node-a", Date.now());
    expect(r.acquired).toBe(true);
  });
});

/** SelfSubjectReview: who the API server says the token's holder is. */
function fetchSelf(kc: KubeConfig) {
  return kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
}
