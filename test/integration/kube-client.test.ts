// The Kubernetes adapters against a real kube-apiserver: API clients reuse their TLS
// connections (client-node alone opens one per request); NodeOps adds the out-of-service
// taint in one request when it can, falls back to read-modify-write when the node has no
// taints list or already carries it, never duplicates it, and keeps the other taints.
import tls from "node:tls";
import { describe, expect, it } from "vitest";
import { CoreV1Api } from "@kubernetes/client-node";
import { Kube } from "../../infra/kube/client.ts";
import { makePooledApiClient } from "../../infra/kube/pooled-auth.ts";
import { NodeOps, OUT_OF_SERVICE_TAINT } from "../../infra/kube/nodes.ts";
import { startControlPlane } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";

describe("Kubernetes adapters (real kube-apiserver)", () => {
  const env = withEnv(async (scope) => ({ cp: scope.add(await startControlPlane()) }));

  it("API clients reuse their connections instead of a TLS handshake per request", async () => {
    const { cp } = env();
    // Count TLS connections opened in this process while the clients work (observation only).
    let handshakes = 0;
    const connect = tls.connect;
    const counting = ((...args: Parameters<typeof tls.connect>) => {
      handshakes++;
      return connect(...args);
    }) as typeof tls.connect;
    tls.connect = counting;
    try {
      const kube = new Kube(cp.kubeConfig);
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
      console.log(`60 API requests opened ${handshakes} TLS connections`);
      // One pool per client; parallel requests may open a few more, never one per request.
      expect(handshakes).toBeLessThanOrEqual(12);
      expect(handshakes).toBeGreaterThan(0);
    } finally {
      tls.connect = connect;
    }
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
});
