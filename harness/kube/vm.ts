// A KubeVirt VM as the tests and the lab place it on a node, against the real KubeVirt
// CRDs (no virt-controller runs): the VirtualMachine, its VirtualMachineInstance with
// status.nodeName set, and its virt-launcher pod bound to the node. It only creates
// these three objects, in the API server it is given.
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
  await api.custom.createNamespacedCustomObject({
    ...g,
    plural: "virtualmachineinstances",
    body: {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name, labels: { "kubevirt.io/nodeName": node } },
      spec: { domain },
      status: { nodeName: node, phase: "Running" },
    },
  });
  await api.core.createNamespacedPod({
    namespace,
    body: {
      metadata: {
        name: `virt-launcher-${name}`,
        labels: { "kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": name },
      },
      spec: { nodeName: node, containers: [{ name: "compute", image: FAKE_IMAGE }] },
    },
  });
}
