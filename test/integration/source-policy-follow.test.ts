// Needs real kube-apiserver (+ etcd): policy edits reach a running source as its own identity.
// The event source follows the FencingPolicy (source/policy-follow.ts, source/event-source.ts
// applyPolicy) on a real API server, with the shipped RBAC and admission policies, running as
// its node's fastfence-source: an edit of spec.probe.* reaches the running event source and a
// stage's policy reader (the PolicyReader app/host.ts builds, POLICY_RELOAD_MS cache) within
// one reload period of each other, without a restart, and the source re-applies it (probe
// targets, the heartbeat Lease's duration). Its node's watchdog (the lab's emulated device)
// is armed only while the policy's entry for the node has the watchdog level: with the
// default policy it reports "not armed" (requested: false) and the device is never opened;
// a watchdog level arms it; removing the level records "not armed" on the Lease before the
// device is disarmed.
import { CoreV1Api, CustomObjectsApi, type V1Lease } from "@kubernetes/client-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { systemClock } from "../../core/clock.ts";
import { heartbeatLeaseName } from "../../core/decision.ts";
import type { FencingPolicySpec, FencingPolicySpecInput } from "../../core/policy.ts";
import { heartbeatLeaseDurationMs } from "../../core/rules.ts";
import { parseWatchdogReport, WATCHDOG_ANNOTATION, type WatchdogReport } from "../../core/watchdog.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { createFencingPolicy, FASTFENCE_NAMESPACE } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import type { Bus } from "../../infra/bus/bus.ts";
import { Kube } from "../../infra/kube/client.ts";
import { POLICY_RELOAD_MS, PolicyReader } from "../../infra/kube/policy.ts";
import { createLogger } from "../../infra/log.ts";
import { EmulatedWatchdog } from "../../lab/watchdog.ts";
import { startEventSource, type EventSource } from "../../source/event-source.ts";
import { startPolicyFollower } from "../../source/policy-follow.ts";

const FP = { group: "fastfence.io", version: "v1alpha1", plural: "fencingpolicies" };
const NODES = ["node-a", "node-b", "node-c", "node-d"];
const SELF = "node-a";
const log = createLogger("source-policy-follow-test", { level: "silent" });
const dir = mkdtempSync(join(tmpdir(), "ff-policy-follow-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Publishes nowhere: this test watches settings and the Lease, not events. */
const nullBus = {
  publish: async () => undefined,
  publishToEveryPartition: async () => 0,
  onBrokerTrouble: () => () => undefined,
  subscribe: async () => {
    throw new Error("not used");
  },
  readAll: async () => [],
  close: async () => undefined,
} as unknown as Bus;

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  const core = kc.makeApiClient(CoreV1Api);
  for (const name of NODES) {
    await core.createNode({
      body: {
        metadata: { name },
        status: {
          nodeInfo: { bootID: `boot-${name}` } as never,
          addresses: [{ type: "InternalIP", address: "127.0.0.1" }],
        },
      },
    });
    const n = await core.readNode({ name });
    n.status = { ...n.status, conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }] };
    await core.replaceNodeStatus({ name, body: n });
  }
  const custom = kc.makeApiClient(CustomObjectsApi);
  await createFencingPolicy(custom, {});
  const sourceKc = await serviceAccountKubeConfig(kc, {
    namespace: FASTFENCE_NAMESPACE,
    serviceAccount: "fastfence-source",
    node: SELF,
    podName: `fastfence-source-${SELF}`,
    tolerations: [{ operator: "Exists" }],
  });
  return { kc, core, custom, sourceKc };
});

/** Replaces the policy's spec (a user's `kubectl edit`). */
async function editPolicy(spec: FencingPolicySpecInput): Promise<void> {
  const cur = (await env().custom.getClusterCustomObject({ ...FP, name: "default" })) as {
    metadata: { resourceVersion: string };
  };
  await env().custom.replaceClusterCustomObject({
    ...FP,
    name: "default",
    body: {
      apiVersion: "fastfence.io/v1alpha1",
      kind: "FencingPolicy",
      metadata: { name: "default", resourceVersion: cur.metadata.resourceVersion },
      spec,
    },
  });
}

async function heartbeatLease(): Promise<V1Lease> {
  return new Kube(env().kc).call("read lease", (a) =>
    a.coordination.readNamespacedLease({ name: heartbeatLeaseName(SELF), namespace: FASTFENCE_NAMESPACE }),
  );
}
async function leaseReport(): Promise<WatchdogReport | undefined> {
  const p = parseWatchdogReport((await heartbeatLease()).metadata?.annotations?.[WATCHDOG_ANNOTATION]);
  return p.ok ? p.report : undefined;
}

