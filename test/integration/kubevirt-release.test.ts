// Needs real kube-apiserver, scheduler, controller-manager, kwok: VMs placed by the real scheduler.
// Issue 46: release restarts every VM. Two VMs (runStrategy Always and RerunOnFailure, each
// with a PVC) run on node A under the leader-elected VM controller stand-in (harness/kubevirt/:
// one replica as its own process, one in this process); node A dies, and fastfence's release
// (infra/kube/nodes.ts, the actions remediate-workloads decides: taint, VM launcher pods, pods,
// VolumeAttachments) brings both back Running on another node with a new VMI, while a watch
// records that no VM ever had two launcher pods or two VMIs. The old release (deleting the
// VMI) leaves a RerunOnFailure VM stopped, which the stand-in shows too. Last, the leading
// replica is stopped: with --release-on-cancel it releases the Lease and the other takes over.
import { describe, expect, it } from "vitest";
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from "@kubernetes/client-node";
import { join } from "node:path";
import { ROOT, THIRD_PARTY_CRDS } from "../../harness/env/base.ts";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { startControlPlane } from "../../harness/env/controlplane.ts";
import { startKwokNodes } from "../../harness/env/kwok.ts";
import { ManagedProcess } from "../../harness/env/process.ts";
import { makeTempDir, removeTempDir } from "../../harness/env/registry.ts";
import { waitUntil } from "../../harness/env/wait.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { runStandIn } from "../../harness/kubevirt/vm-controller-main.ts";
import { createStandInVm, type RunStrategy } from "../../harness/kubevirt/vm-fixture.ts";
import { Kube } from "../../infra/kube/client.ts";
import { NodeOps, OUT_OF_SERVICE_TAINT } from "../../infra/kube/nodes.ts";

const NS = "vms";
const LEASE = { namespace: "kubevirt", name: "virt-controller" };
const NODES = ["kv-a", "kv-b", "kv-c"];
const G = { group: "kubevirt.io", version: "v1", namespace: NS };

type Vmi = { metadata: { name: string; uid: string }; status?: { phase?: string; nodeName?: string } };
type VmObj = { status?: { printableStatus?: string } };
type Obj = { metadata: { uid: string; name: string; labels?: Record<string, string> } };

/** Every launcher pod and VMI the watches saw, per VM, and the most that ever existed at once. */
class Recorder {
  readonly pods = new Map<string, string>(); // pod uid → VM name
  readonly vmis = new Map<string, string>(); // VMI uid → VM name
  readonly maxPods = new Map<string, number>();
  readonly maxVmis = new Map<string, number>();
  /** Why a watch ended early: a record with a gap proves nothing. */
  readonly ended: string[] = [];
  private readonly stops: (() => void)[] = [];

  private async watch(
    w: Watch,
    path: string,
    m: Map<string, string>,
    max: Map<string, number>,
    vmOf: (o: Obj) => string | undefined,
  ) {
    let aborted = false;
    const req = await w.watch(
      path,
      {},
      (phase: string, o: Obj) => {
        const vm = vmOf(o);
        if (!vm) return;
        if (phase === "DELETED") m.delete(o.metadata.uid);
        else m.set(o.metadata.uid, vm);
        const n = [...m.values()].filter((v) => v === vm).length;
        max.set(vm, Math.max(max.get(vm) ?? 0, n));
      },
      (err: unknown) => {
        if (!aborted) this.ended.push(`${path}: ${String(err)}`);
      },
    );
    this.stops.push(() => {
      aborted = true;
      req.abort();
    });
  }

  /**
   * Start both watches before any VM exists; a fresh CRD's watch may first be refused (429
   * while its storage initializes): retried until both stay open for a second.
   */
  async start(w: Watch): Promise<void> {
    await waitUntil(
      "watches of launcher pods and VMIs",
      async () => {
        for (const s of this.stops.splice(0)) s();
        this.ended.splice(0);
        await this.watch(
          w,
          `/api/v1/namespaces/${NS}/pods`,
          this.pods,
          this.maxPods,
          (p) => p.metadata.labels?.["vm.kubevirt.io/name"],
        );
        await this.watch(
          w,
          `/apis/kubevirt.io/v1/namespaces/${NS}/virtualmachineinstances`,
          this.vmis,
          this.maxVmis,
          (v) => v.metadata.name,
        );
        await new Promise((r) => setTimeout(r, 1000));
        return this.ended.length === 0;
      },
      30_000,
    );
  }

