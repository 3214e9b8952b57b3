// Peer vouching (issue 18 item 4) on a real kube-apiserver with fastfence's shipped RBAC and
// admission policies, and the lab's emulated watchdog (a real FIFO read by a host-side
// timer): node-a's own heartbeat renewals stop (its agent is told of none after arming),
// node-b's and node-c's vouch endpoints (source/vouch-server.ts) record each vouch on their
// own heartbeat Lease as their node's event source and answer, signed, only after the API
// acknowledged it. While a majority (node-a and one peer of three) vouches, node-a keeps
// petting and is not reset; once its peers stop vouching, or the only answers are signed
// with a key no peer published, it is reset within grace + timeout.
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
import { startControlPlane } from "../../harness/env/index.ts";
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
  const cp = scope.add(await startControlPlane());
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

/** One peer's event source: its key published on its Lease, and its vouch endpoint. */
async function startPeer(node: string, opts: { publishKey?: boolean } = {}) {
  const key = new ObserverKey();
  const leases = env().leases.get(node)!;
  const lease = heartbeatLeaseName(node);
  if (opts.publishKey ?? true)
    expect(
      (await leases.acquire(lease, `source-${node}`, Date.now(), { annotations: (c) => key.annotations(c) }))
        .acquired,
    ).toBe(true);
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
    log,
  });
  return { node, server, peer: { node, host: "127.0.0.1", port: server.port } as Peer };
}

const publishedKeys = async (node: string) => {
  const l = await env().coord.readNamespacedLease({
    name: heartbeatLeaseName(node),
    namespace: FASTFENCE_NAMESPACE,
  });
  const k = l.metadata?.annotations?.[OBSERVER_KEY_ANNOTATION];
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

  it("a node whose own renewals fail keeps petting while a majority vouches, and is reset once its peers stop", async () => {
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
      // The forger did record vouches (a request is unauthenticated): that only delays fencing.
      expect(await vouchesFor("node-c", "node-a")).toBeGreaterThan(0);
    } finally {
      a.wd.stop();
    }
  });
});
