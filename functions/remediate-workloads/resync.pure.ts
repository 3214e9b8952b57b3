// remediate-workloads, re-driven without an event (level-triggered progress,
// core/decision.ts Resync): a FencedOff incident whose release is overdue by
// reconcile.stalledAfterMs (node.fenced lost, or every replica that got it failed) gets the
// same release as for the event, decided from the incident alone (S1: only with its
// recorded Off read-back). No I/O.
import { statusOf, type Phase } from "../../core/incident.ts";
import {
  ignored,
  iso,
  ms,
  type DecideInput,
  type Decision,
  type Resync,
  type ViewRequest,
} from "../../core/decision.ts";
import { onResult, releaseOf } from "./decide.pure.ts";

/** The phases remediate-workloads re-drives; the reconciler lists only incidents in these. */
export const RELEASE_RESYNC_PHASES: readonly Phase[] = ["FencedOff"];

export function locateResync(r: Resync): ViewRequest {
  return { node: r.node, incident: r.incident, cluster: false };
}

/**
 * Re-drives a FencedOff incident whose release is overdue (node.fenced lost, or every
 * replica that got it failed): the same release as for the event, from the incident alone.
 */
export function resync(input: DecideInput<Resync>): Decision {
  const { view, now } = input;
  if (input.result) return onResult(input);
  const inc = view.incident;
  const name = input.event.incident;
  if (!inc || inc.metadata.name !== name)
    return ignored("IncidentNotFound", `no incident ${name} in the API`);
  const st = statusOf(inc);
  if (!RELEASE_RESYNC_PHASES.includes(st.phase))
    return ignored("NotThisStage", `incident ${name} is ${st.phase}: not remediate-workloads' to re-drive`);
  const due = ms(st.timestamps.fencedOff);
  const stalled = view.policy.reconcile.stalledAfterMs;
  if (!Number.isFinite(due) || now < due + stalled)
    return ignored("NotDue", `release of ${name} is not overdue (fenced off ${iso(due)} + ${stalled} ms)`);
  return releaseOf(inc, view, [{ from: "the resync", node: input.event.node }]);
}
