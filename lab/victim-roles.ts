// Which node a bench crash trial takes on the compact control plane, by the role it plays
// there: the etcd leader, the holder of the controller manager's and the scheduler's Leases,
// or whichever node the Kafka choice gives (kafka.ts chooseVictim); and which roles the
// victim held just before the fault, read from etcd and the Leases (cp-status.ts). To make
// the etcd leader also the active KRaft controller it asks etcd to hand its leadership over
// (etcd's MoveLeader); a Lease trial puts every leader-elected component's leadership on its
// victim first (lease-placement.ts). Never fences and never touches fastfence.
import { request } from "node:http";
import { compactStatus, etcdStatus } from "./cp-status.ts";
import { ETCD_CLIENT_PORT, MEMBERS, membersOf, settingsOf, VM_CONTROLLER_REPLICAS } from "./compact-plane.ts";
import { JITTER_FACTOR, VIRT_CONTROLLER_DEFAULTS } from "../harness/kubevirt/leader-election.pure.ts";
import { placeLeader } from "./lease-placement.ts";
import type { Lab } from "./lab.ts";

export type VictimRole = "etcd-leader" | "leases" | "any";

export interface RolePlan {
  role: VictimRole;
  /** The victim should also be the active KRaft controller's node. */
  kraftController: boolean;
}

/** Control-plane leaderships a node held just before the fault. */
export interface HeldRoles {
  etcdLeader: boolean;
  controllerManager: boolean;
  scheduler: boolean;
  /** kubevirt/virt-controller (`lab up --vm-controller`). */
  vmController: boolean;
  kraftController: boolean;
}

/**
 * The role of each of `k` crash trials: the etcd-leader and leases trials alternate (the
 * longer list's rest last) and are spread evenly over the k; `controller` of them want the
 * KRaft controller too — the first etcd-leader trial, the first leases trial, then the
 * other trials in order. More role trials than k: the first k of them.
 */
export function planRoles(
  k: number,
  want: { etcdLeader: number; leases: number; controller: number },
): RolePlan[] {
  const roles: VictimRole[] = [];
  for (let i = 0; i < Math.max(want.etcdLeader, want.leases); i++) {
    if (i < want.etcdLeader) roles.push("etcd-leader");
    if (i < want.leases) roles.push("leases");
  }
  const r = Math.min(roles.length, k);
  const plan: RolePlan[] = Array.from({ length: k }, () => ({ role: "any", kraftController: false }));
  for (let j = 0; j < r; j++) plan[Math.floor((j * k) / r)]!.role = roles[j]!;
  let c = want.controller;
  const want1 = (p: RolePlan | undefined) => {
    if (!p || c === 0 || p.kraftController) return;
    p.kraftController = true;
    c--;
  };
  want1(plan.find((p) => p.role === "etcd-leader"));
  want1(plan.find((p) => p.role === "leases"));
  for (const p of plan) want1(p);
  return plan;
}

/** A class name for a trial's held roles, for per-role percentiles. */
export function roleClass(h: HeldRoles): string {
  const leases =
    h.controllerManager && h.scheduler
      ? "both Leases"
      : h.scheduler
        ? "scheduler Lease"
        : h.controllerManager
          ? "controller-manager Lease"
          : "";
  const parts = [h.etcdLeader ? "etcd leader" : "", leases].filter(Boolean);
  return parts.length ? parts.join(" + ") : "no control-plane leader";
}

export async function heldRoles(lab: Lab, node: string, kraftController: boolean): Promise<HeldRoles> {
  const s = await compactStatus(lab.nodes, lab.coord);
  return {
    etcdLeader: s.etcdLeader === node,
    controllerManager: s.controllerManagerLeader === node,
    scheduler: s.schedulerLeader === node,
    vmController: s.vmControllerLeader === node,
    kraftController,
  };
}

/** A trial's victim and whether it is the active KRaft controller's node. */
export interface RoleChoice {
  name: string;
  activeController: boolean;
}

