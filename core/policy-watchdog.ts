// The FencingPolicy's watchdog level (issue 18; docs/design.md "Watchdog fencing"): the
// level tried after a node entry's BMC levels, or alone, that counts a node as fenced once
// its own armed watchdog has surely reset it (S1's second proof). Its settings, with their
// units, defaults and trade-offs, and the lookup of a node's entry (levels and watchdog)
// by the entry's selector. Pure: no I/O, never reads the clock.
import { z } from "zod";
import type { FencingPolicySpec, NodeFencing } from "./policy.ts";

/**
 * The watchdog level of a node entry (`fencing.nodes[].watchdog`). Present: after every BMC
 * level of a round failed as unreachable (or timed out), the fencing replica counts the node
 * as fenced once it has itself watched the node's heartbeat Lease, continuously synced, stay
 * quiet (no renewal, no peer vouch) for renewGraceMs + the node's reported watchdog timeout
 * + marginMs, on its own monotonic clock, the node's agent having reported its watchdog
 * armed for the incident's boot. A node whose agent reports no armed watchdog is never
 * fenced this way (its incident stays FenceFailed). Absent (default): no watchdog level.
 * Opt-in because an armed watchdog resets every node that cannot reach the API server nor
 * a majority of its peers for renewGraceMs + its timeout, also in a cluster-wide API outage.
 */
export const WatchdogLevelSchema = z.object({
  // Added to renewGraceMs + the node's watchdog timeout before the node counts as reset.
  // Unit: ms. Default 2000. It must cover the drift between the node's watchdog timer and the
  // fencing replica's clock (rate drift of cheap oscillators is far below 1 %: 2 s covers
  // 1 % of 200 s), the late pets a slow heartbeat acknowledgement allows, and the reset's own
  // latency (a softdog resets from a kernel timer). Smaller releases workloads sooner; too
  // small could release them while the node still runs.
  marginMs: z.int().min(0).max(600_000).default(2_000),
  // How long after its last acknowledged heartbeat renewal a node's agent still pets its
  // watchdog. Unit: ms. Default 2000. fence waits for the longest grace any source states:
  // this, and the grace the node's agent states in its report (FASTFENCE_WATCHDOG_RENEW_GRACE_MS,
  // default 5000; a report that states none counts that default), so a shorter value here
  // never releases a node whose agent may still pet. Longer tolerates slower API writes on
  // the nodes; it adds to every watchdog fence's time.
  renewGraceMs: z.int().min(0).max(600_000).default(2_000),
});
export type WatchdogLevel = z.infer<typeof WatchdogLevelSchema>;

/** A node entry needs something to fence with (the CRD's rule and the zod refinement). */
export const LEVELS_OR_WATCHDOG = {
  rule: "size(self.levels) > 0 || has(self.watchdog)",
  message: "a node entry needs at least one BMC level or the watchdog level",
};

/** The first node entry whose selector matches the node, or undefined. */
export function entryForNode(
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> },
): NodeFencing | undefined {
  for (const entry of policy.fencing.nodes) {
    const sel = entry.nodeSelector;
    if (sel.names && !sel.names.includes(node.name)) continue;
    if (sel.matchLabels) {
      const labels = node.labels ?? {};
      if (!Object.entries(sel.matchLabels).every(([k, v]) => labels[k] === v)) continue;
    }
    if (!sel.names && !sel.matchLabels) continue; // an empty selector matches nothing
    return entry;
  }
  return undefined;
}

/** The watchdog level of the node's entry (undefined: none; discovered levels never have one). */
export function watchdogForNode(
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> },
): WatchdogLevel | undefined {
  return entryForNode(policy, node)?.watchdog;
}
