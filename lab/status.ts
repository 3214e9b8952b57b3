// `fastfence lab status`: each node (address, BMC, power, link, processes, Ready, boot ID,
// taints, agent), the API endpoint and its backends, and with the compact plane each
// member's etcd (leader?), API server (ready?), controller manager and scheduler (Lease
// holder?) (cp-status.ts), and how many Kafka brokers answer. An agent counts as ready
// only when it said so since its node's last power-on. Reads only.
import { compactStatus, type MemberStatus } from "./cp-status.ts";
import type { Lab } from "./lab.ts";
import { describeLink } from "./link-state.ts";
import { HOST_IP } from "./state.ts";
import { agentReadySinceBoot } from "./trial-reset.ts";
import { API_PORT } from "./types.ts";

/** Brokers in the cluster's metadata, or null when none answered within the lab's timeouts. */
async function brokersUp(lab: Lab): Promise<number | null> {
  return lab.kafkaMeta().then(
    (m) => m.brokers,
    () => null,
  );
}

export async function labStatus(lab: Lab): Promise<Record<string, unknown>> {
  const compact = lab.opts.controlPlane === "compact";
  const nodes = lab.cp
    ? await lab.core.listNode().then(
        (l) => l.items,
        () => [],
      )
    : [];
  const [cp, brokers] = await Promise.all([
    compact && lab.cp ? compactStatus(lab.nodes, lab.coord) : undefined,
    lab.opts.fastfence === false ? null : brokersUp(lab),
  ]);
  const out = [];
  for (const x of lab.nodes) {
    const o = nodes.find((k) => k.metadata?.name === x.name);
    const p = lab.nodePids(x.name);
    const m: MemberStatus | undefined = cp?.members.find((c) => c.node === x.name);
    out.push({
      name: x.name,
      ip: x.ip,
      bmc: `${x.bmc} ${HOST_IP}:${x.bmcPort}`,
      power: await lab.powerState(x.name),
      link: describeLink(x.link),
      processes: p.others.length + (p.launcher ? 1 : 0),
      ready: o?.status?.conditions?.find((c) => c.type === "Ready")?.status ?? "?",
      bootId: o?.status?.nodeInfo?.bootID?.slice(0, 8),
      taints: (o?.spec?.taints ?? []).map((t) => t.key),
      agent: agentReadySinceBoot(lab.agentStatus(x), x.powerLog) ? "ready" : "-",
      ...(m
        ? {
            etcd: m.etcd,
            apiserver: m.apiserver,
            controllerManager: {
              ...m.controllerManager,
              role: m.controllerManager.leader ? "leader" : "standby",
            },
            scheduler: { ...m.scheduler, role: m.scheduler.leader ? "leader" : "standby" },
          }
        : {}),
    });
  }
  const backends = lab.lb?.backends() ?? [];
  return {
    phase: lab.state.phase,
    controlPlane: compact ? `compact (${lab.opts.leaderElection ?? "openshift"} settings)` : "host",
    api: compact
      ? `https://${HOST_IP}:${API_PORT} (load balancer over ${backends.map((b) => `${b.name} ${b.up ? "up" : "down"}`).join(", ")})`
      : `https://${HOST_IP}:${API_PORT} (relay to ${lab.cp?.server})`,
    ...(cp
      ? {
          etcdLeader: cp.etcdLeader ?? null,
          etcdMembersUp: cp.etcdUp,
          controllerManagerLeader: cp.controllerManagerLeader ?? null,
          schedulerLeader: cp.schedulerLeader ?? null,
          ...(lab.opts.vmController ? { vmControllerLeader: cp.vmControllerLeader ?? null } : {}),
          apiBackends: backends.map((b) => ({ node: b.name, up: b.up, connections: b.connections })),
        }
      : {}),
    kubeconfig: lab.cp?.kubeconfigPath,
    brokers: lab.brokers,
    brokersUp: brokers,
    nodes: out,
  };
}
