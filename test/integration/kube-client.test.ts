// Needs real kube-apiserver (+ etcd): TLS connection reuse and resourceVersion guards.
// The Kubernetes adapters against a real kube-apiserver: API clients reuse their TLS
// connections (client-node alone opens one per request); NodeOps adds the out-of-service
// taint in one request when it can, falls back to read-modify-write when the node has no
// taints list or already carries it, never duplicates it, and keeps the other taints.
// IncidentStore writes a NodeFence status in one request guarded by resourceVersion: a
// stale write is a 409 that changes nothing, and the spec and labels stay as stored.
// LeaseManager takes a Lease from the copy a view read, guarded by its resourceVersion, for
// the duration it is asked for.
import tls from "node:tls";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { makePooledApiClient } from "../../infra/kube/pooled-auth.ts";
import { fenceLeaseName, LeaseManager, readLease } from "../../infra/kube/lease.ts";
import { NodeOps, OUT_OF_SERVICE_TAINT } from "../../infra/kube/nodes.ts";
import { emptyStatus, newIncident, transition } from "../../core/incident.ts";
import { Kube as Kube, KubeApiError } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";

/** How many TLS connections this process opened while `work` ran (observation only). */
async function tlsConnectsDuring(work: () => Promise<void>): Promise<number> {
  let handshakes = 0;
  const connect = tls.connect;
  tls.connect = ((...args: Parameters<typeof tls.connect>) => {
    handshakes++;
    return connect(...args);
  }) as typeof tls.connect;
  try {
    await work();
  } finally {
    tls.connect = connect;
  }
  return handshakes;
}

