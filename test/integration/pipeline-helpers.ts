// Shared helpers of the pipeline integration tests: polling for an outcome, reading
// incidents, creating the workloads a node runs (Deployment, StatefulSet with a volume
// and VolumeAttachment, a KubeVirt VM with its VMI and launcher pod). Test code only.
import type { V1Pod } from "@kubernetes/client-node";
import { createBoundVolume, TEST_CSI_DRIVER } from "../../harness/kube/volume.ts";
import type { NodeFence } from "../../core/incident.ts";
import { NAMESPACE, type PipelineCluster } from "../../harness/env/pipeline-cluster.ts";
import { waitUntil } from "../../harness/env/wait.ts";
import { createVm as createVmOn, FAKE_IMAGE as image } from "../../harness/kube/vm.ts";

/** Polls until `fn` returns a value (30 s, every 50 ms by default); harness/env/wait.ts. */
export const waitFor = waitUntil;

/** Every NodeFence; retries the API server's transient 429 ("storage is (re)initializing"). */
export async function incidents(c: PipelineCluster): Promise<NodeFence[]> {
  return waitFor(
    "NodeFence list",
    () =>
      listIncidents(c).catch((err: { code?: number }) => {
        if (err.code === 429) return undefined;
        throw err;
      }),
    10_000,
    200,
  );
}

async function listIncidents(c: PipelineCluster): Promise<NodeFence[]> {
  const l = (await c.custom.listNamespacedCustomObject({
    group: "fastfence.io",
    version: "v1alpha1",
    plural: "nodefences",
    namespace: NAMESPACE,
  })) as {
    items: NodeFence[];
  };
  return l.items;
}

export async function podsOn(c: PipelineCluster, node: string): Promise<V1Pod[]> {
  return (await c.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })).items;
}

/** A Deployment of one pod; returns the node it runs on once it is Running. */
export async function createDeployment(c: PipelineCluster, name: string): Promise<string> {
  await c.apps.createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "c", image }] } },
      },
    },
  });
  const pod = await waitFor(`${name} pod Running`, async () =>
    (await c.core.listNamespacedPod({ namespace: "default", labelSelector: `app=${name}` })).items.find(
      (p) => p.status?.phase === "Running",
    ),
  );
  return pod.spec!.nodeName!;
}

/** A StatefulSet "db" whose pod prefers `node`, with a pre-bound RWO volume and its VolumeAttachment on `node`. */
export async function createStatefulSet(c: PipelineCluster, node: string): Promise<void> {
  await createBoundVolume(c.core, {
    pv: "pv-db",
    pvc: "data-db-0",
    namespace: "default",
    volumeHandle: "vol-db",
  });
  await c.apps.createNamespacedStatefulSet({
    namespace: "default",
    body: {
      metadata: { name: "db" },
      spec: {
        serviceName: "db",
        replicas: 1,
        selector: { matchLabels: { app: "db" } },
        template: {
          metadata: { labels: { app: "db" } },
          spec: {
            affinity: {
              nodeAffinity: {
                preferredDuringSchedulingIgnoredDuringExecution: [
                  {
                    weight: 100,
                    preference: {
                      matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [node] }],
                    },
                  },
                ],
              },
            },
            containers: [{ name: "c", image, volumeMounts: [{ name: "data", mountPath: "/data" }] }],
          },
        },
        volumeClaimTemplates: [
          {
            metadata: { name: "data" },
            spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
          },
        ],
      },
    },
  });
  await waitFor("db-0 Running", async () => {
    const p = await c.core.readNamespacedPod({ name: "db-0", namespace: "default" });
    return p.status?.phase === "Running" ? p : undefined;
  });
  const dbNode = (await c.core.readNamespacedPod({ name: "db-0", namespace: "default" })).spec!.nodeName!;
  await c.storage.createVolumeAttachment({
    body: {
      metadata: { name: "va-db" },
      spec: { attacher: TEST_CSI_DRIVER, nodeName: dbNode, source: { persistentVolumeName: "pv-db" } },
    },
  });
}

/** A KubeVirt VirtualMachine "vm1" with its VirtualMachineInstance and launcher pod on `node`. */
export async function createVm(c: PipelineCluster, node: string): Promise<void> {
  await createVmOn(c, "vm1", node);
}
