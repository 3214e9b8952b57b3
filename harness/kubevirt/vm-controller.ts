// The VM controller stand-in's I/O: each pass lists the VirtualMachines, their VMIs, the
// virt-launcher pods and the Nodes from the real API server, asks vm-steps.pure.ts what
// KubeVirt's virt-controller would do, and makes those writes (VMI create/delete, launcher
// pod create/delete, phases, VM status, finalizers; each guarded by the object's uid, a
// finalizer change by a test of the list it read). Passes run every intervalMs while this
// replica leads (leader-elector.ts). Harness only: it never touches a pod that is not a
// virt-launcher pod controlled by a VMI, and only in the namespaces it is given.
import {
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type CustomObjectsApi,
  type V1Affinity,
  type V1Pod,
} from "@kubernetes/client-node";
import { FAKE_IMAGE } from "../kube/vm.ts";
import {
  VM_FINALIZER,
  VMI_FINALIZER,
  vmiSteps,
  vmSteps,
  type LauncherPod,
  type Phase,
  type Vm,
  type Vmi,
} from "./vm-steps.pure.ts";

const G = { group: "kubevirt.io", version: "v1" };
const API_VERSION = "kubevirt.io/v1";

interface Obj {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion?: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    labels?: Record<string, string>;
  };
  spec?: Record<string, unknown> & {
    runStrategy?: string;
    running?: boolean;
    template?: { metadata?: { labels?: Record<string, string> }; spec?: Record<string, unknown> };
    volumes?: { name: string; persistentVolumeClaim?: { claimName: string } }[];
    domain?: { resources?: { requests?: Record<string, string> } };
    affinity?: V1Affinity;
  };
  status?: Record<string, unknown> & {
    phase?: string;
    nodeName?: string;
    runStrategy?: string;
    stateChangeRequests?: { action?: string }[];
  };
}

export interface VmControllerOptions {
  /** Namespaces whose VMs it runs (default: every namespace). */
  namespaces?: string[];
  /** Pause between passes (default 100 ms). */
  intervalMs?: number;
  /** The launcher pods' node selector (default KubeVirt's `kubevirt.io/schedulable: "true"`). */
  nodeSelector?: Record<string, string>;
  log?: (msg: string) => void;
}

const statusOf = (err: unknown) => (err as { code?: number }).code;
const ignore =
  (...codes: number[]) =>
  (err: unknown) => {
    if (!codes.includes(statusOf(err) ?? 0)) throw err;
  };

export class VmController {
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly o: VmControllerOptions;

  constructor(api: { core: CoreV1Api; custom: CustomObjectsApi }, o: VmControllerOptions = {}) {
    this.core = api.core;
    this.custom = api.custom;
    this.o = o;
  }

