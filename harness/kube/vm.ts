// A KubeVirt VM as the tests and the lab place it on a node, against the real KubeVirt
// CRDs (no virt-controller runs): the VirtualMachine, its VirtualMachineInstance with
// status.nodeName set, and its virt-launcher pod bound to the node, labelled and owned as
// KubeVirt's (kubevirt.io=virt-launcher, kubevirt.io/created-by=<VMI uid>, controller
// reference to the VMI). It only creates these three objects, in the API server it is given.
// For a VM that a controller restarts, see harness/kubevirt/ (the VM controller stand-in).
import type { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";

/** A container image that is never pulled (kwok runs no containers). */
export const FAKE_IMAGE = "registry.invalid/fake:1";

/** Create VM `name` with its VMI and virt-launcher pod on `node`, in `namespace`. */
export async function createVm(
  api: { core: CoreV1Api; custom: CustomObjectsApi },
  name: string,
  node: string,
  namespace = "default",
): Promise<void> {
  const g = { group: "kubevirt.io", version: "v1", namespace };
  const domain = { devices: {}, resources: { requests: { memory: "64Mi" } } };
  await api.custom.createNamespacedCustomObject({
    ...g,
    plural: "virtualmachines",
    body: {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachine",
      metadata: { name },
      spec: { runStrategy: "Always", template: { spec: { domain } } },
    },
  });
  const vmi = (await api.custom.createNamespacedCustomObject({
    ...g,
    plural: "virtualmachineinstances",
    body: {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name, labels: { "kubevirt.io/nodeName": node } },
      spec: { domain },
      status: { nodeName: node, phase: "Running" },
    },
  })) as { metadata: { uid: string } };
  const uid = vmi.metadata.uid;
  await api.core.createNamespacedPod({
    namespace,
    body: {
      metadata: {
        name: `virt-launcher-${name}`,
        labels: {
          "kubevirt.io": "virt-launcher",
          "kubevirt.io/created-by": uid,
          "vm.kubevirt.io/name": name,
        },
        ownerReferences: [
          { apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstance", name, uid, controller: true },
        ],
      },
      spec: { nodeName: node, containers: [{ name: "compute", image: FAKE_IMAGE }] },
    },
  });
}
