// Keeps the FencingPolicy's RemediatorConflict condition true to the cluster: every
// interval, one replica's loop lists the nodes, asks which other remediators select which
// of them (infra/kube/remediators.ts) and hands that to the condition reporter, which
// writes only a change (resourceVersion-guarded, so replicas doing the same agree). Runs
// in the confirm stage's processes. It never refuses a node itself: confirm and fence do
// that per incident (core/planned.ts OtherRemediator), from their own reads.
import type { Clock } from "../../core/clock.ts";
import type { NodeOps } from "../kube/nodes.ts";
import type { RemediatorConflictReporter } from "../kube/remediator-status.ts";
import type { RemediatorReader } from "../kube/remediators.ts";
import type { Logger } from "../log.ts";
import { startPeriodic, type PeriodicLoop } from "./periodic.ts";

export interface RemediatorReportOptions {
  reader: RemediatorReader;
  reporter: RemediatorConflictReporter;
  nodes: Pick<NodeOps, "list">;
  /**
   * How often, ms. Default 30000: the condition is for people and alerts; the refusal of
   * a node does not wait for it.
   */
  intervalMs?: number;
  clock: Clock;
  log: Logger;
}

export function startRemediatorReport(o: RemediatorReportOptions): PeriodicLoop {
  return startPeriodic({
    name: "remediator report",
    intervalMs: o.intervalMs ?? 30_000,
    clock: o.clock,
    log: o.log,
    staleMessage: "cannot read the other remediators; the RemediatorConflict condition is not updated",
    body: async (now) => {
      const nodes = await o.nodes.list();
      const selections = await o.reader.selections(nodes, now);
      await o.reporter.report(selections, now);
    },
  });
}
