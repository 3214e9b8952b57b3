// The event source follows the FencingPolicy as the stages do (issue "defaults that are safe
// and say what they do", item 3): sourceSettings picks the fields the event source uses,
// settingsChanges names what an edit changed, and startPolicyFollower re-reads the policy
// every POLICY_RELOAD_MS (the stages' PolicyReader cache, infra/kube/policy.ts) through the
// same reader and hands it to the running event source (EventSource.applyPolicy), so an
// edit of spec.probe.* reaches the event source and the stages within one period of each
// other, without a restart. An unreadable or invalid policy changes nothing: the reader
// keeps the last valid one in force and says why (log, metric, the policy's Valid
// condition). It decides nothing itself and never stops the event source.
import type { Clock } from "../core/clock.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import { POLICY_RELOAD_MS } from "../infra/kube/policy.ts";
import type { Logger } from "../infra/log.ts";
import { startPeriodic, type PeriodicLoop } from "../infra/runtime/periodic.ts";

/** What the event source takes from the policy, besides the watchdog's node entries. */
export interface SourceSettings {
  probe: FencingPolicySpec["probe"];
  leaseStaleMs: number;
}

export function sourceSettings(policy: FencingPolicySpec): SourceSettings {
  return { probe: { ...policy.probe }, leaseStaleMs: policy.suspicion.leaseStaleMs };
}

/** The policy fields that differ between two settings ("probe.intervalMs", "suspicion.leaseStaleMs"). */
export function settingsChanges(was: SourceSettings, now: SourceSettings): string[] {
  const changed = (Object.keys(now.probe) as (keyof SourceSettings["probe"])[])
    .filter((k) => was.probe[k] !== now.probe[k])
    .map((k) => `probe.${k}`);
  if (was.leaseStaleMs !== now.leaseStaleMs) changed.push("suspicion.leaseStaleMs");
  return changed;
}

/**
 * Re-reads the policy every `periodMs` (default POLICY_RELOAD_MS) and applies it to the
 * event source. `read` is a PolicyReader's get (its cache is at most periodMs old).
 */
export function startPolicyFollower(o: {
  read: (now: number) => Promise<FencingPolicySpec>;
  source: { applyPolicy(policy: FencingPolicySpec): string[] };
  clock: Clock;
  log: Logger;
  periodMs?: number;
}): PeriodicLoop {
  return startPeriodic({
    name: "event-source policy follower",
    intervalMs: o.periodMs ?? POLICY_RELOAD_MS,
    clock: o.clock,
    log: o.log,
    staleMessage: "could not re-read the FencingPolicy; the event source keeps the settings it has",
    body: async (now) => void o.source.applyPolicy(await o.read(now)),
  });
}
