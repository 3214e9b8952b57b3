// The NodeFence's status.conditions: a derived view of its phase and proof fields in the
// metav1.Condition shape, so `kubectl wait --for=condition=Released nodefence/NAME` and
// dashboards work without knowing the phase machine (cluster-api / medik8s style: a stable
// reason code plus a human message). Derived at every status write from the status being
// written (infra/kube/incidents.ts), never decided on: no stage reads them back. A
// condition keeps its lastTransitionTime while its status stays the same. Pure: no I/O,
// the time is given.
import type { NodeFenceStatus } from "./incident.ts";

export const INCIDENT_CONDITION_TYPES = ["Confirmed", "Fenced", "Released", "ReadyForRecovery"] as const;
export type IncidentConditionType = (typeof INCIDENT_CONDITION_TYPES)[number];

export interface IncidentCondition {
  type: IncidentConditionType;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
}

type Verdict = Pick<IncidentCondition, "status" | "reason" | "message">;

const yes = (reason: string, message: string): Verdict => ({ status: "True", reason, message });
const no = (reason: string, message: string): Verdict => ({ status: "False", reason, message });

/** What each condition says about a status (its time is added by incidentConditions). */
function verdicts(st: NodeFenceStatus): Record<IncidentConditionType, Verdict> {
  const detail = st.message ?? st.reason ?? st.phase;
  const ended = st.phase === "Closed" || st.phase === "Recovered";
  const confirmed = st.timestamps.confirmed
    ? yes("Confirmed", `confirmed at ${st.timestamps.confirmed}`)
    : st.phase === "Blocked"
      ? no(st.reason ?? "Blocked", detail)
      : no(ended ? (st.reason ?? st.phase) : "NotConfirmed", ended ? detail : "not confirmed yet");
  const fenced = st.powerOffConfirmedAt
    ? st.reason === "WatchdogExpired" || st.attempts.some((a) => a.result === "watchdog-expired")
      ? yes("WatchdogExpired", `reset by its armed watchdog by ${st.powerOffConfirmedAt}`)
      : yes("PowerOffConfirmed", `power-off read back Off at ${st.powerOffConfirmedAt}`)
    : st.phase === "FenceFailed"
      ? no(st.reason ?? "FenceFailed", detail)
      : st.phase === "Fencing"
        ? no("Fencing", detail)
        : no(ended ? (st.reason ?? st.phase) : "NotFenced", ended ? detail : "not powered off");
  const released = st.timestamps.released
    ? yes("WorkloadsReleased", `workloads released at ${st.timestamps.released}`)
    : no(ended ? (st.reason ?? st.phase) : "NotReleased", ended ? detail : "workloads not released");
  // The node is off and its workloads run elsewhere: it may be repaired and powered on.
  const ready =
    st.phase === "Released"
      ? yes("WorkloadsReleased", "the node is off and its workloads were released: it may be repaired")
      : st.phase === "Recovered"
        ? no("Recovered", detail)
        : no("NotReleased", `phase ${st.phase}`);
  return { Confirmed: confirmed, Fenced: fenced, Released: released, ReadyForRecovery: ready };
}

/**
 * The conditions for `st`, keeping the lastTransitionTime of every condition whose status
 * did not change from `previous` (the conditions the status carried before this write).
 */
export function incidentConditions(
  st: NodeFenceStatus,
  nowIso: string,
  previous: readonly IncidentCondition[] = [],
): IncidentCondition[] {
  const v = verdicts(st);
  return INCIDENT_CONDITION_TYPES.map((type) => {
    const before = previous.find((c) => c.type === type);
    const lastTransitionTime =
      before && before.status === v[type].status ? before.lastTransitionTime : nowIso;
    return { type, ...v[type], message: v[type].message.slice(0, 1024), lastTransitionTime };
  });
}
