// The watch-fed View.observers (infra/kube/observer-cache.ts) against a real
// kube-apiserver: it answers nothing until its watch has listed, then the same map a
// list gives (readObserverInfos); it follows renewals, re-keys and deletions; and it
// answers nothing once its watch has been silent for longer than the caller allows (a
// stalled watch), so the runtime lists from the API instead.
import { CoordinationV1Api, CoreV1Api, type V1Lease } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../core/clock.ts";
import { OBSERVER_KEY_ANNOTATION } from "../../core/evidence-proof.ts";
import { Kube } from "../../infra/kube/client.ts";
import { MicroTime, readObserverInfos } from "../../infra/kube/lease.ts";
import { ObserverCache } from "../../infra/kube/observer-cache.ts";
import { startControlPlane } from "../../harness/env/index.ts";
import { waitUntil } from "../../harness/env/wait.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const NS = "fastfence-system";

const lease = (node: string, key: string, renewMs: number): V1Lease => ({
  metadata: { name: `fastfence-alive-${node}`, annotations: { [OBSERVER_KEY_ANNOTATION]: key } },
  spec: {
    holderIdentity: `source-${node}`,
    leaseDurationSeconds: 1,
    renewTime: new MicroTime(renewMs),
  },
});

describe("ObserverCache (real kube-apiserver)", () => {
  const env = withEnv(async (scope) => {
    const cp = scope.add(await startControlPlane());
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
    return { cp, leases: cp.kubeConfig.makeApiClient(CoordinationV1Api), kube: new Kube(cp.kubeConfig) };
  });

  it("answers once listed, the same map as a list, and follows renewals, re-keys and deletions", async () => {
    const { cp, leases, kube } = env();
    await leases.createNamespacedLease({ namespace: NS, body: lease("n1", "k1:AAAA", Date.now()) });
    await leases.createNamespacedLease({ namespace: NS, body: lease("n2", "k2:BBBB", Date.now()) });
    const cache = new ObserverCache(cp.kubeConfig, NS, { clock: systemClock });
    try {
      expect(cache.get(Date.now(), 60_000)).toBeUndefined(); // starts the watch; nothing listed yet
      const first = await waitUntil("the cache listed", async () => cache.get(Date.now(), 60_000), 15_000);
      expect(first).toEqual(await readObserverInfos(kube, NS));
      expect(first.n1!.keys).toEqual(["k1:AAAA"]);

      const cur = await leases.readNamespacedLease({ namespace: NS, name: "fastfence-alive-n1" });
      const renewed = new MicroTime(Date.now() + 5);
      await leases.replaceNamespacedLease({
        namespace: NS,
        name: "fastfence-alive-n1",
        body: {
          ...cur,
          metadata: { ...cur.metadata, annotations: { [OBSERVER_KEY_ANNOTATION]: "k3:CCCC" } },
          spec: { ...cur.spec, renewTime: renewed },
        },
      });
      const after = await waitUntil(
        "the re-key seen",
        async () => {
          const m = cache.get(Date.now(), 60_000);
          return m?.n1?.keys[0] === "k3:CCCC" ? m : undefined;
        },
        10_000,
      );
      expect(Date.parse(after.n1!.renewTime!)).toBe(renewed.getTime());
      expect(after).toEqual(await readObserverInfos(kube, NS));

      await leases.deleteNamespacedLease({ namespace: NS, name: "fastfence-alive-n2" });
      await waitUntil(
        "the deletion seen",
        async () => cache.get(Date.now(), 60_000)?.n2 === undefined,
        10_000,
      );
    } finally {
      await cache.stop();
    }
  });

  it("answers nothing when its watch was silent for longer than the caller allows", async () => {
    const { cp } = env();
    const cache = new ObserverCache(cp.kubeConfig, NS, { clock: systemClock });
    try {
      cache.get(Date.now(), 60_000);
      await waitUntil("the cache listed", async () => cache.get(Date.now(), 60_000), 15_000);
      // No Lease changes from here on: within 300 ms it still answers, after it no longer does.
      expect(cache.get(Date.now(), 300)).toBeDefined();
      await new Promise((r) => setTimeout(r, 500));
      expect(cache.get(Date.now(), 300)).toBeUndefined();
      expect(cache.get(Date.now(), 60_000)).toBeDefined();
    } finally {
      await cache.stop();
    }
  });
});