/** Polls `done` every 50 ms until true; how long it took, ms (fails after `withinMs`). */
async function until(
  what: string,
  withinMs: number,
  done: () => Promise<boolean> | boolean,
): Promise<number> {
  const t0 = Date.now();
  while (!(await done())) {
    if (Date.now() - t0 > withinMs) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(50);
  }
  return Date.now() - t0;
}

describe("the event source follows FencingPolicy edits", () => {
  let source: EventSource | undefined;
  let follower: { stop(): void } | undefined;
  const wd = new EmulatedWatchdog(join(dir, "wd-a"), 5000, () => undefined);
  afterAll(async () => {
    follower?.stop();
    await source?.stop();
    wd.stop();
  });

  it("spec.probe.*: the event source and a stage agree within one reload period; the watchdog only by policy", async () => {
    wd.start();
    const kube = new Kube(env().sourceKc);
    const sourceReader = new PolicyReader(kube, "default", undefined, { log });
    const stageReader = new PolicyReader(new Kube(env().kc), "default", undefined, { log }); // as app/host.ts
    const policy: FencingPolicySpec = await sourceReader.get(Date.now());
    source = await startEventSource({
      kubeConfig: env().sourceKc,
      bus: nullBus,
      clock: systemClock,
      log,
      config: {
        replica: `source-${SELF}`,
        node: SELF,
        probe: policy.probe,
        leaseStaleMs: policy.suspicion.leaseStaleMs,
        policy,
        heartbeatNamespace: FASTFENCE_NAMESPACE,
        watchdog: {
          devicePath: wd.path,
          timeoutMs: 5000,
          renewGraceMs: 2000,
          petIntervalMs: 200,
          emulation: "lab-fifo",
        },
      },
    });
    follower = startPolicyFollower({ read: (now) => sourceReader.get(now), source, clock: systemClock, log });
    await source.ready;
    await stageReader.get(Date.now()); // a stage that handled an event just now: its cache is warm
    expect(source.targets()).toHaveLength(2);

    // A device, the default policy: "not armed", not asked for, on the Lease; never opened.
    await until(
      "the not-asked-for report on the Lease",
      5000,
      async () => (await leaseReport())?.requested === false,
    );
    expect(await leaseReport()).toMatchObject({ armed: false, requested: false });
    expect(wd.armed()).toBe(false);

    // The edit of spec.probe.*: both see it within one reload period of each other.
    const probe = { intervalMs: 400, timeoutMs: 300, observersPerNode: 3, heartbeatIntervalMs: 500 };
    await editPolicy({ probe });
    const [sourceMs, stageMs] = await Promise.all([
      until("the event source", 2 * POLICY_RELOAD_MS, () =>
        Object.entries(probe).every(([k, v]) => source!.effective().probe[k as keyof typeof probe] === v),
      ),
      // detect reads through this on every event; here it is asked every 50 ms
      until("the stage's reader", 2 * POLICY_RELOAD_MS, async () => {
        const p = (await stageReader.get(Date.now())).probe;
        return Object.entries(probe).every(([k, v]) => p[k as keyof typeof probe] === v);
      }),
    ]);
    console.log(`policy edit seen: event source after ${sourceMs} ms, stage after ${stageMs} ms`);
    expect(sourceMs).toBeLessThanOrEqual(POLICY_RELOAD_MS + 1000);
    expect(Math.abs(sourceMs - stageMs)).toBeLessThanOrEqual(POLICY_RELOAD_MS);
    // Re-applied, not just stored: three ring successors, the Lease's duration of the new heartbeat.
    expect(source.targets()).toHaveLength(3);
    await until("the heartbeat Lease's new duration", 3000, async () => {
      const l = await heartbeatLease();
      return l.spec?.leaseDurationSeconds === heartbeatLeaseDurationMs(probe.heartbeatIntervalMs) / 1000;
    });

    // The watchdog level for this node: armed after the next reload and renewal.
    const withLevel = {
      probe,
      fencing: { nodes: [{ nodeSelector: { names: [SELF] }, levels: [], watchdog: {} }] },
    };
    await editPolicy(withLevel);
    await until(
      "armed",
      POLICY_RELOAD_MS + 3000,
      async () => wd.armed() && (await leaseReport())?.armed === true,
    );
    expect(source.effective().watchdog).toMatchObject({ armed: true, timeoutMs: 5000 });

    // The level removed: "not armed" is on the Lease before the device is disarmed.
    await editPolicy({ probe });
    let recordedFirst = true;
    await until("disarmed", POLICY_RELOAD_MS + 3000, async () => {
      if (wd.armed()) return false;
      recordedFirst = (await leaseReport())?.armed === false;
      return true;
    });
    expect(recordedFirst).toBe(true);
    expect(await leaseReport()).toMatchObject({ armed: false, requested: false });
  });
});
