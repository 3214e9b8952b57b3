// Needs real kube-apiserver (+ etcd), watchdog FIFO: vouches recorded on Leases before answers.
// Peer vouching (issue 18 item 4) on a real kube-apiserver with fastfence's shipped RBAC and
// admission policies, and the lab's emulated watchdog (a real FIFO read by a host-side
// timer): node-a's own heartbeat renewals stop (its agent is told of none after arming),
// node-b's and node-c's vouch endpoints (source/vouch-server.ts) record each vouch on their
// own heartbeat Lease as their node's event source and answer, signed, only after the API
// acknowledged it, and only to a request node-a signed with the key on its own heartbeat
// Lease. While both its peers vouch (the API, or two distinct peers), node-a keeps petting and
// is not reset; once its peers stop vouching, only one of them vouches, or the only answers
// are signed with a key no peer published, it is reset within grace + timeout. An unsigned or
// forged request records nothing.
import { CoordinationV1Api } from "@kubernetes/client-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { OBSERVER_KEY_ANNOTATION } from "../../core/evidence-proof.ts";
import { parseVouches } from "../../core/vouch.ts";
import { VOUCH_ANNOTATION } from "../../core/watchdog.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { Kube } from "../../infra/kube/client.ts";
import { LeaseManager } from "../../infra/kube/lease.ts";
import { createLogger } from "../../infra/log.ts";
import { EmulatedWatchdog } from "../../lab/watchdog.ts";
import { ObserverKey } from "../../source/observer-key.ts";
import { askPeers, type Peer } from "../../source/vouch-client.ts";
import { startVouchServer, vouchRecorder, type VouchServer } from "../../source/vouch-server.ts";
import { startWatchdogAgent } from "../../source/watchdog-agent.ts";

const log = createLogger("watchdog-vouch-test", { level: "silent" });
const dir = mkdtempSync(join(tmpdir(), "ff-vouch-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SETTINGS = { timeoutMs: 1_500, renewGraceMs: 800, petIntervalMs: 100 };
const NODES = ["node-a", "node-b", "node-c"];

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  const leases = new Map<string, LeaseManager>();
  for (const node of NODES) {
    const skc = await serviceAccountKubeConfig(kc, {
      namespace: FASTFENCE_NAMESPACE,
      serviceAccount: "fastfence-source",
      node,
    });
    leases.set(
      node,
      new LeaseManager(new Kube(skc), { namespace: FASTFENCE_NAMESPACE, durationSeconds: 10 }),
    );
  }
  return { coord: kc.makeApiClient(CoordinationV1Api), leases };
});

/** The keys each node published, as read back from its Lease (what an informer would hold). */
const keysRead = new Map<string, string[]>();

/** Publishes `key` on `node`'s heartbeat Lease as its event source, and reads it back. */
async function publish(node: string, key: ObserverKey) {
  const leases = env().leases.get(node)!;
  const lease = heartbeatLeaseName(node);
  let acquired = false;
  // another test's agent may still be asking this node's endpoint to record: a conflict, retried
  for (let i = 0; i < 10 && !acquired; i++) {
    acquired = (
      await leases.acquire(lease, `source-${node}`, Date.now(), { annotations: (c) => key.annotations(c) })
    ).acquired;
    if (!acquired) await sleep(50);
  }
  expect(acquired).toBe(true);
  keysRead.set(node, await publishedKeys(node));
}

/** One peer's event source: its key published on its Lease, and its vouch endpoint. */
async function startPeer(node: string, opts: { publishKey?: boolean } = {}) {
  const key = new ObserverKey();
  const leases = env().leases.get(node)!;
  const lease = heartbeatLeaseName(node);
  if (opts.publishKey ?? true) await publish(node, key);
  const server = await startVouchServer({
    node,
    port: 0,
    host: "127.0.0.1",
    isPeer: (n) => NODES.includes(n),
    record: vouchRecorder({
      leases,
      lease,
      holder: `source-${node}`,
      now: () => Date.now(),
      keep: (c) => key.annotations(c),
    }),
    sign: (c) => key.signVouch(c),
    publishedKeys: (n) => keysRead.get(n) ?? [],
    now: () => Date.now(),
    log,
  });
  return { node, key, server, peer: { node, host: "127.0.0.1", port: server.port } as Peer };
}

/** The key `node` published on its heartbeat Lease; none while no case has made that Lease yet. */
const publishedKeys = async (node: string) => {
  const l = await env()
    .coord.readNamespacedLease({ name: heartbeatLeaseName(node), namespace: FASTFENCE_NAMESPACE })
    .catch((err: { code?: number }) => {
      if (err.code === 404) return undefined;
      throw err;
    });
  const k = l?.metadata?.annotations?.[OBSERVER_KEY_ANNOTATION];
  return k ? [k] : [];
};
const vouchesFor = async (voucher: string, vouchee: string) => {
  const l = await env().coord.readNamespacedLease({
    name: heartbeatLeaseName(voucher),
    namespace: FASTFENCE_NAMESPACE,
  });
  return parseVouches(l.metadata?.annotations?.[VOUCH_ANNOTATION])[vouchee] ?? 0;
};

