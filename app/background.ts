// The background loops a stage's process runs besides its events and its reconciler, each
// one per replica: confirm and fence keep their planned-work and remediator reads warm, off
// the fencing path; confirm keeps the FencingPolicy's RemediatorConflict and WatchdogsArmed
// conditions current and exports event-source coverage (fastfence_event_source_up) and the
// nodes' watchdog reports (fastfence_watchdog_armed); fence runs the BMC health
// check (fastfence_bmc_up, fastfence_bmc_check_result; FASTFENCE_BMC_HEALTH_INTERVAL_MS, 0
// = off). Part of the composition root (app/host.ts): it only wires adapters to loops and
// returns one stop; it decides nothing and never powers anything.
import type { Clock } from "../core/clock.ts";
import type { KubeMetal3Api } from "../infra/bmc/metal3.ts";
import type { RuntimeConfig } from "../infra/config.ts";
import { startBmcHealthCheck } from "../infra/fence/health.ts";
import type { Kube } from "../infra/kube/client.ts";
import type { NodeOps } from "../infra/kube/nodes.ts";
import type { PlannedReader } from "../infra/kube/planned.ts";
import type { PolicyReader } from "../infra/kube/policy.ts";
import { RemediatorConflictReporter } from "../infra/kube/remediator-status.ts";
import type { RemediatorReader } from "../infra/kube/remediators.ts";
import type { Logger } from "../infra/log.ts";
import type { FunctionMetrics } from "../infra/metrics.ts";
import { startRemediatorReport } from "../infra/runtime/remediator-report.ts";
import { startSourceCoverage } from "../infra/runtime/source-coverage.ts";
import { WatchdogConditionReporter } from "../infra/kube/watchdog-status.ts";
import { startWatchdogReport } from "../infra/runtime/watchdog-report.ts";

export interface BackgroundDeps {
  stage: string;
  config: RuntimeConfig;
  kube: Kube;
  nodes: NodeOps;
  policy: PolicyReader;
  remediators: RemediatorReader;
  planned: PlannedReader;
  metal3: KubeMetal3Api;
  metrics: FunctionMetrics;
  clock: Clock;
  log: Logger;
  /** Loops the host started itself that end with these (fence's heartbeat watch). */
  also?: { stop(): unknown }[];
}

/** Starts the stage's loops (none for most stages); the returned stop ends them all. */
export function startBackground(d: BackgroundDeps): { stop(): Promise<void> } {
  const stops: (() => unknown)[] = (d.also ?? []).map((l) => () => l.stop());
  const policy = (now: number) => d.policy.get(now);
  // The stages that check planned work keep its reads warm, off the fencing path.
  if (d.stage === "confirm" || d.stage === "fence") stops.push(d.planned.keepWarm(d.clock));
  if (d.stage === "confirm") {
    const report = startRemediatorReport({
      reader: d.remediators,
      reporter: new RemediatorConflictReporter(d.kube, {
        component: d.stage,
        instance: d.config.FASTFENCE_REPLICA,
        policy: d.config.FASTFENCE_POLICY,
        log: d.log,
      }),
      nodes: d.nodes,
      clock: d.clock,
      log: d.log,
    });
    const coverage = startSourceCoverage({
      kube: d.kube,
      namespace: d.config.FASTFENCE_NAMESPACE,
      nodes: d.nodes,
      policy,
      metrics: d.metrics,
      clock: d.clock,
      log: d.log,
    });
    const watchdogs = startWatchdogReport({
      kube: d.kube,
      namespace: d.config.FASTFENCE_NAMESPACE,
      nodes: d.nodes,
      reporter: new WatchdogConditionReporter(d.kube, {
        component: d.stage,
        instance: d.config.FASTFENCE_REPLICA,
        policy: d.config.FASTFENCE_POLICY,
        log: d.log,
      }),
      metrics: d.metrics,
      clock: d.clock,
      log: d.log,
    });
    stops.push(report.stop, coverage.stop, watchdogs.stop);
  }
  if (d.stage === "fence" && d.config.FASTFENCE_BMC_HEALTH_INTERVAL_MS > 0) {
    const health = startBmcHealthCheck({
      kube: d.kube,
      secretNamespace: d.config.FASTFENCE_NAMESPACE,
      nodes: d.nodes,
      policy,
      metal3: d.metal3,
      intervalMs: d.config.FASTFENCE_BMC_HEALTH_INTERVAL_MS,
      clock: d.clock,
      log: d.log,
      metrics: d.metrics,
    });
    stops.push(health.stop);
  }
  return { stop: async () => void (await Promise.all(stops.map((s) => s()))) };
}
