// Needs real kube-apiserver, controller-manager/scheduler, kwok: the harness's own cluster.
// The Kubernetes part of the real-server test environment: a real etcd + kube-apiserver
// + controller-manager + scheduler, and kwok nodes, observed through @kubernetes/client-node.
import { describe, expect, it } from "vitest";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  makeInformer,
  Watch,
  type V1Lease,
  type V1Node,
} from "@kubernetes/client-node";
import { sleep, startControlPlane, startKwokNodes, type KwokNodes } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const microTime = (d: Date): Date => d.toISOString().replace(/Z$/, "000Z") as unknown as Date;

async function eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what} (last error: ${String(last)})`);
}

describe("test env: Kubernetes control plane and kwok nodes", () => {
  let kwok: KwokNodes | undefined;
  const env = withEnv(async (scope) => {
    const t0 = Date.now();
    const cp = scope.add(await startControlPlane({ controllerManager: true, scheduler: true }));
    const cpMs = Date.now() - t0;
    kwok = scope.add(await startKwokNodes(cp, ["kwok-a", "kwok-b"]));
    console.log(
      `control plane ready in ${cpMs} ms (${JSON.stringify(cp.timings)}), kwok nodes in ${Date.now() - t0 - cpMs} ms`,
    );
    return {
      cp,
      core: cp.kubeConfig.makeApiClient(CoreV1Api),
      apps: cp.kubeConfig.makeApiClient(AppsV1Api),
      coord: cp.kubeConfig.makeApiClient(CoordinationV1Api),
    };
  });

  it("serves a Node and a Lease to an informer and a watch", async () => {
    const { cp, core, coord } = env();
    const seenNodes = new Set<string>();
    const informer = makeInformer<V1Node>(cp.kubeConfig, "/api/v1/nodes", () => core.listNode());
    informer.on("add", (n) => seenNodes.add(n.metadata?.name ?? ""));
    await informer.start();

    const leaseEvents: { phase: string; holder?: string }[] = [];
    const watch = new Watch(cp.kubeConfig);
    const abort = await watch.watch(
      "/apis/coordination.k8s.io/v1/namespaces/default/leases",
      {},
      (phase, obj: V1Lease) => leaseEvents.push({ phase, holder: obj.spec?.holderIdentity ?? undefined }),
      () => undefined,
    );
    try {
      await core.createNode({ body: { metadata: { name: "plain-node", labels: { type: "plain" } } } });
      await coord.createNamespacedLease({
        namespace: "default",
        body: {
          metadata: { name: "test-lease" },
          // client-node 2.0.1 serialises a Date as "...sssZ", which the API server rejects
          // for MicroTime fields (it wants 6 fractional digits): send the string form.
          spec: { holderIdentity: "me", leaseDurationSeconds: 5, renewTime: microTime(new Date()) },
        },
      });
      await eventually("informer sees plain-node", async () =>
        seenNodes.has("plain-node") ? true : undefined,
      );
      expect(informer.get("plain-node")?.metadata?.labels?.type).toBe("plain");
      await eventually("watch sees the lease", async () =>
        leaseEvents.find((e) => e.phase === "ADDED" && e.holder === "me"),
      );
    } finally {
      abort.abort();
      await informer.stop();
    }
  });

  it("schedules a Deployment's pods onto kwok nodes, where they become Running", async () => {
    const { core, apps } = env();
    const labels = { app: "web" };
    await apps.createNamespacedDeployment({
      namespace: "default",
      body: {
        metadata: { name: "web" },
        spec: {
          replicas: 4,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              nodeSelector: { type: "kwok" },
              containers: [{ name: "web", image: "example.invalid/web:1" }],
            },
          },
        },
      },
    });
    const t0 = Date.now();
    const pods = await eventually("4 Running pods", async () => {
      const list = await core.listNamespacedPod({ namespace: "default", labelSelector: "app=web" });
      const running = list.items.filter((p) => p.status?.phase === "Running");
      return running.length === 4 ? running : undefined;
    });
    console.log(`deployment: 4 pods Running ${Date.now() - t0} ms after create`);
    for (const p of pods) expect(["kwok-a", "kwok-b"]).toContain(p.spec?.nodeName);
    const dep = await eventually("deployment available", async () => {
      const d = await apps.readNamespacedDeployment({ name: "web", namespace: "default" });
      return d.status?.availableReplicas === 4 ? d : undefined;
    });
    expect(dep.status?.readyReplicas).toBe(4);
  });

  it("kwok renews a node's Lease until its process is killed", async () => {
    const { coord } = env();
    const renewTime = async (): Promise<number> => {
      const l = await coord.readNamespacedLease({ name: "kwok-b", namespace: "kube-node-lease" });
      return new Date(l.spec?.renewTime ?? 0).getTime();
    };
    const first = await renewTime();
    await eventually(
      "renewTime advances",
      async () => ((await renewTime()) > first ? true : undefined),
      10_000,
    );

    const node = kwok?.byName("kwok-b");
    if (!node) throw new Error("kwok nodes missing");
    await node.kill();
    const atKill = await renewTime();
    await sleep(3000); // about three renew intervals (lease 4 s, renewed every ~1 s)
    expect(await renewTime()).toBe(atKill);

    // And a restarted node (new boot ID) renews again.
    const bootBefore = node.bootId;
    await node.restart();
    expect(node.bootId).not.toBe(bootBefore);
    const afterRestart = await renewTime();
    expect(afterRestart).toBeGreaterThan(atKill);
    await eventually("renewTime advances after restart", async () =>
      (await renewTime()) > afterRestart ? true : undefined,
    );
  });
});
