// The effects of fence's last look before an off command (functions/fence/last-look.pure.ts
// decides): the fencing replica's own TCP probe of the node's probe address
// (source/tcp-probe.ts), a read of the node's heartbeat Lease and a read of the Node, all at
// once and each bounded by the policy's probe timeout (a look adds at most about that to a
// round). Whatever does not answer in time counts as nothing seen: a missed probe or a late
// or failed read means "still unreachable", never "back". It logs every abandoned round
// with incident and node and counts every look (fastfence_last_look_total). It never sends
// a BMC command and never writes to the API.
import type { Counter } from "prom-client";
import type { LastLookPlan } from "../../core/decision.ts";
import { lastLook, type LookSeen, type LookVerdict } from "../../functions/fence/last-look.pure.ts";
import { tcpProbe } from "../../source/tcp-probe.ts";
import type { Kube } from "../kube/client.ts";
import { heartbeatReadOf, readLease } from "../kube/lease.ts";
import { NodeOps } from "../kube/nodes.ts";
import { forIncident, type Logger } from "../log.ts";

/** The least time the API reads of a look get, whatever the probe timeout (a loaded API server). */
export const LOOK_MIN_READ_MS = 100;

export interface LookDeps {
  kube: Kube;
  /** Where the heartbeat Leases live (the fastfence namespace). */
  namespace: string;
  log?: Logger;
  lastLooks?: Pick<Counter<"result">, "inc">;
  /** The TCP probe (injectable for tests); default source/tcp-probe.ts. */
  probe?: typeof tcpProbe;
}

const UNREAD = "unread" as const;
type Unread = typeof UNREAD;

/** `p`'s value, or UNREAD when it fails or takes longer than `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T | Unread> {
  let t: NodeJS.Timeout | undefined;
  const late = new Promise<Unread>((resolve) => (t = setTimeout(() => resolve(UNREAD), ms)));
  const failed = p.catch((): Unread => UNREAD);
  return Promise.race<T | Unread>([failed, late]).finally(() => clearTimeout(t));
}

/** What the look sees now: the probe and both reads at once, each bounded. */
export async function see(deps: LookDeps, plan: LastLookPlan): Promise<LookSeen> {
  const budget = Math.max(plan.probe?.timeoutMs ?? 0, LOOK_MIN_READ_MS);
  const probe = deps.probe ?? tcpProbe;
  const nodes = new NodeOps(deps.kube);
  const [p, lease, node] = await Promise.all([
    plan.probe
      ? within(probe(plan.probe.host, plan.probe.port, plan.probe.timeoutMs), plan.probe.timeoutMs + 50)
      : Promise.resolve(undefined),
    within(readLease(deps.kube, deps.namespace, plan.heartbeatLease), budget),
    within(nodes.get(plan.node), budget),
  ]);
  return {
    probe: !plan.probe ? "none" : p !== UNREAD && p?.ok ? "answered" : "missed",
    lease: lease === UNREAD ? "unread" : lease && heartbeatReadOf(lease),
    node: node === UNREAD ? "unread" : node && { bootId: node.bootId, ready: node.ready },
  };
}

/** Looks, decides (last-look.pure.ts), logs an abandonment and counts the look. */
export async function lookBeforeOff(
  deps: LookDeps,
  plan: LastLookPlan,
  incident: string,
  level: number,
): Promise<LookVerdict> {
  const seen = await see(deps, plan);
  const v = lastLook(plan, seen, level);
  deps.lastLooks?.inc({ result: v.go ? "go" : v.look.reason });
  if (!v.go && deps.log)
    forIncident(deps.log, incident, plan.node).warn(
      { reason: v.look.reason, level, probe: seen.probe, heartbeat: v.look.heartbeat, back: v.look.back },
      v.message,
    );
  return v;
}
