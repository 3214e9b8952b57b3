// Puts a leader-elected control-plane component's leadership on a chosen node of the compact
// plane, for bench trials whose victim must hold several Leases at once (leadership is
// otherwise wherever chance left it). Without two leaders at any moment: every other
// replica of the component is frozen (SIGSTOP), the Lease is released as client-go releases
// it (holder cleared, duration 1 s, guarded by resourceVersion), the chosen node's replica
// takes it at its next retry, then the frozen old leader is killed — never resumed, as it
// would still act as leader until its renew deadline — and the node's launcher restarts it
// as a standby, as a kubelet restarts a static pod; the other frozen standbys resume. An
// arrangement step before a trial, never during one; it touches only these Leases and the
// processes of this component.
import { readFileSync } from "node:fs";
import { MicroTime } from "../infra/kube/lease.ts";
import { membersOf } from "./compact-plane.ts";
import { leaseHolder, nodeOfHolder } from "./cp-status.ts";
import type { Lab } from "./lab.ts";
import { signalPids } from "./state.ts";
import { nodeProcesses } from "./topology.ts";
import type { LabNode } from "./types.ts";

export interface Elected {
  namespace: string;
  lease: string;
  /** Whether a process's argv is one of this component's replicas. */
  is: (argv: string[]) => boolean;
}

const binary = (name: string) => (argv: string[]) => (argv[0] ?? "").endsWith(`/${name}`);

/** The lab's leader-elected components, by Lease (lab/compact-plane.ts starts them). */
export const ELECTED: Readonly<Record<string, Elected>> = {
  "kube-controller-manager": {
    namespace: "kube-system",
    lease: "kube-controller-manager",
    is: binary("kube-controller-manager"),
  },
  "kube-scheduler": { namespace: "kube-system", lease: "kube-scheduler", is: binary("kube-scheduler") },
  "virt-controller": {
    namespace: "kubevirt",
    lease: "virt-controller",
    is: (argv) => (argv[1] ?? "").endsWith("/vm-controller-main.ts"),
  },
};

/** The pids of `c`'s replica on node `x` (one, or none while its launcher restarts it). */
export function replicaPids(x: LabNode, c: Elected): number[] {
  return nodeProcesses(x.netns).others.filter((pid) => {
    try {
      return c.is(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0"));
    } catch {
      return false; // gone
    }
  });
}

/**
 * Leadership of `component` on `node` within `waitMs` (the component's retry period, jittered,
 * plus start-up slack). Resolves with how long it took (0: it was there already); rejects
 * naming what failed, after resuming every replica it froze.
 */
export async function placeLeader(
  lab: Lab,
  component: string,
  node: string,
  waitMs: number,
): Promise<number> {
  const c = ELECTED[component];
  if (!c) throw new Error(`no leader-elected component ${component} (${Object.keys(ELECTED).join(", ")})`);
  const t0 = Date.now();
  if ((await leaseHolder(lab.coord, c.lease, lab.nodes, c.namespace)) === node) return 0;
  const target = lab.nodes.find((x) => x.name === node);
  if (!target || replicaPids(target, c).length === 0) throw new Error(`${node} runs no ${component} replica`);
  const others = membersOf(lab.nodes).filter((x) => x.name !== node);
  const frozen = new Map(others.map((x) => [x.name, replicaPids(x, c)]));
  signalPids([...frozen.values()].flat(), "SIGSTOP");
  let oldHolder: string | undefined;
  try {
    const lease = await lab.coord.readNamespacedLease({ name: c.lease, namespace: c.namespace });
    oldHolder = nodeOfHolder(lease.spec?.holderIdentity, lab.nodes);
    const now = new MicroTime();
    // client-go's release; the resourceVersion guards against a renewal since the read
    await lab.coord.replaceNamespacedLease({
      name: c.lease,
      namespace: c.namespace,
      body: {
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: "",
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
        },
      },
    });
    for (;;) {
      if ((await leaseHolder(lab.coord, c.lease, lab.nodes, c.namespace)) === node) break;
      if (Date.now() - t0 > waitMs)
        throw new Error(`${component}: ${node} did not take the Lease within ${waitMs} ms`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    // The old leader is killed, never resumed; the standbys go on.
    const killed = oldHolder ? (frozen.get(oldHolder) ?? []) : [];
    signalPids(killed, "SIGKILL");
    signalPids(
      [...frozen.values()].flat().filter((p) => !killed.includes(p)),
      "SIGCONT",
    );
  }
  return Date.now() - t0;
}
