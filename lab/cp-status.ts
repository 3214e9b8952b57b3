// What the compact control plane is doing, read from its members: each node's etcd member
// (up, and whether it is the leader, from etcd's own status), its API server (/readyz),
// whether its controller manager and scheduler run, and who holds their Leases
// (kube-system/kube-controller-manager and kube-scheduler, whose holder identities start
// with the node's hostname; also kubevirt/virt-controller, the lab's VM controller), and how
// many leader changes each member saw. Also the bring-up gates: the plane answering, and the
// "seeded" marker the nodes' launchers wait for. Reads only; never changes a member.
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { readFileSync } from "node:fs";
import type { CoordinationV1Api, CoreV1Api } from "@kubernetes/client-node";
import { waitUntil } from "../harness/env/wait.ts";
import { ETCD_CLIENT_PORT, NODE_API_PORT, membersOf } from "./compact-plane.ts";
import { nodeProcesses } from "./topology.ts";
import type { LabNode } from "./types.ts";

/** The launchers wait for this ConfigMap before starting a node's kubelet work (node-launch.ts gate). */
export const SEEDED_GATE = "/api/v1/namespaces/kube-system/configmaps/fflab-seeded";

export interface MemberStatus {
  node: string;
  etcd: { up: boolean; id?: string; leader: boolean; raftTerm?: string; leaderChanges?: number };
  apiserver: { ready: boolean };
  controllerManager: { running: boolean; leader: boolean };
  scheduler: { running: boolean; leader: boolean };
}

export interface CompactStatus {
  members: MemberStatus[];
  etcdLeader?: string;
  controllerManagerLeader?: string;
  schedulerLeader?: string;
  /** The node of kubevirt/virt-controller's holder (`lab up --vm-controller`). */
  vmControllerLeader?: string;
  /** Members whose etcd answers (quorum needs 2 of 3). */
  etcdUp: number;
}

/** etcd's /v3/maintenance/status (its gRPC gateway) on the node's client address. */
export function etcdStatus(
  ip: string,
  timeoutMs = 1000,
): Promise<{ id: string; leader: string; raftTerm: string } | undefined> {
  return new Promise((res) => {
    const body = "{}";
    const req = httpRequest(
      {
        host: ip,
        port: ETCD_CLIENT_PORT,
        path: "/v3/maintenance/status",
        method: "POST",
        timeout: timeoutMs,
        headers: { "content-type": "application/json", "content-length": body.length },
      },
      (r) => {
        let out = "";
        r.on("data", (d: Buffer) => (out += d.toString()));
        r.on("end", () => {
          try {
            const j = JSON.parse(out) as {
              header?: { member_id?: string };
              leader?: string;
              raftTerm?: string;
            };
            if (j.header?.member_id && j.leader)
              return res({ id: j.header.member_id, leader: j.leader, raftTerm: j.raftTerm ?? "" });
          } catch {
            // not JSON: not a working member
          }
          res(undefined);
        });
      },
    );
    req.on("error", () => res(undefined));
    req.on("timeout", () => req.destroy());
    req.end(body);
  });
}

