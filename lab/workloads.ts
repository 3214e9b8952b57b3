// Workloads for the lab, created against the real API and the real KubeVirt CRDs: a
// Deployment, a StatefulSet whose pod has a pre-bound ReadWriteOnce volume and a
// VolumeAttachment, and a VM (harness/kube/vm.ts: VirtualMachine + VMI + launcher pod).
// Each set carries a suffix so bench trials can create fresh ones on the victim node and
// delete them afterwards. Only ever talks to the lab API server.
import type { AppsV1Api, CoreV1Api, CustomObjectsApi, StorageV1Api, V1Pod } from "@kubernetes/client-node";
import { createBoundVolume, TEST_CSI_DRIVER } from "../harness/kube/volume.ts";
import { sleep } from "../harness/env/base.ts";
import { createVm, FAKE_IMAGE as image } from "../harness/kube/vm.ts";
import { VIRT_LAUNCHER_LABEL } from "../infra/kube/nodes.ts";

export interface Apis {
  core: CoreV1Api;
  apps: AppsV1Api;
  storage: StorageV1Api;
  custom: CustomObjectsApi;
}

const NS = "default";

/** Polls fn until it returns a value; on timeout the error says what was last seen. */
async function until<T>(
  what: string,
  fn: (seen: (state: string) => void) => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last = "nothing read yet";
  const seen = (state: string) => void (last = state);
  for (;;) {
    try {
      const v = await fn(seen);
      if (v !== undefined) return v;
    } catch (err) {
      last = `error: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (Date.now() > end)
      throw new Error(`workloads: timed out after ${timeoutMs} ms waiting for ${what} (last seen: ${last})`);
    await sleep(100);
  }
}

const prefer = (node: string) => ({
  nodeAffinity: {
    preferredDuringSchedulingIgnoredDuringExecution: [
      {
        weight: 100,
        preference: { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [node] }] },
      },
    ],
  },
});

export interface WorkloadNames {
  web: string;
  db: string;
  dbPod: string;
  vm: string;
  pv: string;
  pvc: string;
  va: string;
}

export function names(sfx: string): WorkloadNames {
  return {
    web: `web${sfx}`,
    db: `db${sfx}`,
    dbPod: `db${sfx}-0`,
    vm: `vm${sfx}`,
    pv: `pv-db${sfx}`,
    pvc: `data-db${sfx}-0`,
    va: `va-db${sfx}`,
  };
}

/**
 * Create the workload set `sfx` with its pods on (preferring) `node`. With webReplicas > 1
 * the Deployment spreads over the nodes instead (lab up's default set).
 */
export async function createWorkloads(
  c: Apis,
  sfx: string,
  node: string,
  opts: { webReplicas?: number; log?: (line: string) => void } = {},
): Promise<WorkloadNames> {
  const n = names(sfx);
  const t0 = Date.now();
  const replicas = opts.webReplicas ?? 1;
  await c.apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name: n.web },
      spec: {
        replicas,
        selector: { matchLabels: { app: n.web } },
        template: {
          metadata: { labels: { app: n.web } },
          spec: {
            affinity:
              replicas > 1
                ? {
                    podAntiAffinity: {
                      preferredDuringSchedulingIgnoredDuringExecution: [
                        {
                          weight: 100,
                          podAffinityTerm: {
                            topologyKey: "kubernetes.io/hostname",
                            labelSelector: { matchLabels: { app: n.web } },
                          },
                        },
                      ],
                    },
                  }
                : prefer(node),
            containers: [{ name: "c", image }],
          },
        },
      },
    },
  });
  await createBoundVolume(c.core, { pv: n.pv, pvc: n.pvc, namespace: NS, volumeHandle: `vol-${n.db}` });
  await c.apps.createNamespacedStatefulSet({
    namespace: NS,
    body: {
      metadata: { name: n.db },
      spec: {
        serviceName: n.db,
        replicas: 1,
        selector: { matchLabels: { app: n.db } },
        template: {
          metadata: { labels: { app: n.db } },
          spec: {
            affinity: prefer(node),
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
  const dbPod = await until(`${n.dbPod} Running`, async (seen) => {
    const p = await c.core.readNamespacedPod({ name: n.dbPod, namespace: NS });
    const conds = (p.status?.conditions ?? []).map(
      (x) => `${x.type}=${x.status}${x.reason ? `(${x.reason}${x.message ? `: ${x.message}` : ""})` : ""}`,
    );
    const pending = p.status?.phase !== "Running";
    seen(
      `phase ${p.status?.phase ?? "?"}, node ${p.spec?.nodeName ?? "none"}, ${conds.join(" ") || "no conditions"}` +
        (pending ? `; ${await schedulingContext(c, n.pvc)}` : ""),
    );
    return pending ? undefined : p;
  });
  opts.log?.(`${n.dbPod} Running (${Date.now() - t0} ms after the workloads were created)`);
  await c.storage.createVolumeAttachment({
    body: {
      metadata: { name: n.va },
      spec: {
        attacher: TEST_CSI_DRIVER,
        nodeName: dbPod.spec!.nodeName!,
        source: { persistentVolumeName: n.pv },
      },
    },
  });
  await createVm(c, n.vm, node, NS);
  await until(`${n.web} Running`, async () => {
    const l = await c.core.listNamespacedPod({ namespace: NS, labelSelector: `app=${n.web}` });
    return l.items.filter((p) => p.status?.phase === "Running").length >= replicas ? true : undefined;
  });
  opts.log?.(`workloads Running (${Date.now() - t0} ms)`);
  return n;
}

/** What a pending pod's scheduling depends on: its claim's phase, each node's readiness and taints. */
async function schedulingContext(c: Apis, pvc: string): Promise<string> {
  const claim = await c.core
    .readNamespacedPersistentVolumeClaim({ name: pvc, namespace: NS })
    .then((x) => x.status?.phase ?? "no phase")
    .catch((err: unknown) => `unreadable (${err instanceof Error ? err.message : String(err)})`);
  const nodes = (await c.core.listNode()).items.map((x) => {
    const ready = x.status?.conditions?.find((k) => k.type === "Ready")?.status ?? "?";
    const taints = (x.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`);
    return `${x.metadata?.name} Ready=${ready}${x.spec?.unschedulable ? " cordoned" : ""}${taints.length ? ` [${taints.join(",")}]` : ""}`;
  });
  return `claim ${pvc} ${claim}; nodes ${nodes.join(", ")}`;
}

