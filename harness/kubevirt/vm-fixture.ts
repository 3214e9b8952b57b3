// A VM for the VM controller stand-in (harness/kubevirt/vm-controller.ts), against the real
// KubeVirt CRDs: a ReadWriteOnce PersistentVolume pre-bound to its claim, the claim, and a
// VirtualMachine with that claim as its one volume and the given run strategy. Unlike
// harness/kube/vm.ts it creates no VMI and no pod: the stand-in does, as virt-controller
// would, and the real scheduler places the pod. It only creates these objects.
import type { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";

export type RunStrategy = "Always" | "RerunOnFailure" | "Halted";

export interface StandInVm {
  name: string;
  namespace: string;
  runStrategy: RunStrategy;
}

export async function createStandInVm(
  api: { core: CoreV1Api; custom: CustomObjectsApi },
  vm: StandInVm,
): Promise<void> {
  const { name, namespace } = vm;
  const pv = `pv-${namespace}-${name}`;
  const pvc = `${name}-disk`;
  await api.core.createPersistentVolume({
    body: {
      metadata: { name: pv },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        persistentVolumeReclaimPolicy: "Retain",
        csi: { driver: "csi.fastfence.test", volumeHandle: `vol-${namespace}-${name}` },
        claimRef: { namespace, name: pvc },
      },
    },
  });
  await api.core.createNamespacedPersistentVolumeClaim({
    namespace,
    body: {
      metadata: { name: pvc },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, volumeName: pv },
    },
  });
  await api.custom.createNamespacedCustomObject({
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
  });
}
