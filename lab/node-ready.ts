// Which lab nodes are not Ready yet, and why, from their Node objects as listed: each with
// its Ready condition's status, reason and last heartbeat, for the lab's start-up wait to
// name in its timeout. Pure: reads nothing, decides nothing else.
import type { V1Node } from "@kubernetes/client-node";

/** "node-b False (KubeletNotReady, heartbeat …)" per node not Ready; empty when all are. */
export function nodesNotReady(items: readonly V1Node[], names: readonly string[]): string[] {
  const out: string[] = [];
  for (const name of names) {
    const o = items.find((k) => k.metadata?.name === name);
    const c = o?.status?.conditions?.find((k) => k.type === "Ready");
    if (c?.status === "True") continue;
    if (!o) out.push(`${name} no Node object`);
    else if (!c) out.push(`${name} no Ready condition`);
    else {
      const beat = c.lastHeartbeatTime ? new Date(c.lastHeartbeatTime).toISOString() : "never";
      out.push(`${name} ${c.status} (${c.reason ?? "no reason"}, heartbeat ${beat})`);
    }
  }
  return out;
}
