// Incident metrics: the transitions counter says which writes are the incident's outcome
// (final="true": Released, a FenceFailed no round follows, Recovered, Closed), the Released
// write observes the whole incident's duration from its own timestamps (first probe miss,
// else suspected), and the open-incident gauges (infra/runtime/incident-gauges.ts) count by
// phase and reason, count given-up fencing and give the oldest phase age, replacing the
// previous pass's values. Pure: fake Kube, no server.
import { describe, expect, it } from "vitest";
import { emptyStatus, transition, type NodeFence, type NodeFenceStatus } from "../../../core/incident.ts";
import { resolvePolicy } from "../../../core/policy.ts";
import {
  IncidentEventRecorder,
  incidentDurationSeconds,
  isOutcome,
} from "../../../infra/kube/incident-events.ts";
import { createFunctionMetrics } from "../../../infra/metrics.ts";
import { recordOpenIncidents } from "../../../infra/runtime/incident-gauges.ts";
import { kubeAnswering } from "../../scenarios/memory-adapters.ts";

const T0 = Date.parse("2026-11-01T10:00:00.000Z");
const iso = (ms: number) => new Date(ms).toISOString();

function incident(name: string, status: NodeFenceStatus): NodeFence {
  return {
    apiVersion: "fastfence.io/v1alpha1",
    kind: "NodeFence",
    metadata: { name, namespace: "fastfence-system", creationTimestamp: iso(T0) },
    spec: { nodeName: name, bootId: "b" },
    status,
  };
}

const evidence = (firstMissAt: number) => ({
  observer: "o",
  observerNode: "n",
  node: "x",
  at: iso(firstMissAt + 300),
  kind: "probe" as const,
  firstMissAt: iso(firstMissAt),
});

function releasedStatus(): NodeFenceStatus {
  let st = transition(emptyStatus(), "Suspected", iso(T0 + 400), {
    evidence: [evidence(T0 + 50), evidence(T0)],
  });
  st = transition(st, "Confirmed", iso(T0 + 500));
  st = transition(st, "Fencing", iso(T0 + 600));
  st = transition(st, "FencedOff", iso(T0 + 800));
  return transition(st, "Released", iso(T0 + 1100), { reason: "WorkloadsReleased" });
}

const noEvents = kubeAnswering(async () => ({}));

describe("incident outcome and duration", () => {
  it("calls Released, a FenceFailed without a next round, Recovered and Closed outcomes", () => {
    const failed = transition(transition(emptyStatus(), "Confirmed", iso(T0)), "FenceFailed", iso(T0));
    expect(isOutcome({ ...failed, retryNotBefore: iso(T0 + 2000) })).toBe(false);
    expect(isOutcome(failed)).toBe(true);
    expect(isOutcome(releasedStatus())).toBe(true);
    expect(isOutcome(transition(emptyStatus(), "Closed", iso(T0)))).toBe(true);
    expect(isOutcome(transition(emptyStatus(), "Blocked", iso(T0), { reason: "StormGuard" }))).toBe(false);
  });

  it("measures from the earliest first miss of the evidence, else the suspected time", () => {
    expect(incidentDurationSeconds(incident("a", releasedStatus()))).toBeCloseTo(1.1);
    const noMiss = { ...releasedStatus(), evidence: [] };
    expect(incidentDurationSeconds(incident("a", noMiss))).toBeCloseTo(0.7);
    expect(incidentDurationSeconds(incident("a", { ...noMiss, timestamps: {} }))).toBe(undefined);
  });

  it("records the transition with final and one duration sample when Released is written", async () => {
    const m = createFunctionMetrics({ defaultMetrics: false });
    const rec = new IncidentEventRecorder(noEvents, {
      component: "remediate-workloads",
      instance: "r",
      metrics: m,
    });
    const released = releasedStatus();
    const before = { ...released, phase: "FencedOff" as const, reason: "PowerOffConfirmed" };
    await rec.written(before, incident("a", released));
    await rec.written(released, incident("a", released)); // no change: nothing counted
    const t = await m.registry.metrics();
    expect(t).toContain(
      'fastfence_incident_transitions_total{function="remediate-workloads",phase="Released",reason="WorkloadsReleased",final="true"} 1',
    );
    expect(t).toContain("fastfence_incident_duration_seconds_count 1");
    expect(t).toContain("fastfence_incident_duration_seconds_sum 1.1");
    expect(t).toContain('fastfence_incident_duration_seconds_bucket{le="1.25"} 1');
    expect(t).toContain('fastfence_incident_duration_seconds_bucket{le="1"} 0');
  });
});

describe("open-incident gauges", () => {
  it("count by phase and reason, count given-up fencing and give the oldest phase age", async () => {
    const m = createFunctionMetrics({ defaultMetrics: false });
    const policy = resolvePolicy({ fencing: { maxRounds: 2 } });
    const fencing = transition(transition(emptyStatus(), "Confirmed", iso(T0)), "Fencing", iso(T0 + 1000));
    const gaveUp = { ...transition(fencing, "FenceFailed", iso(T0 + 5000)), round: 2 };
    const retrying = {
      ...transition(fencing, "FenceFailed", iso(T0 + 8000)),
      round: 1,
      retryNotBefore: iso(T0 + 9000),
    };
    const blocked = transition(emptyStatus(), "Blocked", iso(T0 + 2000), { reason: "StormGuard" });
    const now = T0 + 61_000;
    recordOpenIncidents(
      m,
      [
        incident("a", { ...fencing, reason: "Fencing" }),
        incident("b", { ...gaveUp, reason: "PowerOffNotConfirmed" }),
        incident("c", { ...retrying, reason: "PowerOffNotConfirmed" }),
        incident("d", blocked),
        incident("e", { ...blocked, timestamps: { ...blocked.timestamps, blocked: iso(T0 + 31_000) } }),
      ],
      policy,
      now,
    );
    let t = await m.registry.metrics();
    expect(t).toContain('fastfence_incidents_open{phase="Blocked",reason="StormGuard"} 2');
    expect(t).toContain('fastfence_incidents_open{phase="FenceFailed",reason="PowerOffNotConfirmed"} 2');
    expect(t).toContain("fastfence_incidents_fencing_gave_up 1");
    expect(t).toContain('fastfence_incident_phase_age_seconds{phase="Fencing"} 60');
    expect(t).toContain('fastfence_incident_phase_age_seconds{phase="Blocked"} 59');
    // the next pass replaces everything: no incident left, no stale series
    recordOpenIncidents(m, [], policy, now);
    t = await m.registry.metrics();
    expect(t).not.toContain("fastfence_incidents_open{");
    expect(t).not.toContain("fastfence_incident_phase_age_seconds{");
    expect(t).toContain("fastfence_incidents_fencing_gave_up 0");
  });
});
