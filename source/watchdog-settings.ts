// The watchdog agent's settings from the event source's environment (infra/config.ts
// FASTFENCE_WATCHDOG_*), checked against the policy's heartbeat interval: a grace shorter
// than two heartbeats would let one slow renewal stop the petting, and a pet interval not
// well under the timeout could let a healthy node reset. A bad combination is an error
// naming the variable, never a silent default. It opens nothing.
import { InvalidInputError } from "../core/errors.ts";
import type { RuntimeConfig } from "../infra/config.ts";
import type { WatchdogAgentConfig } from "./watchdog-agent.ts";

/** The agent's config, or undefined when FASTFENCE_WATCHDOG_DEVICE is unset (no watchdog). */
export function watchdogAgentConfig(
  c: Pick<
    RuntimeConfig,
    | "FASTFENCE_WATCHDOG_DEVICE"
    | "FASTFENCE_WATCHDOG_TIMEOUT_MS"
    | "FASTFENCE_WATCHDOG_RENEW_GRACE_MS"
    | "FASTFENCE_WATCHDOG_PET_INTERVAL_MS"
  >,
  heartbeatIntervalMs: number,
): WatchdogAgentConfig | undefined {
  if (!c.FASTFENCE_WATCHDOG_DEVICE) return undefined;
  const issues: string[] = [];
  if (c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS < 2 * heartbeatIntervalMs)
    issues.push(
      `FASTFENCE_WATCHDOG_RENEW_GRACE_MS: must be at least twice the policy's probe.heartbeatIntervalMs (${c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS} < 2 × ${heartbeatIntervalMs})`,
    );
  if (c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS > c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS)
    issues.push(
      `FASTFENCE_WATCHDOG_PET_INTERVAL_MS: must not exceed FASTFENCE_WATCHDOG_RENEW_GRACE_MS (${c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS} > ${c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS})`,
    );
  const t = c.FASTFENCE_WATCHDOG_TIMEOUT_MS;
  if (t !== undefined && 3 * c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS > t)
    issues.push(
      `FASTFENCE_WATCHDOG_PET_INTERVAL_MS: must be at most a third of FASTFENCE_WATCHDOG_TIMEOUT_MS (${c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS} > ${t} / 3)`,
    );
  if (issues.length) throw new InvalidInputError("FF_INVALID_CONFIG", "invalid watchdog settings", issues);
  return {
    devicePath: c.FASTFENCE_WATCHDOG_DEVICE,
    ...(t !== undefined ? { timeoutMs: t } : {}),
    renewGraceMs: c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS,
    petIntervalMs: c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS,
  };
}
