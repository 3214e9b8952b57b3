// Event-source coverage: every interval, one loop per confirm replica lists the nodes and
// the heartbeat Leases (fastfence-alive-<node>, one list each) and sets
// fastfence_event_source_up{node}: 1 while the node's event source renews its Lease, 0 for
// a Ready node whose Lease is missing or older than its duration plus the policy's
// corroboration.maxClockSkewMs. Such a node has no observer of its own: the nodes it should
// probe have one witness fewer, and its own heartbeat cannot veto a wrong suspicion. Nodes
// that are not Ready drop out (their incident says more). Runs in confirm, which already
// may list both. It reads only and decides nothing; a failed pass keeps the last values.
import type { Clock } from "../../core/clock.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { Kube } from "../kube/client.ts";
import { readObserverInfos } from "../kube/lease.ts";
import type { NodeInfo } from "../kube/nodes.ts";
import type { Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";
import { startPeriodic, type PeriodicLoop } from "./periodic.ts";

export interface SourceCoverageOptions {
  kube: Kube;
  /** Namespace of the heartbeat Leases (the fastfence namespace). */
  namespace: string;
  nodes: { list(): Promise<Pick<NodeInfo, "name" | "ready">[]> };
  policy(now: number): Promise<FencingPolicySpec>;
  metrics: Pick<FunctionMetrics, "eventSourceUp">;
  /** How often, ms. Default 30000: for people and alerts, nothing waits for it. */
  intervalMs?: number;
  clock: Clock;
  log: Logger;
}

export function startSourceCoverage(o: SourceCoverageOptions): PeriodicLoop {
  let shown = new Set<string>();
  return startPeriodic({
    name: "source coverage",
    intervalMs: o.intervalMs ?? 30_000,
    clock: o.clock,
    log: o.log,
    staleMessage: "cannot read nodes or heartbeat Leases; fastfence_event_source_up is not updated",
    body: async (now) => {
      const [policy, nodes, infos] = await Promise.all([
        o.policy(now),
        o.nodes.list(),
        readObserverInfos(o.kube, o.namespace),
      ]);
      const slack = policy.corroboration.maxClockSkewMs;
      const next = new Set<string>();
      for (const n of nodes) {
        if (n.ready !== "True") continue;
        const info = infos[n.name];
        const renewed = info?.renewTime ? Date.parse(info.renewTime) : NaN;
        const fresh = Number.isFinite(renewed) && now - renewed <= (info?.durationMs ?? 0) + slack;
        o.metrics.eventSourceUp.set({ node: n.name }, fresh ? 1 : 0);
        next.add(n.name);
      }
      for (const name of shown) if (!next.has(name)) o.metrics.eventSourceUp.remove({ node: name });
      shown = next;
    },
  });
}
