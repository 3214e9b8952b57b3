// A pre-bound ReadWriteOnce volume for test workloads (a CSI PersistentVolume whose claimRef
// names the claim, and the claim naming the volume), created in the order the PV controller
// binds at once: the claim only after the controller has the volume (it marks it Available),
// then waits until the claim is Bound, so no pod is ever scheduled against an unbound claim.
// A claim the controller sees before its volume stays Pending until the controller's
// periodic sync (15 s), and a pod the scheduler found unschedulable for it waits for the
// scheduler's requeue on top (seen: over a minute). It only creates the two objects and reads them.
import type { CoreV1Api } from "@kubernetes/client-node";
import { waitUntil } from "../env/wait.ts";

export interface BoundVolume {
  /** PersistentVolume name (cluster-scoped). */
  pv: string;
  /** PersistentVolumeClaim name, in `namespace`. */
  pvc: string;
  namespace: string;
  /** The CSI volume handle (csi.fastfence.test, a driver nothing runs: only attachments name it). */
  volumeHandle: string;
  /** Wraps each create (default: the plain call), e.g. to retry transient API errors. */
  create?: (what: string, call: () => Promise<unknown>) => Promise<unknown>;
  /** How long each wait may take, ms (default 60000). */
  timeoutMs?: number;
}

/** The CSI driver test volumes name. */
export const TEST_CSI_DRIVER = "csi.fastfence.test";

export async function createBoundVolume(core: CoreV1Api, v: BoundVolume): Promise<void> {
  const create = v.create ?? ((_what, call) => call());
  const timeoutMs = v.timeoutMs ?? 60_000;
  await create(`PersistentVolume ${v.pv}`, () =>
    core.createPersistentVolume({
      body: {
        metadata: { name: v.pv },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: "Retain",
          csi: { driver: TEST_CSI_DRIVER, volumeHandle: v.volumeHandle },
          claimRef: { namespace: v.namespace, name: v.pvc },
        },
      },
    }),
  );
  const phaseOf = async (read: () => Promise<{ status?: { phase?: string } }>) =>
    (await read()).status?.phase;
  await waitUntil(
    `PersistentVolume ${v.pv} Available (the PV controller has it)`,
    async () => {
      const p = await phaseOf(() => core.readPersistentVolume({ name: v.pv }));
      return p === "Available" || p === "Bound";
    },
    timeoutMs,
    100,
  );
  await create(`PersistentVolumeClaim ${v.namespace}/${v.pvc}`, () =>
    core.createNamespacedPersistentVolumeClaim({
      namespace: v.namespace,
      body: {
        metadata: { name: v.pvc },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "1Gi" } },
          volumeName: v.pv,
        },
      },
    }),
  );
  await waitUntil(
    `PersistentVolumeClaim ${v.namespace}/${v.pvc} Bound`,
    async () =>
      (await phaseOf(() =>
        core.readNamespacedPersistentVolumeClaim({ name: v.pvc, namespace: v.namespace }),
      )) === "Bound",
    timeoutMs,
    100,
  );
}
