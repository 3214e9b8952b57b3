// Needs real kube-apiservers (3-4, one etcd, own netns): failover while the slice lists a dead one.
// A compact cluster's pods reach the API through the `kubernetes` Service, whose EndpointSlice
// (written by the API servers' lease endpoint reconciler) keeps listing a dead API server for
// up to ~25 s (lease TTL 15 s + reconcile interval 10 s). fastfence's client with
// FASTFENCE_KUBE_ENDPOINTS=auto (infra/kube/api-endpoints.ts) follows that slice and fails
// over per request, so a write whose API server stopped answering completes within one
// request timeout (FASTFENCE_KUBE_TIMEOUT_MS, 2000 ms) + 500 ms on another one, while the
// slice still lists the dead one. The event source's heartbeat renewals (the observers' proof
// of being on the healthy side) fail over the same way.
//
// The API servers are real and share etcd, PKI and service-account keys; each has its own
// address in a network namespace of the test's own (harness/env/api-servers.ts: the API
// server refuses loopback addresses in that slice). Their serving cert carries only the
// first server's address and the Service's names, as OpenShift's service-network cert carries
// no node address: the client checks a discovered address as kubernetes.default.svc.
// Faults:
// - SIGSTOP: the process still holds its port, the kernel completes TCP handshakes and
//   nothing answers (the pooled connection's next request hangs): the client's deadline is
//   what gets it out.
// - SIGKILL: the namespace and its link stay up, so a connect gets a TCP reset at once; that is
//   the kind failure. The silent one (the machine's link goes down: connects hang) is the
//   lab's, where the API servers run in the nodes' namespaces (docs/design.md).
import { CoordinationV1Api, DiscoveryV1Api, V1MicroTime, type V1Lease } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { API_SLICE, urlsFromSlice } from "../../core/kube-endpoints.ts";
import { SERVICE_NAME, startApiServers, type ApiServers } from "../../harness/env/api-servers.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { Kube } from "../../infra/kube/client.ts";
import { FailoverInformer } from "../../infra/kube/failover-informer.ts";
import { createLogger } from "../../infra/log.ts";
import { systemClock } from "../../core/clock.ts";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { DEFAULT_POLICY } from "../../core/policy.ts";
import { startHeartbeat } from "../../source/heartbeat.ts";
import { ObserverKey } from "../../source/observer-key.ts";

const TIMEOUT_MS = 2000; // FASTFENCE_KUBE_TIMEOUT_MS's default
const BOUND_MS = TIMEOUT_MS + 500;
const FAST = { intervalMs: 1000, retryMs: 500, minSpacingMs: 500 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The slice's URLs as API server `via` reports them (its cert checked as the Service's name by default). */
async function sliceUrls(env: ApiServers, via: string, byName = true): Promise<string[]> {
  const d = env.kubeConfigFor(via, byName ? SERVICE_NAME : undefined).makeApiClient(DiscoveryV1Api);
  return urlsFromSlice(await d.readNamespacedEndpointSlice({ ...API_SLICE }));
}

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, ms: number): Promise<T> {
  const end = Date.now() + ms;
  let last: T | undefined;
  while (Date.now() < end) {
    last = await read().catch(() => undefined as T);
    if (last !== undefined && ok(last)) return last;
    await sleep(250);
  }
  throw new Error(`${what}: not within ${ms} ms (last: ${JSON.stringify(last)})`);
}

let n = 0;
/** One write: a ConfigMap create, timed; which server took it. */
async function write(kube: Kube): Promise<{ ms: number; server: string | undefined }> {
  const t0 = performance.now();
  await kube.call("create a ConfigMap", (a) =>
    a.core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: `failover-${process.pid}-${n++}` }, data: { at: new Date().toISOString() } },
    }),
  );
  return { ms: Math.round(performance.now() - t0), server: kube.lastServer };
}

