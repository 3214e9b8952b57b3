// Simulated kubelets for the integration tests: one `kwok --manage-single-node` process per
// fake node, against a test control plane. The Node object is created here (kwok does not
// create nodes); kwok then keeps its status and its Lease in kube-node-lease fresh and
// marks pods bound to it Running. kill() is a node crash (the Lease stops being renewed).
// Must never manage nodes it was not given, nor talk to any server but the test one.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoordinationV1Api, CoreV1Api, type V1Node } from "@kubernetes/client-node";
import { kwokNodeObject } from "../kube/node.ts";
import type { ControlPlane } from "./controlplane.ts";
import { BIN, EnvError, sleep } from "./base.ts";
import { ManagedProcess } from "./process.ts";
import { makeTempDir, removeTempDir } from "./registry.ts";
import { timedStart } from "./start-times.ts";

export interface KwokOptions {
  /** Node Lease duration kwok writes; it renews every duration/4 (default 4 s → ~1 s renewals). */
  leaseDurationSeconds?: number;
  /** Extra labels for every node (type=kwok is always set). */
  labels?: Record<string, string>;
  /** Allocatable/capacity per node (defaults: 32 cpu, 256Gi memory, 110 pods). */
  capacity?: { cpu?: string; memory?: string; pods?: string };
  /** Add the conventional kwok NoSchedule taint (default false, so plain pods schedule). */
  taint?: boolean;
  /** Wait until each node is Ready and its Lease is held (default true). */
  waitReady?: boolean;
  readyTimeoutMs?: number;
}

export interface KwokNode {
  name: string;
  /** The boot ID currently written in status.nodeInfo.bootID. */
  bootId: string;
  process: ManagedProcess;
  /** SIGKILL the kwok process: the node's Lease and status stop being renewed. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT the kwok process (a hung kubelet). */
  freeze(): void;
  thaw(): void;
  /**
   * Start kwok again. With `reboot` (default true) the node gets a new boot ID first.
   * The new kwok process takes the Lease over once the old holder's Lease has expired
   * (kwok holder identities are per process), so this waits up to leaseDurationSeconds.
   */
  restart(opts?: { reboot?: boolean; waitReady?: boolean }): Promise<void>;
  stop(): Promise<void>;
}

export interface KwokNodes {
  nodes: KwokNode[];
  byName(name: string): KwokNode;
  /** Stops every kwok process; the Node objects stay (the control plane goes away anyway). */
  stop(): Promise<void>;
}

/** Read-modify-write of a Node's status, retried on 409 (kcm also writes new nodes). */
async function updateNodeStatus(
  core: CoreV1Api,
  name: string,
  mutate: (node: V1Node) => void,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const node = await core.readNodeStatus({ name });
    mutate(node);
    try {
      await core.replaceNodeStatus({ name, body: node });
      return;
    } catch (err) {
      if ((err as { code?: number }).code !== 409 || attempt >= 20) throw err;
    }
  }
}

async function setBootId(core: CoreV1Api, name: string, bootId: string): Promise<void> {
  await updateNodeStatus(core, name, (node) => {
    if (!node.status?.nodeInfo) throw new EnvError(`node ${name} has no status.nodeInfo`);
    node.status.nodeInfo.bootID = bootId;
  });
}

/** Create the Node objects and start one kwok process per node. */
async function startKwokNodesNow(
  cp: ControlPlane,
  names: string[],
  opts: KwokOptions = {},
): Promise<KwokNodes> {
  const leaseSeconds = opts.leaseDurationSeconds ?? 4;
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  const coord = cp.kubeConfig.makeApiClient(CoordinationV1Api);
  const dir = makeTempDir("kwok");
  const configPath = join(dir, "kwok.yaml");
  // An explicit (empty) config so ~/.kwok/kwok.yaml is never read; kwok's default
  // node and pod stages apply.
  writeFileSync(
    configPath,
    "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {}\n",
  );

  const spawnKwok = (name: string): ManagedProcess =>
    ManagedProcess.spawn({
      name: `kwok-${name}`,
      command: join(BIN, "kwok"),
      dir,
      args: [
        `--config=${configPath}`,
        `--kubeconfig=${cp.kubeconfigPath}`,
        `--manage-single-node=${name}`,
        `--node-lease-duration-seconds=${leaseSeconds}`,
      ],
    });

  const isReady = async (name: string, holder?: (h: string | undefined) => boolean): Promise<boolean> => {
    const node = await core.readNode({ name });
    const ready = node.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
    if (!ready) return false;
    const lease = await coord.readNamespacedLease({ name, namespace: "kube-node-lease" });
    const h = lease.spec?.holderIdentity ?? undefined;
    const renew = lease.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : 0;
    return (holder ? holder(h) : h !== undefined) && Date.now() - renew < leaseSeconds * 1000;
  };

  const handles: KwokNode[] = [];
  const timeout = opts.readyTimeoutMs ?? 30_000;
  try {
    await Promise.all(
      names.map(async (name) => {
        const bootId = randomUUID();
        await core.createNode({ body: kwokNodeObject(name, bootId, opts) });
        // The create call drops status: write it through the status subresource.
        await updateNodeStatus(core, name, (node) => {
          node.status = { ...node.status, ...kwokNodeObject(name, bootId, opts).status };
        });
        let proc = spawnKwok(name);
        const handle: KwokNode = {
          name,
          bootId,
          process: proc,
          kill: async () => {
            await proc.kill();
          },
          freeze: () => proc.signalGroup("SIGSTOP"),
          thaw: () => proc.signalGroup("SIGCONT"),
          restart: async (r = {}) => {
            if (proc.running) await proc.kill();
            let oldHolder: string | undefined;
            try {
              const lease = await coord.readNamespacedLease({ name, namespace: "kube-node-lease" });
              oldHolder = lease.spec?.holderIdentity ?? undefined;
            } catch {
              oldHolder = undefined;
            }
            if (r.reboot ?? true) {
              handle.bootId = randomUUID();
              await setBootId(core, name, handle.bootId);
            }
            proc = spawnKwok(name);
            handle.process = proc;
            if (r.waitReady ?? true) {
              await proc.waitReady(
                () => isReady(name, (h) => h !== undefined && h !== oldHolder),
                timeout + leaseSeconds * 1000,
                200,
              );
            }
          },
          stop: async () => {
            await proc.stop(2000);
          },
        };
        handles.push(handle);
        if (opts.waitReady ?? true) await proc.waitReady(() => isReady(name), timeout, 200);
      }),
    );
  } catch (err) {
    await Promise.all(handles.map((h) => h.stop().catch(() => undefined)));
    removeTempDir(dir);
    throw err instanceof EnvError ? err : new EnvError("kwok nodes failed to start", { cause: err });
  }
  handles.sort((a, b) => names.indexOf(a.name) - names.indexOf(b.name));
  return {
    nodes: handles,
    byName(name: string): KwokNode {
      const n = handles.find((h) => h.name === name);
      if (!n) throw new EnvError(`no kwok node ${name}`);
      return n;
    },
    async stop(): Promise<void> {
      await Promise.all(handles.map((h) => h.stop()));
      await sleep(0);
      removeTempDir(dir);
    },
  };
}

/** Create the Node objects and start one kwok process per node; timed (start-times.ts). */
export function startKwokNodes(
  cp: ControlPlane,
  names: string[],
  opts: KwokOptions = {},
): Promise<KwokNodes> {
  return timedStart("kwok", `${names.length} nodes`, () => startKwokNodesNow(cp, names, opts));
}
