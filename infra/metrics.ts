// Prometheus metrics for one function process, served on /metrics by both runtimes.
// Label values are event types, topics, function names and outcome kinds only: never
// node-specific data with unbounded cardinality, never secrets.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface FunctionMetrics {
  registry: Registry;
  eventsIn: Counter<"function" | "type">;
  eventsOut: Counter<"function" | "type">;
  outcomes: Counter<"function" | "outcome">;
  deadLettered: Counter<"function" | "code">;
  errors: Counter<"function" | "code">;
  /** Handler run time, seconds. */
  handlerSeconds: Histogram<"function" | "type">;
  /** Time from the event's own `time` to the end of its handling: the stage latency. */
  stageLatencySeconds: Histogram<"function" | "type">;
  /**
   * Inputs fastfence refused before handling them, by stage (function or runtime) and a
   * stable reason code (e.g. missing-token, wrong-audience, subject-not-allowed). One
   * definition shared by every refusal path (HTTP authentication, evidence checks).
   */
  inputsRefused: Counter<"stage" | "reason">;
  /**
   * 1 while the FencingPolicy read last was valid, 0 while it is invalid (the last valid one
   * stays in force, or none: infra/kube/policy.ts). Alert on 0.
   */
  policyValid: Gauge<"policy">;
  /** Invalid FencingPolicy generations this process found (once per generation, not per read). */
  policyInvalid: Counter<"policy">;
  /**
   * Incident status writes that changed the phase or the reason, by the writing stage, the
   * new phase and its reason code (e.g. phase Blocked, reason PlannedReboot: a node held
   * for planned work). Reasons are fastfence's stable codes, so the cardinality is bounded.
   */
  incidentTransitions: Counter<"function" | "phase" | "reason">;
}

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32];

export function createFunctionMetrics(options: { defaultMetrics?: boolean } = {}): FunctionMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: "fastfence_process_" });
  const labels = ["function", "type"] as const;
  return {
    registry,
    eventsIn: new Counter({
      name: "fastfence_events_in_total",
      help: "Events received (valid or not).",
      labelNames: labels,
      registers: [registry],
    }),
    eventsOut: new Counter({
      name: "fastfence_events_out_total",
      help: "Events emitted.",
      labelNames: labels,
      registers: [registry],
    }),
    outcomes: new Counter({
      name: "fastfence_event_outcomes_total",
      help: "Outcome of each received event: processed, ignored, rejected, invalid, failed.",
      labelNames: ["function", "outcome"],
      registers: [registry],
    }),
    deadLettered: new Counter({
      name: "fastfence_events_dead_lettered_total",
      help: "Events sent to the dead-letter topic, by error code.",
      labelNames: ["function", "code"],
      registers: [registry],
    }),
    errors: new Counter({
      name: "fastfence_errors_total",
      help: "Handler errors, by error code.",
      labelNames: ["function", "code"],
      registers: [registry],
    }),
    handlerSeconds: new Histogram({
      name: "fastfence_handler_duration_seconds",
      help: "Handler run time.",
      labelNames: labels,
      buckets: BUCKETS,
      registers: [registry],
    }),
    stageLatencySeconds: new Histogram({
      name: "fastfence_stage_latency_seconds",
      help: "Time from the event's creation to the end of this stage's handling.",
      labelNames: labels,
      buckets: BUCKETS,
      registers: [registry],
    }),
    inputsRefused: new Counter({
      name: "fastfence_inputs_refused_total",
      help: "Inputs refused before handling (unauthenticated delivery, untrusted evidence), by stage and reason.",
      labelNames: ["stage", "reason"],
      registers: [registry],
    }),
    policyValid: new Gauge({
      name: "fastfence_policy_valid",
      help: "1 if the FencingPolicy read last was valid, 0 if invalid (the last valid one stays in force, if any).",
      labelNames: ["policy"],
      registers: [registry],
    }),
    incidentTransitions: new Counter({
      name: "fastfence_incident_transitions_total",
      help: "Incident status writes that changed the phase or reason, by stage, new phase and reason code.",
      labelNames: ["function", "phase", "reason"],
      registers: [registry],
    }),
    policyInvalid: new Counter({
      name: "fastfence_policy_invalid_total",
      help: "Invalid FencingPolicy generations found (once per generation).",
      labelNames: ["policy"],
      registers: [registry],
    }),
  };
}
