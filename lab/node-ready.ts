// Which lab nodes and node agents are not ready yet, and why, for the lab's start-up waits
// to name in their timeouts: each Node with its Ready condition's status, reason and last
// heartbeat; each agent with its step, pending replicas and last error; and, once ready,
// where each agent's start went. Pure: reads nothing, decides nothing else.
import type { V1Node } from "@kubernetes/client-node";
import type { AgentStatus } from "./types.ts";

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

/** "node-b: starting replicas (waiting for fence) [last error: …]" per agent not ready; empty when all are. */
export function agentsNotReady(agents: readonly { name: string; status?: AgentStatus }[]): string[] {
  return agents
    .filter((a) => a.status?.ready !== true)
    .map(({ name, status: s }) => {
      const pending = s?.pending?.length ? ` (waiting for ${s.pending.join(", ")})` : "";
      const last = s?.lastError ? ` [last error: ${s.lastError}]` : "";
      return `${name}: ${s?.step ?? "not started"}${pending}${last}`;
    });
}

/** "node-a 41.2 s (starting 3.0 s, creating topics 12.1 s, …)": where a ready agent's start went. */
export function agentStartLine(name: string, s: AgentStatus | undefined): string {
  if (!s?.readyAt) return `${name} not ready`;
  const total = (Date.parse(s.readyAt) - Date.parse(s.startedAt)) / 1000;
  const steps = (s.steps ?? []).map((x) => `${x.step} ${(x.ms / 1000).toFixed(1)} s`).join(", ");
  return `${name} ${total.toFixed(1)} s${steps ? ` (${steps})` : ""}`;
}
