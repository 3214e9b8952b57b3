// Needs real kube-apiserver (+ etcd): two replicas racing on resourceVersion under admission.
// Two confirm replicas confirming two nodes at the same moment (issue 14, S4), on a real
// kube-apiserver with the manifests' RBAC and admission policies: both replicas are the
// product's stage runner (infra/runtime/stage-executor.ts) with the real Kubernetes
// adapters, as confirm's own ServiceAccount. The moment is forced, not hoped for: one
// replica's requests wait at a gate on the real client while the other decides.
//  (a) storm guard, 4 workers, maxConcurrentFenced 1: the first replica has taken its slot
//      in the admission ledger but its Confirmed write has not landed when the second
//      decides; then both decide on the same ledger and the second's ledger write goes
//      first. Each time exactly one node is Confirmed and the other Blocked, reason
//      StormGuard, on its incident.
//  (b) the etcd-quorum rule on its own: 3 control-plane nodes, storm guard wide open; one
//      Confirmed, the other Blocked with reason ControlPlaneQuorum.
// Evidence is signed with each observer node's key, published on its heartbeat Lease by the
// admin here (the heartbeat-Lease policy, which would require pod-bound source tokens, is
// not applied: it is tested in admission-heartbeat-lease.test.ts). (a) and (b) use the run's
// shared API server one after the other, reset in between.
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1Node,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { FencingPolicySpecInput } from "../../core/policy.ts";
import { OBSERVER_KEY_ANNOTATION } from "../../core/evidence-proof.ts";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { incidentName, type NodeFence } from "../../core/incident.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import * as confirm from "../../functions/confirm/handler.ts";
import { Kube, type KubeApis } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { LeaseManager, MicroTime } from "../../infra/kube/lease.ts";
import { NodeOps } from "../../infra/kube/nodes.ts";
import { PolicyReader } from "../../infra/kube/policy.ts";
import { stageRunner } from "../../infra/runtime/stage-executor.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import type { EnvScope } from "../../harness/env/scope.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { createFencingPolicy, FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { BOOT, T0, keyOf, suspected } from "../scenarios/fixtures.ts";
import { handlerContext, TestClock } from "../scenarios/memory-adapters.ts";

const CONFIRM_SA = `system:serviceaccount:${NS}:fastfence-confirm`;
const FENCE_LABEL = "node-restriction.kubernetes.io/fastfence-fence";
const CONTROL_PLANE = "node-role.kubernetes.io/control-plane";
const bootOf = (n: string) => (BOOT as Record<string, string>)[n] ?? `${n}-boot-0000`;

/** A Kube whose requests whose description starts with a held prefix wait until it is let go. */
class GatedKube extends Kube {
  private readonly held = new Map<
    string,
    { release: () => void; reached: () => void; gate: Promise<void> }
  >();
  /** Holds the next request starting with `prefix`; resolves `reached` when it arrives. */
  hold(prefix: string): { reached: Promise<void>; release: () => void } {
    let release = () => {};
    let reached = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const arrived = new Promise<void>((r) => (reached = r));
    this.held.set(prefix, { release, reached, gate });
    return { reached: arrived, release: () => release() };
  }
  private async gate(what: string): Promise<void> {
    for (const [prefix, h] of this.held)
      if (what.startsWith(prefix)) {
        this.held.delete(prefix);
        h.reached();
        await h.gate;
      }
  }
  override async call<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    await this.gate(what);
    return super.call(what, fn);
  }
  override async write<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    await this.gate(what);
    return super.write(what, fn);
  }
}