  stop(): Promise<void> {
    for (const s of this.stops) s();
    return Promise.resolve();
  }
}

const env = withEnv(async (scope) => {
  const cp = scope.add(await startControlPlane({ controllerManager: true, scheduler: true }));
  await applyObjects(cp.kubeConfig, readManifests(join(THIRD_PARTY_CRDS, "kubevirt.io")));
  // virt-handler labels the nodes it runs on schedulable for launcher pods; here the test does.
  const kwok = scope.add(await startKwokNodes(cp, NODES, { labels: { "kubevirt.io/schedulable": "true" } }));
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  const custom = cp.kubeConfig.makeApiClient(CustomObjectsApi);
  const coord = cp.kubeConfig.makeApiClient(CoordinationV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  const recorder = scope.add(new Recorder());
  await recorder.start(new Watch(cp.kubeConfig));
  // Replica 1: the stand-in as its own process (as the lab would run it on a node).
  const dir = makeTempDir("vm-controller");
  scope.add({ stop: async () => removeTempDir(dir) });
  const replica1 = scope.add(
    ManagedProcess.spawn({
      name: "vm-controller-1",
      command: process.execPath,
      args: [
        join(ROOT, "harness/kubevirt/vm-controller-main.ts"),
        `--kubeconfig=${cp.kubeconfigPath}`,
        "--identity=vm-controller-1",
        `--namespaces=${NS}`,
        "--release-on-cancel",
      ],
      dir,
    }),
  );
  const holder = async () =>
    (await coord.readNamespacedLease(LEASE).catch(() => undefined))?.spec?.holderIdentity ?? undefined;
  await replica1.waitReady(async () => (await holder()) === "vm-controller-1", 30_000);
  // Replica 2: in this process, a standby while replica 1 leads.
  const stop2 = new AbortController();
  const replica2 = runStandIn(
    {
      kubeconfig: cp.kubeconfigPath,
      identity: "vm-controller-2",
      leaseNamespace: LEASE.namespace,
      leaseName: LEASE.name,
      namespaces: [NS],
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      intervalMs: 100,
      releaseOnCancel: true,
    },
    stop2.signal,
    () => undefined,
  );
  scope.add({ stop: () => (stop2.abort(), replica2) });
  return {
    cp,
    kwok,
    core,
    custom,
    coord,
    recorder,
    replica1,
    holder,
    nodes: new NodeOps(new Kube(cp.kubeConfig)),
  };
});

async function vmiOf(name: string): Promise<Vmi | undefined> {
  return (await env()
    .custom.getNamespacedCustomObject({ ...G, plural: "virtualmachineinstances", name })
    .catch((err: { code?: number }) => {
      if (err.code === 404) return undefined;
      throw err;
    })) as Vmi | undefined;
}

async function vmStatus(name: string): Promise<string | undefined> {
  const vm = (await env().custom.getNamespacedCustomObject({
    ...G,
    plural: "virtualmachines",
    name,
  })) as VmObj;
  return vm.status?.printableStatus;
}

/** The VM's VMI once Running (on a node in `on`, and other than `not` if given). */
function running(name: string, on: string[], not?: string): Promise<Vmi> {
  return waitUntil(
    `VM ${name} Running on ${on.join("/")}`,
    async () => {
      const v = await vmiOf(name);
      return v?.status?.phase === "Running" && on.includes(v.status.nodeName ?? "") && v.metadata.uid !== not
        ? v
        : undefined;
    },
    60_000,
  );
}

async function createVms(vms: [string, RunStrategy][]): Promise<void> {
  for (const [name, runStrategy] of vms) await createStandInVm(env(), { name, namespace: NS, runStrategy });
}

const setUnschedulable = (nodes: string[], unschedulable: boolean) =>
  Promise.all(
    nodes.map((name) =>
      env().core.patchNode(
        { name, body: { spec: { unschedulable } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    ),
  );

const RELEASE = "release restarts KubeVirt VMs of both run strategies (VM controller stand-in)";
// In the order written, also under --sequence.shuffle: the later cases wait for their VMs on
// kv-b or kv-c, the nodes left once the first case killed kv-a; the last stops replica 1.
describe(RELEASE, { shuffle: false }, () => {
  it("Always and RerunOnFailure VMs on a dead node come back Running elsewhere with a new VMI", async () => {
    const { kwok, nodes, recorder } = env();
    // Place both on kv-a: the others cordoned while they start.
    await setUnschedulable(["kv-b", "kv-c"], true);
    await createVms([
      ["always", "Always"],
      ["rerun", "RerunOnFailure"],
    ]);
    const before = { always: await running("always", ["kv-a"]), rerun: await running("rerun", ["kv-a"]) };
    await setUnschedulable(["kv-b", "kv-c"], false);

    // Node A dies (its kwok killed: nothing renews it); fastfence proved the power-off (S1)
    // and releases it: the actions remediate-workloads decides, as the stage executor runs them.
    await kwok.byName("kv-a").kill();
    const t0 = Date.now();
    await nodes.setTaint("kv-a", OUT_OF_SERVICE_TAINT, true);
    const [launchers, pods] = await Promise.all([
      nodes.deleteVmLaunchers("kv-a"),
      nodes.forceDeletePods("kv-a", { exceptVmLaunchers: true }),
      nodes.deleteVolumeAttachments("kv-a"),
    ]);
    expect(launchers.sort()).toHaveLength(2);
    expect(pods.filter((p) => p.includes("/virt-launcher-"))).toEqual([]); // each pod counted once
    for (const l of launchers) expect(l).toMatch(/^vms\/virt-launcher-(always|rerun)-/);

    const after = {
      always: await running("always", ["kv-b", "kv-c"], before.always.metadata.uid),
      rerun: await running("rerun", ["kv-b", "kv-c"], before.rerun.metadata.uid),
    };
    console.log(`both VMs Running on a survivor ${Date.now() - t0} ms after the release began`);
    expect(recorder.ended).toEqual([]);
    for (const name of ["always", "rerun"] as const) {
      expect(after[name].metadata.uid).not.toBe(before[name].metadata.uid);
      await waitUntil(`VM ${name} status Running`, async () =>
        (await vmStatus(name)) === "Running" ? true : undefined,
      );
      // Never two launcher pods or two VMIs of one VM at once (watched from before the start).
      expect(recorder.maxPods.get(name), `${name} launcher pods at once`).toBe(1);
      expect(recorder.maxVmis.get(name), `${name} VMIs at once`).toBe(1);
    }
  });

  it("a VMI deleted outright (the old release) leaves a RerunOnFailure VM stopped; Always restarts", async () => {
    const { custom, recorder } = env();
    await createVms([
      ["old-always", "Always"],
      ["old-rerun", "RerunOnFailure"],
    ]);
    const survivors = ["kv-b", "kv-c"];
    const before = { a: await running("old-always", survivors), r: await running("old-rerun", survivors) };
    for (const name of ["old-always", "old-rerun"])
      await custom.deleteNamespacedCustomObject({
        ...G,
        plural: "virtualmachineinstances",
        name,
        gracePeriodSeconds: 0,
      });
    await running("old-always", survivors, before.a.metadata.uid);
    await waitUntil("the deleted RerunOnFailure VMI gone", async () =>
      (await vmiOf("old-rerun")) ? undefined : true,
    );
    // Several passes of the controller later it is still stopped, with no start request.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await vmiOf("old-rerun")).toBeUndefined();
    expect(await vmStatus("old-rerun")).toBe("Stopped");
    expect(recorder.ended).toEqual([]);
    expect(recorder.maxVmis.get("old-rerun")).toBe(1);
  });

  it("the leading replica stops: it releases the Lease and the standby leads and runs the VMs", async () => {
    const { replica1, holder, coord } = env();
    expect(await holder()).toBe("vm-controller-1");
    await replica1.stop();
    const t0 = Date.now();
    await waitUntil(
      "vm-controller-2 leads",
      async () => ((await holder()) === "vm-controller-2" ? true : undefined),
      15_000,
    );
    const ms = Date.now() - t0;
    // An empty holder is taken at the standby's next retry (at most 2 s × 2.2 with the jitter);
    // without the release it would wait for the 15 s lease to lapse from its last renewal.
    expect(ms).toBeLessThan(10_000);
    const lease = await coord.readNamespacedLease(LEASE);
    expect(lease.spec?.leaseDurationSeconds).toBe(15);
    expect(lease.spec?.leaseTransitions).toBeGreaterThanOrEqual(1);
    // The new leader acts: a new Always VM starts.
    await createVms([["late", "Always"]]);
    await running("late", ["kv-b", "kv-c"]);
  });
});