  /** Passes until `signal` aborts; an API error is logged and the next pass tries again. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.pass().catch((err: Error) => this.o.log?.(`pass: ${err.message}`));
      await new Promise((r) => setTimeout(r, this.o.intervalMs ?? 100));
    }
  }

  private async list(plural: string): Promise<Obj[]> {
    const lists = this.o.namespaces
      ? await Promise.all(
          this.o.namespaces.map((namespace) =>
            this.custom.listNamespacedCustomObject({ ...G, namespace, plural }),
          ),
        )
      : [await this.custom.listClusterCustomObject({ ...G, plural })];
    return lists.flatMap((l) => (l as { items: Obj[] }).items);
  }

  private async launchers(): Promise<V1Pod[]> {
    const labelSelector = "kubevirt.io=virt-launcher";
    const lists = this.o.namespaces
      ? await Promise.all(
          this.o.namespaces.map((namespace) => this.core.listNamespacedPod({ namespace, labelSelector })),
        )
      : [await this.core.listPodForAllNamespaces({ labelSelector })];
    return lists.flatMap((l) => l.items);
  }

  /** One pass over every VM and VMI. */
  async pass(): Promise<void> {
    const [vms, vmis, pods, nodes] = await Promise.all([
      this.list("virtualmachines"),
      this.list("virtualmachineinstances"),
      this.launchers(),
      this.core.listNode(),
    ]);
    const ready = new Set(
      nodes.items
        .filter((n) => n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
        .map((n) => n.metadata!.name!),
    );
    const key = (o: Obj) => `${o.metadata.namespace}/${o.metadata.name}`;
    const vmByKey = new Map(vms.map((v) => [key(v), v]));
    const vmiByKey = new Map(vmis.map((v) => [key(v), v]));
    const podsByNs = new Map<string, LauncherPod[]>();
    for (const p of pods) {
      const ns = p.metadata?.namespace ?? "";
      podsByNs.set(ns, [...(podsByNs.get(ns) ?? []), launcherOf(p)]);
    }
    await Promise.all([
      ...vmis.map((vmi) =>
        this.syncVmi(vmi, podsByNs.get(vmi.metadata.namespace) ?? [], ready, vmByKey.has(key(vmi))),
      ),
      ...vms.map((vm) => this.syncVm(vm, vmiByKey.get(key(vm)))),
    ]);
  }

  private async syncVmi(o: Obj, pods: LauncherPod[], ready: Set<string>, vmExists: boolean): Promise<void> {
    const { name, namespace, uid } = o.metadata;
    for (const s of vmiSteps(vmiOf(o), pods, ready, vmExists)) {
      if (s.kind === "createPod") {
        await this.core.createNamespacedPod({ namespace, body: this.launcherPod(o) });
        this.o.log?.(`vmi ${namespace}/${name}: launcher pod created`);
      } else if (s.kind === "deletePods") {
        for (const p of s.names)
          await this.core.deleteNamespacedPod({ name: p, namespace }).catch(ignore(404));
      } else if (s.kind === "phase") {
        await this.patch("virtualmachineinstances", o, PatchStrategy.MergePatch, {
          metadata: { uid, ...(s.nodeName ? { labels: { "kubevirt.io/nodeName": s.nodeName } } : {}) },
          status: { phase: s.phase, ...(s.nodeName ? { nodeName: s.nodeName } : {}) },
        });
        this.o.log?.(`vmi ${namespace}/${name} (${uid}): ${o.status?.phase || "(new)"} → ${s.phase}`);
      } else {
        await this.dropFinalizers("virtualmachineinstances", o, s.finalizers);
      }
    }
  }

  private async syncVm(o: Obj, vmiObj: Obj | undefined): Promise<void> {
    const { name, namespace } = o.metadata;
    for (const s of vmSteps(vmOf(o), vmiObj && vmiOf(vmiObj))) {
      if (s.kind === "deleteVmi") {
        await this.custom
          .deleteNamespacedCustomObject({ ...G, plural: "virtualmachineinstances", namespace, name })
          .catch(ignore(404));
        this.o.log?.(
          `vm ${namespace}/${name}: VMI ${vmiObj?.metadata.uid} ${vmiObj?.status?.phase}: deleted`,
        );
      } else if (s.kind === "createVmi") {
        const created = await this.custom
          .createNamespacedCustomObject({
            ...G,
            plural: "virtualmachineinstances",
            namespace,
            body: vmiFor(o),
          })
          .then(
            () => true,
            (err: unknown) => (ignore(409)(err), false),
          );
        if (!created) return; // the old VMI is still there: the next pass
        this.o.log?.(`vm ${namespace}/${name}: VMI created`);
      } else if (s.kind === "status") {
        const st = o.status ?? {};
        const want = {
          runStrategy: s.runStrategy,
          printableStatus: s.printableStatus,
          created: s.created,
          ready: s.ready,
        };
        const has = {
          runStrategy: st.runStrategy,
          printableStatus: st.printableStatus,
          created: st.created ?? false,
          ready: st.ready ?? false,
        };
        const started = vmOf(o).startRequested;
        if (JSON.stringify(has) !== JSON.stringify(want) || started !== s.startRequested)
          await this.patch("virtualmachines", o, PatchStrategy.MergePatch, {
            metadata: { uid: o.metadata.uid },
            status: { ...want, stateChangeRequests: s.startRequested ? [{ action: "Start" }] : null },
          });
      } else if (vmiObj) {
        await this.dropFinalizers("virtualmachineinstances", vmiObj, [VM_FINALIZER]);
      }
    }
  }

  private patch(plural: string, o: Obj, strategy: PatchStrategy, body: unknown): Promise<unknown> {
    const { name, namespace } = o.metadata;
    return this.custom
      .patchNamespacedCustomObject(
        { ...G, plural, namespace, name, body },
        setHeaderOptions("Content-Type", strategy),
      )
      .catch(ignore(404, 409, 422));
  }

  /** Removes finalizers, only if the list is still the one read (KubeVirt's test-and-replace). */
  private dropFinalizers(plural: string, o: Obj, drop: string[]): Promise<unknown> {
    const old = o.metadata.finalizers ?? [];
    return this.patch(plural, o, PatchStrategy.JsonPatch, [
      { op: "test", path: "/metadata/uid", value: o.metadata.uid },
      { op: "test", path: "/metadata/finalizers", value: old },
      { op: "replace", path: "/metadata/finalizers", value: old.filter((f) => !drop.includes(f)) },
    ]);
  }

  /** The launcher pod KubeVirt's template service would make, for kwok to "run". */
  private launcherPod(vmi: Obj): V1Pod {
    const { name, namespace, uid } = vmi.metadata;
    const volumes = (vmi.spec?.volumes ?? []).filter((v) => v.persistentVolumeClaim);
    return {
      metadata: {
        generateName: `virt-launcher-${name}-`,
        namespace,
        labels: {
          ...vmi.metadata.labels,
          "kubevirt.io": "virt-launcher",
          "kubevirt.io/created-by": uid,
          "vm.kubevirt.io/name": name,
        },
        annotations: { "kubevirt.io/domain": name },
        ownerReferences: [
          {
            apiVersion: API_VERSION,
            kind: "VirtualMachineInstance",
            name,
            uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: {
        restartPolicy: "Never",
        nodeSelector: this.o.nodeSelector ?? { "kubevirt.io/schedulable": "true" },
        ...(vmi.spec?.affinity ? { affinity: vmi.spec.affinity } : {}),
        containers: [
          {
            name: "compute",
            image: FAKE_IMAGE,
            resources: { requests: { memory: vmi.spec?.domain?.resources?.requests?.memory ?? "64Mi" } },
            volumeMounts: volumes.map((v) => ({
              name: v.name,
              mountPath: `/var/run/kubevirt-private/vmi-disks/${v.name}`,
            })),
          },
        ],
        volumes: volumes.map((v) => ({
          name: v.name,
          persistentVolumeClaim: { claimName: v.persistentVolumeClaim!.claimName },
        })),
      },
    };
  }
}

function vmOf(o: Obj): Vm {
  const st = o.status ?? {};
  return {
    namespace: o.metadata.namespace,
    name: o.metadata.name,
    uid: o.metadata.uid,
    runStrategy: o.spec?.runStrategy ?? (o.spec?.running ? "Always" : "Halted"),
    ...(st.runStrategy ? { statusRunStrategy: st.runStrategy } : {}),
    startRequested: (st.stateChangeRequests ?? []).some((r) => r.action === "Start"),
  };
}

function vmiOf(o: Obj): Vmi {
  return {
    namespace: o.metadata.namespace,
    name: o.metadata.name,
    uid: o.metadata.uid,
    phase: (o.status?.phase ?? "") as Phase,
    deleting: o.metadata.deletionTimestamp !== undefined,
    finalizers: o.metadata.finalizers ?? [],
    ...(o.status?.nodeName ? { nodeName: o.status.nodeName } : {}),
  };
}

function launcherOf(p: V1Pod): LauncherPod {
  const owner = p.metadata?.ownerReferences?.find((r) => r.controller && r.kind === "VirtualMachineInstance");
  return {
    name: p.metadata?.name ?? "",
    vmiUid: owner?.uid ?? "",
    ...(p.spec?.nodeName ? { nodeName: p.spec.nodeName } : {}),
    phase: p.status?.phase ?? "",
    ready: p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    deleting: p.metadata?.deletionTimestamp !== undefined,
    createdMs: p.metadata?.creationTimestamp ? new Date(p.metadata.creationTimestamp).getTime() : 0,
  };
}

/** The VMI of a VM: its name, owned by it, both finalizers, the template's spec (SetupVMIFromVM). */
function vmiFor(vm: Obj): unknown {
  const { name, namespace, uid } = vm.metadata;
  return {
    apiVersion: API_VERSION,
    kind: "VirtualMachineInstance",
    metadata: {
      name,
      namespace,
      labels: { ...vm.spec?.template?.metadata?.labels, "vm.kubevirt.io/name": name },
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: "VirtualMachine",
          name,
          uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      finalizers: [VM_FINALIZER, VMI_FINALIZER],
    },
    spec: vm.spec?.template?.spec ?? {},
  };
}