async function cluster(
  scope: EnvScope,
  nodes: readonly string[],
  labels: Record<string, string>,
  spec: FencingPolicySpecInput,
) {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl({ skipPolicies: ["fastfence-heartbeat-lease"] }));
  const core = kc.makeApiClient(CoreV1Api);
  for (const n of nodes) {
    const body: V1Node = {
      metadata: { name: n, labels: { [FENCE_LABEL]: "true", ...labels } },
      status: {
        nodeInfo: { bootID: bootOf(n) } as NonNullable<V1Node["status"]>["nodeInfo"],
        conditions: [{ type: "Ready", status: "True" }],
      },
    };
    await core.createNode({ body });
    // Each observer's key, published on its heartbeat Lease (renewed "now" by the test clock).
    await kc.makeApiClient(CoordinationV1Api).createNamespacedLease({
      namespace: NS,
      body: {
        metadata: {
          name: heartbeatLeaseName(n),
          annotations: { [OBSERVER_KEY_ANNOTATION]: keyOf(n).annotation },
        },
        spec: {
          holderIdentity: `event-source-${n}`,
          renewTime: new MicroTime(T0),
          acquireTime: new MicroTime(T0),
          leaseDurationSeconds: 1_000_000,
        },
      },
    });
  }
  await createFencingPolicy(kc.makeApiClient(CustomObjectsApi), spec);
  const confirmKc = await serviceAccountKubeConfig(kc, {
    namespace: NS,
    serviceAccount: "fastfence-confirm",
  });
  await sleep(1500); // the policies' type checking and bindings settle in the apiserver
  return { cp, kc, confirmKc };
}

function replica(kc: KubeConfig, name: string) {
  const kube = new GatedKube(kc, { requestTimeoutMs: 10_000 });
  const runner = stageRunner(
    confirm.stage,
    {
      kube,
      incidents: new IncidentStore(kube, NS),
      nodes: new NodeOps(kube),
      leases: new LeaseManager(kube, { namespace: NS, durationSeconds: 15 }),
      leaseNamespace: NS,
      policy: new PolicyReader(kube),
    },
    { identity: CONFIRM_SA, replica: name },
    { trustedConfirmers: [CONFIRM_SA] },
  );
  return { kube, runner };
}

const levels = [
  {
    driver: "redfish" as const,
    address: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
    credentialsSecret: "bmc",
    insecure: true,
  },
];
const policySpec = (extra: FencingPolicySpecInput): FencingPolicySpecInput => ({
  fencing: { nodes: [{ nodeSelector: { matchLabels: { [FENCE_LABEL]: "true" } }, levels }] },
  probe: { observersPerNode: 3 },
  ...extra,
});

type Suspicion = readonly [observer: string, node: string, atMs: number];

/** Two confirm replicas of the same identity deciding suspicions on the test clock. */
function twoReplicas(kc: KubeConfig, clock: TestClock) {
  const ctx = handlerContext(clock);
  const r = [replica(kc, "confirm-0"), replica(kc, "confirm-1")] as const;
  const handle = (i: 0 | 1, [observer, n, ms]: Suspicion) =>
    r[i].runner.handle(suspected(observer, n, ms, bootOf(n)), ctx);
  /**
   * Replica `i` decides `first` and waits at its request starting with `gate` while the
   * other replica decides `second` to the end; then `first` goes on.
   */
  const race = async (i: 0 | 1, gate: string, first: Suspicion, second: Suspicion) => {
    const held = r[i].kube.hold(gate);
    const pending = handle(i, first);
    await held.reached;
    const other = await handle(i === 0 ? 1 : 0, second);
    held.release();
    return { held: await pending, other };
  };
  return { handle, race };
}
const types = (out: { emit: readonly { type: string }[] }) => out.emit.map((x) => x.type);
const statusWrite = (n: string) => `write status of nodefence ${incidentName(n, bootOf(n))}`;

const incidents = async (kc: KubeConfig): Promise<NodeFence[]> => new IncidentStore(new Kube(kc), NS).list();
const phaseOf = (all: NodeFence[], n: string) =>
  all.find((i) => i.metadata.name === incidentName(n, bootOf(n)))?.status;