// One set of API servers' story, in the order written also under --sequence.shuffle: the
// SIGKILL case kills the first server for good, and the last case's discovery drops it.
describe("API endpoint discovery and failover (real kube-apiservers)", { shuffle: false }, () => {
  const env = withEnv(async (scope) => scope.add(await startApiServers(3, { certIps: "first" })));
  const log = createLogger("kube-endpoint-failover", { level: process.env.FASTFENCE_LOG_LEVEL ?? "warn" });

  it("a write whose API server was SIGSTOPped completes on another within the timeout + 0.5 s", async () => {
    const e = env();
    const [a, b] = [e.servers[0]!, e.servers[1]!];
    const all = e.servers.map((s) => s.url).sort();
    expect(
      await until(
        "slice lists every API server",
        () => sliceUrls(e, b.url),
        (u) => u.length === 3,
        40_000,
      ),
    ).toEqual(all);

    // b's address is not in its cert: a client checking the address itself is refused.
    const refused = await sliceUrls(e, b.url, false).then(
      () => undefined,
      (err: unknown) => err as { cause?: { code?: string } },
    );
    expect(refused?.cause?.code).toBe("ERR_TLS_CERT_ALTNAME_INVALID");

    const kube = new Kube(e.kubeConfigFor(a.url), {
      requestTimeoutMs: TIMEOUT_MS,
      discover: true,
      discoveryPolicy: FAST,
      log,
    });
    try {
      await kube.discoveryReady();
      expect(kube.servers).toEqual(all); // the kubeconfig's server first: a is the lowest address
      const first = await write(kube);
      expect(first.server).toBe(a.url);

      a.proc.signalGroup("SIGSTOP");
      expect(await sliceUrls(e, b.url)).toContain(a.url);
      const failover = await write(kube);
      expect(await sliceUrls(e, b.url)).toContain(a.url);
      const next = await write(kube);
      console.log(
        `SIGSTOP: first write ${first.ms} ms; after the stop ${failover.ms} ms (${failover.server}); next ${next.ms} ms`,
      );
      expect(failover.server).not.toBe(a.url);
      expect(failover.ms).toBeLessThanOrEqual(BOUND_MS);
      expect(failover.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50); // it did wait out a's deadline
      expect(next.server).toBe(failover.server); // remembered: no second wait on a
      expect(next.ms).toBeLessThan(TIMEOUT_MS);
    } finally {
      a.proc.signalGroup("SIGCONT");
      kube.close();
    }
  }, 120_000);

  it("a read whose API server was SIGSTOPped is answered by another after the hedge delay, not a deadline", async () => {
    // Behind a silent etcd member an API server leaves some requests unanswered: a read is
    // also sent to the next server after readHedgeMs (500 ms), not after a whole deadline.
    const e = env();
    const a = e.servers[0]!;
    const kube = new Kube(e.kubeConfigFor(a.url), {
      requestTimeoutMs: TIMEOUT_MS,
      discover: true,
      discoveryPolicy: FAST,
      log,
    });
    try {
      await kube.discoveryReady();
      const read = async () => {
        const t0 = performance.now();
        await kube.read("list leases in default", (x) =>
          x.coordination.listNamespacedLease({ namespace: "default" }),
        );
        return { ms: Math.round(performance.now() - t0), server: kube.lastServer };
      };
      expect((await read()).server).toBe(a.url);
      a.proc.signalGroup("SIGSTOP");
      const hedged = await read();
      console.log(`hedged read: ${hedged.ms} ms after its API server stopped (${hedged.server})`);
      expect(hedged.server).not.toBe(a.url);
      expect(hedged.ms).toBeGreaterThanOrEqual(450); // it waited the hedge delay on a
      expect(hedged.ms).toBeLessThan(TIMEOUT_MS); // and not a's deadline
    } finally {
      a.proc.signalGroup("SIGCONT");
      kube.close();
    }
  }, 60_000);

  it("the event source's heartbeat keeps renewing when its API server is SIGSTOPped", async () => {
    // The observers' proof of being on the healthy side: confirm refuses evidence from a
    // node whose heartbeat is older than its staleness bound (3000 ms by default), so a
    // renewal must not wait on a dead API server. Without apiEndpoints none lands here.
    const e = env();
    const [a, b] = [e.servers[0]!, e.servers[1]!];
    const INTERVAL_MS = 1000;
    const lease = heartbeatLeaseName("hb-failover");
    const coord = e.kubeConfigFor(b.url, SERVICE_NAME).makeApiClient(CoordinationV1Api);
    const renewedAt = async () =>
      new Date(
        (await coord.readNamespacedLease({ name: lease, namespace: "default" })).spec!.renewTime!,
      ).getTime();
    const hb = await startHeartbeat({
      kubeConfig: e.kubeConfigFor(a.url),
      namespace: "default",
      node: "hb-failover",
      replica: "source-hb-failover",
      clock: systemClock,
      log,
      key: new ObserverKey(),
      nodes: new Map(),
      peerKeys: new Map(),
      policy: () => DEFAULT_POLICY,
      intervalMs: INTERVAL_MS,
      apiEndpoints: { discover: true, discoveryPolicy: FAST },
      leaseDurationMs: () => 4 * INTERVAL_MS,
      onAcquired: () => undefined,
    });
    try {
      const before = await until("a first renewal", renewedAt, () => true, 30_000);
      await until("renewals through a", renewedAt, (t) => t > before, 10_000);
      await sleep(1500); // its discovery has read the slice by now (FAST: every second)
      a.proc.signalGroup("SIGSTOP");
      const stoppedAt = Date.now();
      // renewTime is when a renewal began: the time it is seen is when it landed
      await until("a renewal after the stop", renewedAt, (t) => t > stoppedAt, 10_000);
      const gap = Date.now() - stoppedAt;
      console.log(`heartbeat: a renewal seen ${gap} ms after its API server stopped`);
      // one tick, one deadline on a, then b: within the 3000 ms staleness bound + 500 ms
      expect(gap).toBeLessThanOrEqual(INTERVAL_MS + 2 * INTERVAL_MS + 500);
    } finally {
      a.proc.signalGroup("SIGCONT");
      await hb.stop();
    }
  }, 120_000);

  it("a watch whose API server was SIGSTOPped moves on once quiet and learns what it missed", async () => {
    // A watch on a stopped server gets no error for 30 s (the client's inactivity timeout):
    // the event source's heartbeat watch must not go blind that long. Without quietMs no
    // event arrives here within 10 s.
    const e = env();
    const [a, b] = [e.servers[0]!, e.servers[1]!];
    const QUIET_MS = 1000;
    const coord = e.kubeConfigFor(b.url, SERVICE_NAME).makeApiClient(CoordinationV1Api);
    const [beat, gone] = [`watch-beat-${process.pid}`, `watch-gone-${process.pid}`];
    for (const name of [beat, gone])
      await coord.createNamespacedLease({
        namespace: "default",
        body: { metadata: { name }, spec: { renewTime: new V1MicroTime() } },
      });
    let beating = true;
    const beats = (async () => {
      while (beating) {
        const l = await coord
          .readNamespacedLease({ name: beat, namespace: "default" })
          .catch(() => undefined);
        if (l) {
          l.spec = { ...l.spec, renewTime: new V1MicroTime() };
          await coord
            .replaceNamespacedLease({ name: beat, namespace: "default", body: l })
            .catch(() => undefined);
        }
        await sleep(250);
      }
    })();
    const kube = new Kube(e.kubeConfigFor(a.url), {
      requestTimeoutMs: TIMEOUT_MS,
      discover: true,
      discoveryPolicy: FAST,
      log,
    });
    const inf = new FailoverInformer<V1Lease>({
      name: "test-leases",
      kube,
      path: "/apis/coordination.k8s.io/v1/namespaces/default/leases",
      list: (x) => x.coordination.listNamespacedLease({ namespace: "default" }),
      quietMs: QUIET_MS,
      log,
    });
    const renewals: { at: number; renewTime: number }[] = [];
    const deleted: string[] = [];
    inf.on(
      "update",
      (l) =>
        l.metadata?.name === beat &&
        renewals.push({ at: Date.now(), renewTime: new Date(l.spec!.renewTime!).getTime() }),
    );
    inf.on("delete", (l) => deleted.push(l.metadata!.name!));
    try {
      await kube.discoveryReady();
      expect(await inf.start()).toBe(true);
      expect(inf.server).toBe(a.url);
      await until(
        "renewals through a",
        async () => renewals.length,
        (n) => n >= 2,
        10_000,
      );
      a.proc.signalGroup("SIGSTOP");
      const stoppedAt = Date.now();
      await coord.deleteNamespacedLease({ name: gone, namespace: "default" });
      const after = await until(
        "a renewal written after the stop",
        async () => renewals.find((r) => r.renewTime > stoppedAt),
        (r) => r !== undefined,
        10_000,
      );
      const gap = after!.at - stoppedAt;
      console.log(`watch: a renewal seen ${gap} ms after its API server stopped, now on ${inf.server}`);
      expect(inf.server).not.toBe(a.url);
      // quiet for QUIET_MS (checked every QUIET_MS / 4), a list on the next server, a renewal
      expect(gap).toBeLessThanOrEqual(QUIET_MS + QUIET_MS / 4 + 1500);
      expect(deleted).toEqual([gone]); // the move's listing lacks it: told as a delete
    } finally {
      a.proc.signalGroup("SIGCONT");
      beating = false;
      await beats;
      await inf.stop();
      kube.close();
    }
  }, 120_000);

  it("a write whose API server was SIGKILLed completes on another (connection refused: fast)", async () => {
    const e = env();
    const [a, b] = [e.servers[0]!, e.servers[1]!];
    const kube = new Kube(e.kubeConfigFor(a.url), {
      requestTimeoutMs: TIMEOUT_MS,
      discover: true,
      discoveryPolicy: FAST,
      log,
    });
    try {
      await kube.discoveryReady();
      expect(kube.servers).toHaveLength(3);
      const first = await until(
        "a write through a (again live)",
        () => write(kube),
        (w) => w.server === a.url,
        30_000,
      );

      await a.proc.kill();
      expect(await sliceUrls(e, b.url)).toContain(a.url);
      const failover = await write(kube);
      expect(await sliceUrls(e, b.url)).toContain(a.url);
      console.log(
        `SIGKILL: first write ${first.ms} ms; after the kill ${failover.ms} ms (${failover.server})`,
      );
      expect(failover.server).not.toBe(a.url);
      expect(failover.ms).toBeLessThanOrEqual(BOUND_MS);
    } finally {
      kube.close();
    }
  }, 120_000);

  it("discovery picks up a new API server and drops the one whose lease expired", async () => {
    const e = env();
    const [a, b] = [e.servers[0]!, e.servers[1]!]; // a was killed by the previous case
    expect(a.proc.running).toBe(false);
    const kube = new Kube(e.kubeConfigFor(b.url, SERVICE_NAME), {
      requestTimeoutMs: TIMEOUT_MS,
      discover: true,
      discoveryPolicy: FAST,
      log,
    });
    try {
      const added = await e.add();
      const t0 = Date.now();
      await until(
        "the client lists the new API server",
        async () => kube.servers,
        (s) => s.includes(added.url),
        40_000,
      );
      const dropped = await until(
        "the client drops the dead one",
        async () => kube.servers,
        (s) => !s.includes(a.url),
        60_000,
      );
      console.log(`discovery: added and dropped within ${Date.now() - t0} ms: ${dropped.join(", ")}`);
      expect(await sliceUrls(e, b.url)).not.toContain(a.url);
      expect([...dropped].sort()).toEqual(
        e.servers
          .slice(1)
          .map((s) => s.url)
          .sort(),
      );
      expect((await write(kube)).server).not.toBe(a.url);
    } finally {
      kube.close();
    }
  }, 150_000);
});
