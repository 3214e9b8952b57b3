// The alarm of the look after the power-off (issue 18) beside the incident's Kubernetes Event
// (reason BMCLied, or WatchdogDidNotReset for a watchdog level's proof, written by
// incident-events.ts): once a status write has recorded a new lie (status.bmcLied grew),
// one error log line with incident, node, level and times, and
// fastfence_bmc_lied_total{level,driver} (driver "watchdog" for the watchdog level). Called after the write succeeded, by the replica
// that wrote it, so each lie is counted once. Never throws, never writes to the API, never
// logs anything secret.
import { BMC_LIED_REASON, WATCHDOG_DID_NOT_RESET_REASON } from "../../core/bmc-lie.ts";
import type { NodeFence, NodeFenceStatus } from "../../core/incident.ts";
import { forIncident, type Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";

export interface LieAlarmDeps {
  log?: Logger;
  metrics?: Partial<Pick<FunctionMetrics, "bmcLied">>;
}

/** Logs and counts every lie `inc` records that `before` did not. */
export function alarmNewLies(before: NodeFenceStatus | undefined, inc: NodeFence, deps: LieAlarmDeps): void {
  const lies = inc.status?.bmcLied ?? [];
  const known = before?.bmcLied?.length ?? 0;
  for (const lie of lies.slice(known)) {
    deps.metrics?.bmcLied?.inc({ level: String(lie.level + 1), driver: lie.driver });
    if (!deps.log) continue;
    const watchdog = lie.driver === "watchdog";
    forIncident(deps.log, inc.metadata.name, inc.spec.nodeName).error(
      {
        reason: watchdog ? WATCHDOG_DID_NOT_RESET_REASON : BMC_LIED_REASON,
        level: lie.level + 1,
        driver: lie.driver,
        readBackAt: lie.readBackAt,
        renewTime: lie.renewTime,
      },
      watchdog
        ? `safety alarm: the watchdog did not reset the node: fence counted it reset by its armed watchdog (level ${lie.level + 1}) at ${lie.readBackAt}, but it renewed its heartbeat at ${lie.renewTime} with the same boot ID; its workloads were released while it ran; escalating`
        : `BMC lied: level ${lie.level + 1} (${lie.driver}) read the node back Off at ${lie.readBackAt}, but it renewed its heartbeat at ${lie.renewTime} with the same boot ID; escalating`,
    );
  }
}