describe("two confirm replicas, two nodes, one slot (storm guard; real API server)", () => {
  const env = withEnv(async (scope) =>
    cluster(
      scope,
      ["a", "b", "c", "d"],
      {},
      policySpec({
        stormGuard: { maxConcurrentFenced: 1, maxFraction: 1 },
      }),
    ),
  );

  it("a slot taken but not yet Confirmed is counted; then both on one ledger: the loser re-decides; each time one Confirmed, one Blocked (StormGuard)", async () => {
    const e = env();
    const clock = new TestClock(T0 + 1000);
    const { handle, race } = twoReplicas(e.confirmKc, clock);

    // Round 1: a and b Suspected by one observer each (c), then d completes each quorum.
    expect((await handle(0, ["c", "a", 900])).outcome.kind).toBe("processed");
    expect((await handle(1, ["c", "b", 900])).outcome.kind).toBe("processed");
    // confirm-1 takes b's slot; its Confirmed write waits while confirm-0 decides a.
    const r1 = await race(1, statusWrite("b"), ["d", "b", 1000], ["d", "a", 1000]);
    expect(types(r1.held)).toEqual([EVENT_TYPES.fenceRequested]);
    expect(types(r1.other)).toEqual([EVENT_TYPES.incidentBlocked]);
    let all = await incidents(e.kc);
    expect(phaseOf(all, "b")?.phase).toBe("Confirmed");
    expect(phaseOf(all, "a")).toMatchObject({ phase: "Blocked", reason: "StormGuard" });

    // Round 2, 6 s later (past the evidence window): the incidents are gone, and so are
    // their slots. c and d this time; both decide on the same ledger, and confirm-0's
    // ledger write waits until confirm-1 has finished.
    const custom = e.kc.makeApiClient(CustomObjectsApi);
    for (const i of all)
      await custom.deleteNamespacedCustomObject({
        group: "fastfence.io",
        version: "v1alpha1",
        plural: "nodefences",
        namespace: NS,
        name: i.metadata.name,
      });
    clock.advance(6000);
    expect((await handle(0, ["a", "c", 6900])).outcome.kind).toBe("processed");
    expect((await handle(1, ["a", "d", 6900])).outcome.kind).toBe("processed");
    const r2 = await race(0, "write admission ledger", ["b", "c", 7000], ["b", "d", 7000]);
    expect(types(r2.other)).toEqual([EVENT_TYPES.fenceRequested]);
    expect(types(r2.held)).toEqual([EVENT_TYPES.incidentBlocked]);
    all = await incidents(e.kc);
    expect(phaseOf(all, "d")?.phase).toBe("Confirmed");
    expect(phaseOf(all, "c")).toMatchObject({ phase: "Blocked", reason: "StormGuard" });
  });
});

describe("two confirm replicas, two control-plane nodes (etcd-quorum rule on its own; real API server)", () => {
  const env = withEnv(async (scope) =>
    cluster(
      scope,
      ["a", "b", "c"],
      { [CONTROL_PLANE]: "" },
      policySpec({
        stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 },
        probe: { observersPerNode: 2 },
      }),
    ),
  );

  it("one Confirmed, the other Blocked with ControlPlaneQuorum", async () => {
    const e = env();
    const { handle, race } = twoReplicas(e.confirmKc, new TestClock(T0 + 1000));
    expect((await handle(0, ["b", "a", 900])).outcome.kind).toBe("processed");
    expect((await handle(1, ["a", "b", 900])).outcome.kind).toBe("processed");
    const r = await race(1, statusWrite("b"), ["c", "b", 1000], ["c", "a", 1000]);
    expect(types(r.held)).toEqual([EVENT_TYPES.fenceRequested]);
    expect(types(r.other)).toEqual([EVENT_TYPES.incidentBlocked]);
    const all = await incidents(e.kc);
    expect(phaseOf(all, "b")?.phase).toBe("Confirmed");
    expect(phaseOf(all, "a")).toMatchObject({ phase: "Blocked", reason: "ControlPlaneQuorum" });
  });
});
