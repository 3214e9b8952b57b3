// fence's leader hand-off step (issue 46), pure: after a proven power-off (S1) it asks the
// adapter to release the Leases the policy lists whose holders ran on the fenced node
// (core/lease-handoff.ts decides each one), and it decides on what came back. The hand-off
// is best effort: an unreleased Lease runs out its duration as it would without fastfence,
// so its result never changes the incident nor fails the round. No I/O.
import { processed, type Action, type Decision } from "../../core/decision.ts";
import type { NodeFence } from "../../core/incident.ts";
import { handoffPlan, summarize, type HandoffResult } from "../../core/lease-handoff.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";

/** The handOffLeases action after `inc`'s power-off was proven at `provenAt`, if the policy asks for one. */
export function handoffActions(
  inc: NodeFence,
  policy: FencingPolicySpec,
  provenAt: string | undefined,
): Action[] {
  const plan = handoffPlan(policy.leaseHandoff, inc.metadata.name, inc.spec.nodeName, provenAt);
  return plan ? [{ kind: "handOffLeases", plan }] : [];
}

/** Decides on the hand-off's outcomes: nothing more to do; the detail says what happened. */
export function onHandoffResult(result: HandoffResult): Decision {
  return processed(summarize(result.node, result.results), []);
}