/** The victim for `plan`, chosen (and the etcd leader moved, when asked) just before the trial. */
export async function chooseByRole(lab: Lab, plan: RolePlan, log: (l: string) => void): Promise<RoleChoice> {
  const controller = (await lab.chooseVictim(true)).name;
  const choice = (name: string): RoleChoice => ({ name, activeController: name === controller });
  if (plan.role === "any") return choice((await lab.chooseVictim(plan.kraftController)).name);
  const s = await compactStatus(lab.nodes, lab.coord);
  if (plan.role === "etcd-leader") {
    const to = plan.kraftController ? controller : s.etcdLeader;
    if (!to) throw new Error("no etcd leader to take");
    if (s.etcdLeader !== to) {
      await moveEtcdLeader(lab, to);
      log(`  etcd leadership moved from ${s.etcdLeader ?? "(none)"} to ${to} (the KRaft controller's node)`);
    }
    return choice(to);
  }
  // leases: every leader-elected component's leadership put on one node (lease-placement.ts):
  // the KRaft controller's when asked and it runs a replica of each, else the scheduler
  // leader's (the slowest Lease to move), else the first that runs them all
  const vm = lab.opts.vmController === true;
  const able = membersOf(lab.nodes)
    .slice(0, vm ? VM_CONTROLLER_REPLICAS : MEMBERS)
    .map((x) => x.name);
  const to =
    (plan.kraftController && able.includes(controller) ? controller : undefined) ??
    (s.schedulerLeader && able.includes(s.schedulerLeader) ? s.schedulerLeader : able[0]!);
  const retries = settingsOf(lab.opts);
  const components: [string, number][] = [
    ["kube-scheduler", retries.scheduler.retryS],
    ["kube-controller-manager", retries.controllerManager.retryS],
    ...(vm
      ? ([["virt-controller", VIRT_CONTROLLER_DEFAULTS.retryPeriodMs / 1000]] as [string, number][])
      : []),
  ];
  for (const [component, retryS] of components) {
    // the standby's next retry (client-go jitters it up to (1 + 1.2)×) and slack
    const ms = await placeLeader(lab, component, to, retryS * 1000 * (1 + JITTER_FACTOR) + 10_000);
    if (ms > 0) log(`  ${component} leadership moved to ${to} in ${ms} ms`);
  }
  return choice(to);
}

/** Asks the etcd leader to hand leadership to `to`'s member and waits until it has (10 s). */
export async function moveEtcdLeader(lab: Lab, to: string): Promise<void> {
  const members = membersOf(lab.nodes);
  const st = await Promise.all(members.map((m) => etcdStatus(m.ip)));
  const target = st[members.findIndex((m) => m.name === to)];
  const leaderAt = members.findIndex((_, i) => st[i] && st[i].id === st[i].leader);
  if (!target || leaderAt < 0)
    throw new Error(`moving etcd leadership to ${to}: no answer from it or no leader`);
  const body = JSON.stringify({ targetID: target.id });
  await new Promise<void>((resolve, reject) => {
    const req = request(
      {
        host: members[leaderAt]!.ip,
        port: ETCD_CLIENT_PORT,
        path: "/v3/maintenance/transfer-leadership",
        method: "POST",
        timeout: 5000,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (r) => {
        let out = "";
        r.on("data", (d: Buffer) => (out += d.toString()));
        r.on("end", () =>
          r.statusCode === 200
            ? resolve()
            : reject(new Error(`etcd MoveLeader to ${to}: ${r.statusCode} ${out}`)),
        );
      },
    );
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error(`etcd MoveLeader to ${to}: no answer in 5 s`)));
    req.end(body);
  });
  const end = Date.now() + 10_000;
  for (;;) {
    const now = await etcdStatus(members.find((m) => m.name === to)!.ip);
    if (now && now.id === now.leader) return;
    if (Date.now() > end) throw new Error(`etcd leadership did not reach ${to} within 10 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The highest raft term any member reports: each election raises it by one (pre-vote on). */
export async function etcdTerm(lab: Lab): Promise<number | undefined> {
  const st = await Promise.all(membersOf(lab.nodes).map((m) => etcdStatus(m.ip)));
  const terms = st.flatMap((s) => (s?.raftTerm ? [Number(s.raftTerm)] : []));
  return terms.length ? Math.max(...terms) : undefined;
}