describe("Kubernetes adapters (real kube-apiserver)", () => {
  const env = withEnv(async (scope) => ({ cp: scope.add(await sharedControlPlane()) }));

  it("API clients reuse their connections instead of a TLS handshake per request", async () => {
    const { cp } = env();
    const kube = new Kube(cp.kubeConfig);
    const handshakes = await tlsConnectsDuring(async () => {
      const core = makePooledApiClient(cp.kubeConfig, CoreV1Api);
      for (let i = 0; i < 25; i++) {
        await kube.call("read namespace", (a) => a.core.readNamespace({ name: "default" }));
        await core.readNamespace({ name: "default" });
      }
      await Promise.all(
        Array.from({ length: 10 }, () =>
          kube.call("read namespace", (a) => a.core.readNamespace({ name: "default" })),
        ),
      );
    });
    console.log(`60 API requests opened ${handshakes} TLS connections`);
    // One pool per client; parallel requests may open a few more, never one per request.
    expect(handshakes).toBeLessThanOrEqual(12);
    expect(handshakes).toBeGreaterThan(0);
  });

  it("keeps an idle connection open between a component's periodic reads", async () => {
    const { cp } = env();
    const kube = new Kube(cp.kubeConfig);
    await kube.call("read namespace", (a) => a.core.readNamespace({ name: "default" }));
    const handshakes = await tlsConnectsDuring(async () => {
      // Longer than undici's default idle keep-alive (4 s), shorter than IDLE_KEEPALIVE_MS.
      await new Promise((r) => setTimeout(r, 5_000));
      await kube.call("read namespace", (a) => a.core.readNamespace({ name: "default" }));
    });
    expect(handshakes, "a request after 5 s idle opened a new TLS connection").toBe(0);
  });

  it("adds the taint once, keeps other taints, and removes it", async () => {
    const { cp } = env();
    const core = cp.kubeConfig.makeApiClient(CoreV1Api);
    const ops = new NodeOps(new Kube(cp.kubeConfig));
    const other = { key: "example.com/maintenance", value: "true", effect: "NoSchedule" };
    await core.createNode({ body: { metadata: { name: "bare" } } });
    await core.createNode({ body: { metadata: { name: "tainted" }, spec: { taints: [other] } } });
    // (The API server's TaintNodesByCondition admission adds not-ready to new nodes; ignore it.)
    const taints = async (name: string) =>
      ((await core.readNode({ name })).spec?.taints ?? [])
        .filter((t) => t.key !== "node.kubernetes.io/not-ready")
        .map((t) => `${t.key}=${t.value}:${t.effect}`);
    const oos = `${OUT_OF_SERVICE_TAINT.key}=${OUT_OF_SERVICE_TAINT.value}:${OUT_OF_SERVICE_TAINT.effect}`;

    // (A list may already exist through admission; either way it is added once.)
    expect(await ops.setTaint("bare", { ...OUT_OF_SERVICE_TAINT }, true)).toBe(true);
    expect(await taints("bare")).toEqual([oos]);
    // A list exists: appended in one request, the other taint kept.
    expect(await ops.setTaint("tainted", { ...OUT_OF_SERVICE_TAINT }, true)).toBe(true);
    expect(await taints("tainted")).toEqual([`${other.key}=${other.value}:${other.effect}`, oos]);
    // Already there: the API server refuses a duplicate, nothing changes.
    expect(await ops.setTaint("tainted", { ...OUT_OF_SERVICE_TAINT }, true)).toBe(false);
    expect(await taints("tainted")).toHaveLength(2);
    // No taints list at all: the append is refused, the read-modify-write adds it.
    await core.replaceNode({
      name: "bare",
      body: { ...(await core.readNode({ name: "bare" })), spec: { taints: [] } },
    });
    expect(await taints("bare")).toEqual([]);
    expect(await ops.setTaint("bare", { ...OUT_OF_SERVICE_TAINT }, true)).toBe(true);
    expect(await taints("bare")).toEqual([oos]);
    // Two replicas at once: still one taint.
    await Promise.all([
      ops.setTaint("bare", { ...OUT_OF_SERVICE_TAINT }, true),
      ops.setTaint("bare", { ...OUT_OF_SERVICE_TAINT }, true),
    ]);
    expect(await taints("bare")).toEqual([oos]);
    expect(await ops.setTaint("tainted", { ...OUT_OF_SERVICE_TAINT }, false)).toBe(true);
    expect(await taints("tainted")).toEqual([`${other.key}=${other.value}:${other.effect}`]);
  });

  it("writes a NodeFence status in one guarded request: a stale write is a 409 and changes nothing", async () => {
    const { cp } = env();
    const ns = "fastfence-store";
    await applyObjects(cp.kubeConfig, [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      ...readManifests(join(ROOT, "knative/base/crds")),
    ] as Parameters<typeof applyObjects>[1]);
    const store = new IncidentStore(new Kube(cp.kubeConfig), ns);
    // The first create of a new CRD's object waits about 2 s in a fresh apiserver, longer
    // than the product's request timeout: warm it up with a client without one.
    await cp.kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: "fastfence.io",
      version: "v1alpha1",
      plural: "nodefences",
      namespace: ns,
      body: newIncident("warm-up", "b0", emptyStatus()),
    });
    const t0 = "2026-12-01T00:00:00.000Z";
    const suspected = transition(emptyStatus(), "Suspected", t0);
    const created = await store.create(newIncident("node-a", "b1", suspected));
    expect(created.status?.phase).toBe("Suspected");
    const stale = created.metadata.resourceVersion!;

    const blocked = transition(suspected, "Blocked", t0, { reason: "StormGuard", message: "too many" });
    const written = await store.writeStatus(created.metadata.name, stale, blocked);
    expect(written.status?.phase).toBe("Blocked");
    expect(written.metadata.resourceVersion).not.toBe(stale);
    // Spec and labels are the stored ones, not the (identity-only) body's.
    expect(written.spec).toEqual(created.spec);
    expect(written.metadata.labels).toEqual(created.metadata.labels);

    const err = await store
      .writeStatus(
        created.metadata.name,
        stale,
        transition(suspected, "Confirmed", t0, { confirmedBy: "confirm-x", reason: "Corroborated" }),
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).status).toBe(409);
    expect((await store.get(created.metadata.name))?.status?.phase).toBe("Blocked");

    const missing = await store.writeStatus("node-z-b9", "1", suspected).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((missing as KubeApiError).status).toBe(404);
  });

  it("takes a Lease from the view's copy without a read; a copy that is no longer current loses", async () => {
    const { cp } = env();
    const kube = new Kube(cp.kubeConfig);
    const leases = new LeaseManager(kube, { namespace: "default", durationSeconds: 15 });
    const name = fenceLeaseName("node-a");
    const t = Date.parse("2026-12-01T00:00:00Z");
    expect((await leases.acquire(name, "fence-0", t)).acquired).toBe(true);
    const old = await readLease(kube, "default", name);
    expect((await leases.acquire(name, "fence-0", t + 1000)).acquired).toBe(true); // renewed
    // 20 s later the Lease has expired, but fence-1 decided on the copy before the renewal.
    const later = t + 21_000;
    const stale = await leases.acquire(name, "fence-1", later, { known: { lease: old } });
    expect(stale).toEqual({ acquired: false, holder: "fence-0", expiresAt: t + 16_000 });
    // A view that saw no Lease at all: the create loses to the existing one.
    const absent = await leases.acquire(name, "fence-1", later, { known: { lease: undefined } });
    expect(absent.acquired).toBe(false);
    expect((await readLease(kube, "default", name))?.spec?.holderIdentity).toBe("fence-0");
    // The current copy wins, in one write.
    const current = await readLease(kube, "default", name);
    expect((await leases.acquire(name, "fence-1", later, { known: { lease: current } })).acquired).toBe(true);
    expect((await readLease(kube, "default", name))?.spec?.holderIdentity).toBe("fence-1");
  });

  it("a fencing Lease lasts the duration it is taken for (the policy's leaseDurationMs), in whole seconds", async () => {
    const { cp } = env();
    const kube = new Kube(cp.kubeConfig);
    const leases = new LeaseManager(kube, { namespace: "default" }); // no default duration
    const name = fenceLeaseName("node-d");
    const t = Date.parse("2026-12-01T00:00:00Z");
    await expect(leases.acquire(name, "fence-0", t)).rejects.toMatchObject({ code: "FF_INTERNAL" });
    expect((await leases.acquire(name, "fence-0", t, { durationMs: 40_500 })).acquired).toBe(true);
    expect((await readLease(kube, "default", name))?.spec?.leaseDurationSeconds).toBe(41);
    const held = await leases.acquire(name, "fence-1", t + 40_999, { durationMs: 40_000 });
    expect(held).toEqual({ acquired: false, holder: "fence-0", expiresAt: t + 41_000 });
    expect((await leases.acquire(name, "fence-1", t + 41_001, { durationMs: 40_000 })).acquired).toBe(true);
  });
});
