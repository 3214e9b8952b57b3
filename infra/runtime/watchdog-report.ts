// Keeps the FencingPolicy's WatchdogsArmed condition and fastfence_watchdog_armed{node}
// true to the cluster: every interval, one loop per confirm replica lists the nodes and the
// watchdog reports on the heartbeat Leases (infra/kube/watchdog-status.ts), summarises them
// (core/watchdog-status.ts) and hands that to the condition reporter, which writes only a
// change. It reads and reports only: whether a node may be fenced by its watchdog is decided
// per incident, from the fencing replica's own watch (core/watchdog.ts watchdogVerdict).
import type { Clock } from "../../core/clock.ts";
import { summariseWatchdogs } from "../../core/watchdog-status.ts";
import type { Kube } from "../kube/client.ts";
import type { NodeInfo } from "../kube/nodes.ts";
import { readWatchdogReports, type WatchdogConditionReporter } from "../kube/watchdog-status.ts";
import type { Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";
import { startPeriodic, type PeriodicLoop } from "./periodic.ts";

export interface WatchdogReportOptions {
  kube: Kube;
  /** Namespace of the heartbeat Leases (the fastfence namespace). */
  namespace: string;
  nodes: { list(): Promise<Pick<NodeInfo, "name" | "ready">[]> };
  reporter: Pick<WatchdogConditionReporter, "report">;
  metrics: Pick<FunctionMetrics, "watchdogArmed">;
  /** How often, ms. Default 30000: for people and alerts, nothing waits for it. */
  intervalMs?: number;
  clock: Clock;
  log: Logger;
}

/** One pass (exported for tests): read, summarise, set the gauge, report. */
export async function watchdogReportPass(
  o: Omit<WatchdogReportOptions, "intervalMs" | "clock" | "log">,
  now: number,
  shown: Set<string>,
): Promise<Set<string>> {
  const [nodes, reports] = await Promise.all([o.nodes.list(), readWatchdogReports(o.kube, o.namespace)]);
  const summary = summariseWatchdogs(
    nodes.map((n) => ({ node: n.name, ready: n.ready === "True", report: reports.get(n.name) })),
  );
  for (const [node, v] of summary.armed) o.metrics.watchdogArmed.set({ node }, v);
  for (const node of shown) if (!summary.armed.has(node)) o.metrics.watchdogArmed.remove({ node });
  await o.reporter.report(summary, now);
  return new Set(summary.armed.keys());
}

export function startWatchdogReport(o: WatchdogReportOptions): PeriodicLoop {
  let shown = new Set<string>();
  return startPeriodic({
    name: "watchdog report",
    intervalMs: o.intervalMs ?? 30_000,
    clock: o.clock,
    log: o.log,
    staleMessage: "cannot read nodes or watchdog reports; WatchdogsArmed is not updated",
    body: async (now) => void (shown = await watchdogReportPass(o, now, shown)),
  });
}
