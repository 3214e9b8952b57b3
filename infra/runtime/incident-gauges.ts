// Gauges of the open incidents, set from the list every reconcile pass reads anyway
// (infra/runtime/reconciler.ts): how many are open by phase and reason, how many gave up
// fencing (FenceFailed with no round to follow), and how long the oldest has been in each
// phase. They carry what counters cannot: an incident that stopped moving. Every replica of
// every reconciling stage sets its own copy from its own read, so alerts take max() over
// them. Phases and reasons are fastfence's stable codes: bounded labels, no node names.
// Reads the incidents it is given only; never writes anything but these gauges.
import {
  PHASE_TIMESTAMP_KEY,
  isFinalFenceFailed,
  statusOf,
  type NodeFence,
  type Phase,
} from "../../core/incident.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { FunctionMetrics } from "../metrics.ts";

export type IncidentGauges = Pick<
  FunctionMetrics,
  "incidentsOpen" | "incidentsFencingGaveUp" | "incidentPhaseAgeSeconds"
>;

/** When the incident entered its current phase (first entry), ms; NaN when unknown. */
function inPhaseSince(inc: NodeFence): number {
  const st = statusOf(inc);
  const at = st.timestamps[PHASE_TIMESTAMP_KEY[st.phase]] ?? inc.metadata.creationTimestamp;
  return at ? Date.parse(at) : NaN;
}

/** Replaces the gauges' values with those of `open` (every open incident, one list). */
export function recordOpenIncidents(
  m: IncidentGauges,
  open: readonly NodeFence[],
  policy: FencingPolicySpec,
  now: number,
): void {
  const counts = new Map<string, { phase: Phase; reason: string; n: number }>();
  const oldest = new Map<Phase, number>();
  let gaveUp = 0;
  for (const inc of open) {
    const st = statusOf(inc);
    const reason = st.reason ?? st.phase;
    const key = `${st.phase}/${reason}`;
    const c = counts.get(key) ?? { phase: st.phase, reason, n: 0 };
    c.n++;
    counts.set(key, c);
    if (isFinalFenceFailed(st, policy.fencing.maxRounds)) gaveUp++;
    const since = inPhaseSince(inc);
    if (Number.isFinite(since))
      oldest.set(st.phase, Math.max(oldest.get(st.phase) ?? 0, Math.max(0, now - since) / 1000));
  }
  // Reset and set in one synchronous run: a scrape never sees the gauges half-written.
  m.incidentsOpen.reset();
  m.incidentPhaseAgeSeconds.reset();
  for (const c of counts.values()) m.incidentsOpen.set({ phase: c.phase, reason: c.reason }, c.n);
  for (const [phase, s] of oldest) m.incidentPhaseAgeSeconds.set({ phase }, s);
  m.incidentsFencingGaveUp.set(gaveUp);
}