/** Delete a workload set (best effort, grace 0). */
export async function deleteWorkloads(c: Apis, sfx: string): Promise<void> {
  const n = names(sfx);
  const g = { group: "kubevirt.io", version: "v1", namespace: NS };
  const tries: Promise<unknown>[] = [
    c.apps.deleteNamespacedDeployment({
      name: n.web,
      namespace: NS,
      gracePeriodSeconds: 0,
      propagationPolicy: "Background",
    }),
    c.apps.deleteNamespacedStatefulSet({
      name: n.db,
      namespace: NS,
      gracePeriodSeconds: 0,
      propagationPolicy: "Background",
    }),
    c.custom.deleteNamespacedCustomObject({ ...g, plural: "virtualmachines", name: n.vm }),
    c.custom.deleteNamespacedCustomObject({ ...g, plural: "virtualmachineinstances", name: n.vm }),
    c.core.deleteNamespacedPod({ name: `virt-launcher-${n.vm}`, namespace: NS, gracePeriodSeconds: 0 }),
    c.storage.deleteVolumeAttachment({ name: n.va }),
    c.core.deleteNamespacedPersistentVolumeClaim({ name: n.pvc, namespace: NS }),
    c.core.deletePersistentVolume({ name: n.pv }),
  ];
  await Promise.all(tries.map((p) => p.catch(() => undefined)));
  for (const p of (await c.core.listNamespacedPod({ namespace: NS })).items)
    if (p.metadata?.labels?.app === n.web || p.metadata?.labels?.app === n.db)
      await c.core
        .deleteNamespacedPod({ name: p.metadata.name!, namespace: NS, gracePeriodSeconds: 0 })
        .catch(() => undefined);
}

export async function podsOn(c: Apis, node: string): Promise<V1Pod[]> {
  return (await c.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })).items;
}

/** "namespace/name@uid": a recreated pod of the same name is another one. */
const podKey = (p: V1Pod) => `${p.metadata?.namespace}/${p.metadata?.name}@${p.metadata?.uid}`;

const LAUNCHERS = `${VIRT_LAUNCHER_LABEL.key}=${VIRT_LAUNCHER_LABEL.value}`;

/** KubeVirt virt-launcher pods bound to the node (as podKey): one per VMI running there. */
export async function vmLaunchersOn(c: Apis, node: string): Promise<string[]> {
  const l = await c.core.listPodForAllNamespaces({
    fieldSelector: `spec.nodeName=${node}`,
    labelSelector: LAUNCHERS,
  });
  return l.items.map(podKey);
}

/** Of these launcher pods (as podKey), how many no longer exist: their VMs were released. */
export async function vmLaunchersGone(c: Apis, launchers: readonly string[]): Promise<number> {
  const now = new Set((await c.core.listPodForAllNamespaces({ labelSelector: LAUNCHERS })).items.map(podKey));
  return launchers.filter((p) => !now.has(p)).length;
}