/** etcd_server_leader_changes_seen_total of the member (its /metrics), if it answers. */
export function etcdLeaderChanges(ip: string, timeoutMs = 1000): Promise<number | undefined> {
  return new Promise((res) => {
    const req = httpRequest(
      { host: ip, port: ETCD_CLIENT_PORT, path: "/metrics", timeout: timeoutMs },
      (r) => {
        let out = "";
        r.on("data", (d: Buffer) => (out += d.toString()));
        r.on("end", () => {
          const m = /^etcd_server_leader_changes_seen_total (\d+)/m.exec(out);
          res(m ? Number(m[1]) : undefined);
        });
      },
    );
    req.on("error", () => res(undefined));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

/** GET https://ip:6443/readyz → 200 (anonymous). */
export function apiReady(ip: string, timeoutMs = 1000): Promise<boolean> {
  return new Promise((res) => {
    const req = httpsRequest(
      {
        host: ip,
        port: NODE_API_PORT,
        path: "/readyz",
        rejectUnauthorized: false,
        timeout: timeoutMs,
        agent: false,
      },
      (r) => {
        r.resume();
        res(r.statusCode === 200);
      },
    );
    req.on("error", () => res(false));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

/** Whether a process whose argv[0] ends with `bin` runs in the node. */
function runs(x: LabNode, bin: string): boolean {
  return nodeProcesses(x.netns).others.some((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0]!.endsWith(`/${bin}`);
    } catch {
      return false;
    }
  });
}

/** The node whose hostname starts a holder identity (`<host>_<uuid>`), if any. */
export function nodeOfHolder(holder: string | undefined, nodes: readonly LabNode[]): string | undefined {
  return nodes.find((x) => (holder ?? "").startsWith(`${x.name}_`))?.name;
}

/** The node whose hostname starts the Lease's holder identity, if it is still held (and readable). */
export async function leaseHolder(
  coord: CoordinationV1Api,
  name: string,
  nodes: LabNode[],
  namespace = "kube-system",
): Promise<string | undefined> {
  try {
    const l = await coord.readNamespacedLease({ name, namespace });
    return nodeOfHolder(l.spec?.holderIdentity, nodes);
  } catch {
    return undefined;
  }
}

export async function compactStatus(nodes: LabNode[], coord: CoordinationV1Api): Promise<CompactStatus> {
  const members = membersOf(nodes);
  const [etcd, changes, ready, kcm, sched, vmc] = await Promise.all([
    Promise.all(members.map((x) => etcdStatus(x.ip))),
    Promise.all(members.map((x) => etcdLeaderChanges(x.ip))),
    Promise.all(members.map((x) => apiReady(x.ip))),
    leaseHolder(coord, "kube-controller-manager", members),
    leaseHolder(coord, "kube-scheduler", members),
    leaseHolder(coord, "virt-controller", members, "kubevirt"),
  ]);
  const out: MemberStatus[] = members.map((x, i) => {
    const e = etcd[i];
    return {
      node: x.name,
      etcd: e
        ? {
            up: true,
            id: e.id,
            leader: e.id === e.leader,
            raftTerm: e.raftTerm,
            // since the member's start: 1 is its first election
            ...(changes[i] !== undefined ? { leaderChanges: changes[i] } : {}),
          }
        : { up: false, leader: false },
      apiserver: { ready: ready[i]! },
      controllerManager: { running: runs(x, "kube-controller-manager"), leader: kcm === x.name },
      scheduler: { running: runs(x, "kube-scheduler"), leader: sched === x.name },
    };
  });
  const etcdLeader = out.find((m) => m.etcd.leader)?.node;
  return {
    members: out,
    ...(etcdLeader ? { etcdLeader } : {}),
    ...(kcm ? { controllerManagerLeader: kcm } : {}),
    ...(sched ? { schedulerLeader: sched } : {}),
    ...(vmc ? { vmControllerLeader: vmc } : {}),
    etcdUp: out.filter((m) => m.etcd.up).length,
  };
}

/** Every member's API server ready and the controller manager's controllers running. */
export async function waitCompactPlane(
  lab: { nodes: LabNode[]; core: CoreV1Api },
  timeoutMs: number,
): Promise<void> {
  const members = membersOf(lab.nodes);
  await waitUntil(
    "compact control plane ready",
    async () => {
      const ready = await Promise.all(members.map((x) => apiReady(x.ip)));
      const not = members.filter((_, i) => !ready[i]).map((x) => x.name);
      if (not.length) throw new Error(`API server not ready on ${not.join(", ")}`);
      return true;
    },
    timeoutMs,
    500,
    "lab: ",
  );
  await waitUntil(
    "controller manager's controllers",
    async () => (await lab.core.listNamespacedServiceAccount({ namespace: "default" })).items.length > 0,
    timeoutMs,
    500,
    "lab: ",
  );
}

/** Let the launchers go on (SEEDED_GATE). */
export async function markSeeded(core: CoreV1Api): Promise<void> {
  await core.createNamespacedConfigMap({
    namespace: "kube-system",
    body: { metadata: { name: "fflab-seeded" }, data: { at: new Date().toISOString() } },
  });
}