/** node-a's agent on an emulated device, renewed once (armed), then never again. */
async function nodeA(name: string, peers: () => Peer[]) {
  let firedAt: number | undefined;
  const wd = new EmulatedWatchdog(join(dir, name), SETTINGS.timeoutMs, () => (firedAt = Date.now()));
  wd.start();
  const keys = new Map<string, string[]>();
  for (const n of ["node-b", "node-c"]) keys.set(n, await publishedKeys(n));
  const own = new ObserverKey();
  await publish("node-a", own);
  const agent = await startWatchdogAgent({
    config: { devicePath: wd.path, ...SETTINGS, emulation: "lab-fifo" },
    node: "node-a",
    bootId: () => "boot-a",
    clusterSize: () => NODES.length,
    log,
    askPeers: () =>
      askPeers({
        self: "node-a",
        peers: peers(),
        publishedKeys: (n) => keys.get(n) ?? [],
        sign: (c) => own.signVouchRequest(c),
        now: () => Date.now(),
        timeoutMs: SETTINGS.renewGraceMs / 4,
        mono: () => performance.now(),
      }),
  });
  agent.onRenewed();
  const renewedAt = Date.now();
  for (let i = 0; i < 20 && !wd.armed(); i++) await sleep(50);
  expect(wd.armed()).toBe(true);
  return { wd, agent, renewedAt, firedAt: () => firedAt };
}

describe("peer vouching on the real API server", () => {
  const servers: VouchServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close().catch(() => undefined);
  });

  it("a node whose own renewals fail keeps petting while both peers vouch, and is reset once they stop", async () => {
    const b = await startPeer("node-b");
    const c = await startPeer("node-c");
    servers.push(b.server, c.server);
    let peers = [b.peer, c.peer];
    const a = await nodeA("wd-1", () => peers);
    try {
      const before = await vouchesFor("node-b", "node-a");
      await sleep(4 * (SETTINGS.renewGraceMs + SETTINGS.timeoutMs));
      expect(a.firedAt()).toBeUndefined(); // vouched for, long past grace + timeout since its last renewal
      expect(await vouchesFor("node-b", "node-a")).toBeGreaterThan(before + 3);
      expect(await vouchesFor("node-c", "node-a")).toBeGreaterThan(0);

      // The peers stop answering (their event sources gone): no majority.
      await b.server.close();
      await c.server.close();
      peers = [b.peer, c.peer];
      const stoppedAt = Date.now();
      await sleep(SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 1_000);
      expect(a.firedAt()).toBeDefined();
      expect(a.firedAt()! - stoppedAt).toBeLessThanOrEqual(SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 400);
      console.log(
        `vouched for ${stoppedAt - a.renewedAt} ms after its last renewal; reset ${a.firedAt()! - stoppedAt} ms after its peers stopped (grace ${SETTINGS.renewGraceMs} + timeout ${SETTINGS.timeoutMs} ms)`,
      );
    } finally {
      a.wd.stop();
    }
  });

  it("answers signed with a key no peer published do not count: without a majority it is reset", async () => {
    // node-c's endpoint runs with a fresh key it never published (a forger on the node network).
    const forger = await startPeer("node-c", { publishKey: false });
    servers.push(forger.server);
    const a = await nodeA("wd-2", () => [forger.peer]);
    try {
      await sleep(SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 1_000);
      expect(a.firedAt()).toBeDefined();
      expect(a.firedAt()! - a.renewedAt).toBeLessThanOrEqual(
        SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 400,
      );
    } finally {
      a.wd.stop();
      await forger.server.close(); // it would keep writing its unpublished key on node-c's Lease
    }
  });

  // On 6f7efbe: an unsigned request from anyone was recorded (HTTP 200, the counter bumped),
  // and one vouching peer of three kept node-a petting (it counted itself as the majority's other half).
  it("an unsigned or forged request is refused and records nothing", async () => {
    const b = await startPeer("node-b");
    servers.push(b.server);
    const post = (body: unknown) =>
      fetch(`http://127.0.0.1:${b.server.port}/vouch`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const before = await vouchesFor("node-b", "node-c");
    const unsigned = await post({ vouchee: "node-c", nonce: "n".repeat(24) });
    expect(unsigned.status).toBe(401);
    const forger = new ObserverKey(); // a key node-c never published
    const claim = { vouchee: "node-c", voucher: "node-b", nonce: "f".repeat(24), at: Date.now() };
    const forged = await post(forger.signVouchRequest(claim));
    expect(forged.status).toBe(401);
    expect(((await forged.json()) as { reason: string }).reason).toBe("UnknownKey");
    expect(await vouchesFor("node-b", "node-c")).toBe(before);

    // node-c's own signed request counts once; its replay is refused; a flood is cut at the rate.
    const c = await startPeer("node-c");
    servers.push(c.server);
    const valid = c.key.signVouchRequest({ ...claim, nonce: "v".repeat(24), at: Date.now() });
    expect((await post(valid)).status).toBe(200);
    expect(await vouchesFor("node-b", "node-c")).toBe(before + 1);
    const replay = await post(valid);
    expect(replay.status).toBe(409);
    expect(((await replay.json()) as { reason: string }).reason).toBe("Replayed");
    const flood = await Promise.all(
      Array.from({ length: 15 }, (_, i) =>
        post(c.key.signVouchRequest({ ...claim, nonce: `flood${i}`.padEnd(24, "x"), at: Date.now() })),
      ),
    );
    expect(flood.filter((r) => r.status === 429).length).toBeGreaterThan(0);
  });

  it("one vouching peer of three is not enough: the API, or two distinct peers", async () => {
    const b = await startPeer("node-b");
    servers.push(b.server);
    const before = await vouchesFor("node-b", "node-a"); // an earlier case's vouches count apart
    const a = await nodeA("wd-3", () => [b.peer]);
    try {
      await sleep(SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 1_000);
      expect(a.firedAt()).toBeDefined();
      expect(await vouchesFor("node-b", "node-a")).toBeGreaterThan(before); // b did vouch: not enough alone
    } finally {
      a.wd.stop();
    }
  });
});
