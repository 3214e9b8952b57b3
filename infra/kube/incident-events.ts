// Kubernetes Events for incidents: when a stage's status write changes an incident's phase
// or reason, one Event on the NodeFence (its namespace) and one on its Node (`default`,
// where the API server files Events about cluster-scoped objects), so `kubectl describe
// nodefence` and `oc describe node` tell what fastfence did and why, with the stable reason
// code (status.reason, else the phase). Also counts the change in
// fastfence_incident_transitions_total{function,phase,reason,final} (final="true" when the
// write gives the incident's outcome: Released, a FenceFailed no round follows, Recovered,
// Closed) and, on Released, observes fastfence_incident_duration_seconds from the
// incident's own timestamps (first probe miss, else suspected, to released). Best effort: recording is
// never awaited by the stage and never fails a decision; a failure is logged once per kind.
// Never records evidence, attempts or anything secret, only the status reason and message.
import { isTerminal, type NodeFence, type NodeFenceStatus } from "../../core/incident.ts";
import type { Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";
import type { Kube } from "./client.ts";
import { recordEvent, type EventSubject } from "./events.ts";
import { alarmNewLies } from "./bmc-lie-alarm.ts";

/** Phases and reasons that ask for someone's attention (Event type Warning). */
const WARNING_PHASES = new Set(["Blocked", "FenceFailed"]);

/**
 * The write gives the incident's outcome: workloads Released, fencing given up (FenceFailed
 * with no retry time: the last round failed, or nothing to retry), or the incident ended.
 */
export function isOutcome(st: NodeFenceStatus): boolean {
  return (
    st.phase === "Released" ||
    (st.phase === "FenceFailed" && st.retryNotBefore === undefined) ||
    isTerminal(st.phase)
  );
}

/**
 * Seconds from the incident's first sign of failure (the earliest first probe miss of its
 * evidence, else its suspected time, else its creation) to its release; undefined when a
 * time is missing.
 */
export function incidentDurationSeconds(inc: NodeFence): number | undefined {
  const st = inc.status;
  const released = st?.timestamps.released ? Date.parse(st.timestamps.released) : NaN;
  const misses = (st?.evidence ?? [])
    .map((e) => (e.firstMissAt ? Date.parse(e.firstMissAt) : NaN))
    .filter(Number.isFinite);
  const fallback = st?.timestamps.suspected ?? inc.metadata.creationTimestamp;
  const start = misses.length ? Math.min(...misses) : fallback ? Date.parse(fallback) : NaN;
  if (!Number.isFinite(released) || !Number.isFinite(start)) return undefined;
  return Math.max(0, released - start) / 1000;
}

/** The incident changed in a way worth an Event: its phase, or its reason. */
export function changed(before: NodeFenceStatus | undefined, after: NodeFenceStatus): boolean {
  return before?.phase !== after.phase || before?.reason !== after.reason;
}

export interface IncidentEventsOptions {
  /** The stage that writes (the Events' reportingComponent fastfence.io/<component>). */
  component: string;
  instance: string;
  log?: Logger;
  metrics?: Pick<FunctionMetrics, "incidentTransitions" | "incidentDurationSeconds"> &
    Partial<Pick<FunctionMetrics, "bmcLied">>;
}

export class IncidentEventRecorder {
  private readonly kube: Kube;
  private readonly o: IncidentEventsOptions;
  private lastFailure = "";

  constructor(kube: Kube, o: IncidentEventsOptions) {
    this.kube = kube;
    this.o = o;
  }

  /**
   * Called after a status write succeeded: `before` is the status it replaced (absent for a
   * new incident), `inc` the incident as written. Records nothing when neither the phase
   * nor the reason changed. Never throws; returns when both Events were tried.
   */
  async written(before: NodeFenceStatus | undefined, inc: NodeFence): Promise<void> {
    const st = inc.status;
    if (st) alarmNewLies(before, inc, this.o);
    if (!st || !changed(before, st)) return;
    const reason = st.reason ?? st.phase;
    const final = String(isOutcome(st));
    this.o.metrics?.incidentTransitions.inc({ function: this.o.component, phase: st.phase, reason, final });
    if (st.phase === "Released" && before?.phase !== "Released") {
      const seconds = incidentDurationSeconds(inc);
      if (seconds !== undefined) this.o.metrics?.incidentDurationSeconds.observe(seconds);
    }
    const type = WARNING_PHASES.has(st.phase) ? "Warning" : "Normal";
    const name = inc.metadata.name;
    const ns = inc.metadata.namespace ?? "";
    const text = `${st.phase}: ${st.message ?? reason}`;
    await Promise.all([
      this.record(
        {
          apiVersion: "fastfence.io/v1alpha1",
          kind: "NodeFence",
          name,
          namespace: ns,
          ...(inc.metadata.uid ? { uid: inc.metadata.uid } : {}),
        },
        type,
        reason,
        text,
      ),
      this.record(
        { apiVersion: "v1", kind: "Node", name: inc.spec.nodeName },
        type,
        reason,
        `incident ${name} ${text}`,
      ),
    ]);
  }

  private async record(
    subject: EventSubject,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ): Promise<void> {
    try {
      await recordEvent(this.kube, subject, {
        type,
        reason,
        message,
        component: this.o.component,
        instance: this.o.instance,
      });
    } catch (err) {
      const key = `${subject.kind}/${String((err as { status?: number }).status ?? "")}`;
      if (key === this.lastFailure) return;
      this.lastFailure = key;
      this.o.log?.warn(
        { incident: subject.kind === "NodeFence" ? subject.name : "none", node: "none", err },
        `cannot record a Kubernetes Event on the ${subject.kind}; the incident's status still says it`,
      );
    }
  }
}
