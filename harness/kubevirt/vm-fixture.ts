// A VM for the VM controller stand-in (harness/kubevirt/vm-controller.ts), against the real
// KubeVirt CRDs: a ReadWriteOnce PersistentVolume pre-bound to its claim, the claim, and a
// VirtualMachine with that claim as its one volume and the given run strategy. Unlike
// harness/kube/vm.ts it creates no VMI and no pod: the stand-in does, as virt-controller
// would, and the real scheduler places the pod. It only creates these objects; a create
// answered 5xx or not at all (a control plane still settling after a node's death) is sent
// again for up to 30 s, and "already exists" after such a retry counts as created.
import { createBoundVolume } from "../kube/volume.ts";
import type { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";

export type RunStrategy = "Always" | "RerunOnFailure" | "Halted";

export interface StandInVm {
  name: string;
  namespace: string;
  runStrategy: RunStrategy;
}

const RETRY_FOR_MS = 30_000;

async function createOnce(what: string, create: () => Promise<unknown>): Promise<void> {
  const end = Date.now() + RETRY_FOR_MS;
  for (let retried = false; ; retried = true) {
    try {
      await create();
      return;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (retried && code === 409) return; // an earlier try landed
      const transient = typeof code !== "number" || code >= 500;
      if (!transient || Date.now() > end) throw new Error(`create ${what}: ${String(err)}`, { cause: err });
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

export async function createStandInVm(
  api: { core: CoreV1Api; custom: CustomObjectsApi },
  vm: StandInVm,
): Promise<void> {
  const { name, namespace } = vm;
  const pv = `pv-${namespace}-${name}`;
  const pvc = `${name}-disk`;
  await createBoundVolume(api.core, {
    pv,
    pvc,
    namespace,
    volumeHandle: `vol-${namespace}-${name}`,
    create: (what, call) => createOnce(what, call),
  });
  await createOnce(`VirtualMachine ${namespace}/${name}`, () =>
    api.custom.createNamespacedCustomObject({
      group: "kubevirt.io",
      version: "v1",
      namespace,
      plural: "virtualmachines",
      body: {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachine",
        metadata: { name },
        spec: {
          runStrategy: vm.runStrategy,
          template: {
            metadata: { labels: { "kubevirt.io/vm": name } },
            spec: {
              domain: {
                devices: { disks: [{ name: "disk", disk: { bus: "virtio" } }] },
                resources: { requests: { memory: "64Mi" } },
              },
              volumes: [{ name: "disk", persistentVolumeClaim: { claimName: pvc } }],
            },
          },
        },
      },
    }),
  );
}
