// Needs real kube-apiserver (+ etcd): RBAC and admission on Lease writes, per identity's token.
// Needs the real API server: who may write which Lease is decided by the shipped RBAC and admission policies as the API server applies them to each identity's own token.
// Least privilege on the fastfence namespace's Leases: RBAC cannot name a Lease per node,
// so it gives the event source create/update on every Lease of the namespace, and fence
// the same. The event source needs only its own node's heartbeat Lease
// (fastfence-alive-<node>, heartbeat-lease-policy.yaml); the per-node fencing Leases
// fastfence-fence-<node> decide which fence replica drives a node's power-off (S3: one
// driver). Here node A's event source (its pod-bound token, the shipped RBAC) tries to
// create a fencing Lease, take over one fence holds, and create a Lease of another name:
// all admitted on 7091606, refused (403, the policy's message) by
// knative/base/admission/lease-writers-policy.yaml, as is the admin writing a fencing Lease.
import { CoordinationV1Api, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { refusal } from "./refusal.ts";
import { fenceLeaseName, heartbeatLeaseName } from "../../core/decision.ts";
import { Kube } from "../../infra/kube/client.ts";
import { LeaseManager, MicroTime } from "../../infra/kube/lease.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...shippedAccessControl(),
    { apiVersion: "v1", kind: "Node", metadata: { name: "node-a" } },
    { apiVersion: "v1", kind: "Node", metadata: { name: "node-b" } },
  ] as Parameters<typeof applyObjects>[1]);
  const id = (serviceAccount: string, node: string) =>
    serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount, node });
  const ids = {
    sourceA: await id("fastfence-source", "node-a"),
    fenceA: await id("fastfence-fence", "node-a"),
  };
  await sleep(1500); // the policies' type checking and bindings settle in the apiserver
  return { kc, ...ids };
});

const leases = (kc: KubeConfig) =>
  new LeaseManager(new Kube(kc, { requestTimeoutMs: 5000 }), { namespace: NS, durationSeconds: 4 });

function leaseBody(name: string, holder: string): V1Lease {
  const now = new MicroTime(Date.now());
  return {
    metadata: { name, namespace: NS },
    spec: { holderIdentity: holder, leaseDurationSeconds: 4, acquireTime: now, renewTime: now },
  };
}

const holderOf = async (name: string) =>
  (await env().kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name, namespace: NS })).spec
    ?.holderIdentity;

describe("the event source writes only its own heartbeat Lease", () => {
  it("node A's event source renews its own heartbeat Lease (still allowed)", async () => {
    const r = await leases(env().sourceA).acquire(heartbeatLeaseName("node-a"), "source-node-a", Date.now());
    expect(r.acquired).toBe(true);
  });

  it("the event source cannot create node B's fencing Lease", async () => {
    const name = fenceLeaseName("node-b");
    const r = await refusal(
      env()
        .sourceA.makeApiClient(CoordinationV1Api)
        .createNamespacedLease({ namespace: NS, body: leaseBody(name, "source-node-a") }),
    );
    expect(r?.status).toBe(403);
    expect(r?.message).toContain(
      `the event source writes only its node's heartbeat Lease (fastfence-alive-<node>), not ${name}`,
    );
    expect(await refusal(holderOf(name))).toMatchObject({ status: 404 });
  });

  it("the event source cannot take over a fencing Lease fence holds", async () => {
    const name = fenceLeaseName("node-c");
    expect((await leases(env().fenceA).acquire(name, "fence-node-a", Date.now())).acquired).toBe(true);
    const api = env().sourceA.makeApiClient(CoordinationV1Api);
    const cur = await api.readNamespacedLease({ name, namespace: NS });
    const r = await refusal(
      api.replaceNamespacedLease({
        name,
        namespace: NS,
        body: {
          ...cur,
          spec: { ...cur.spec, holderIdentity: "source-node-a", renewTime: new MicroTime(Date.now()) },
        },
      }),
    );
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("the event source writes only its node's heartbeat Lease");
    expect(await holderOf(name)).toBe("fence-node-a");
  });

  it("the event source cannot create a Lease of any other name", async () => {
    const r = await refusal(
      env()
        .sourceA.makeApiClient(CoordinationV1Api)
        .createNamespacedLease({ namespace: NS, body: leaseBody("something-else", "source-node-a") }),
    );
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("not something-else");
  });

  it("nobody but fence writes a fencing Lease, the admin included", async () => {
    const name = fenceLeaseName("node-e");
    const r = await refusal(
      env()
        .kc.makeApiClient(CoordinationV1Api)
        .createNamespacedLease({ namespace: NS, body: leaseBody(name, "admin") }),
    );
    expect(r?.status).toBe(403);
    expect(r?.message).toMatch(/fencing Lease fastfence-fence-node-e may only be written by fence .* not /);
  });

  it("fence takes and renews its fencing Leases (still allowed)", async () => {
    const m = leases(env().fenceA);
    expect((await m.acquire(fenceLeaseName("node-d"), "fence-node-a", Date.now())).acquired).toBe(true);
    expect((await m.acquire(fenceLeaseName("node-d"), "fence-node-a", Date.now())).acquired).toBe(true);
  });
});
