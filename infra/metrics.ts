// Prometheus metrics of one function process (served on /metrics by both runtimes) and of
// one event-source replica (`fastfence source --http`). Every name is defined here once,
// so the PrometheusRule's expressions can be checked against this file (test/unit/infra/
// monitoring-rules.test.ts). Label values are event types, function names, phases, stable
// reason and error codes, BMC drivers and results: bounded sets. A node name is a label
// only where the series is about that node (BMC health, event-source coverage), so
// cardinality grows with the cluster, never with traffic. Never a secret, a BMC address
// or a message. Default process metrics carry the single prefix "fastfence_"
// (fastfence_process_cpu_seconds_total, fastfence_nodejs_heap_size_used_bytes).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { createBmcMetrics, type BmcMetrics } from "./bmc/metered.ts";

/** Prefix of the default process metrics (prom-client adds process_ and nodejs_ itself). */
export const DEFAULT_METRICS_PREFIX = "fastfence_";

export interface FunctionMetrics extends BmcMetrics {
  registry: Registry;
  eventsIn: Counter<"function" | "type">;
  eventsOut: Counter<"function" | "type">;
  outcomes: Counter<"function" | "outcome">;
  /**
   * Events sent to the dead-letter topic, by error code and, for an event a stage rejected,
   * its stable reason code (core/reasons.ts; "" otherwise), as in the dead-letter record.
   */
  deadLettered: Counter<"function" | "code" | "reason">;
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
  incidentTransitions: Counter<"function" | "phase" | "reason" | "final">;
  /**
   * Whole incident, first sign of failure (the earliest first probe miss of its evidence,
   * else its suspected time) to Released, seconds: one sample per released incident,
   * recorded by the stage whose status write said Released (remediate-workloads).
   */
  incidentDurationSeconds: Histogram;
  /** Read-backs of Off the node proved false (the look after: infra/kube/bmc-lie-alarm.ts), by level and driver. */
  bmcLied: Counter<"level" | "driver">;
  /** Open incidents by phase and reason, as this replica's last reconcile pass listed them. */
  incidentsOpen: Gauge<"phase" | "reason">;
  /** Open incidents whose fencing gave up (FenceFailed with no round to follow): an operator must act. */
  incidentsFencingGaveUp: Gauge;
  /** Longest time an open incident has spent in its phase (since it entered it), by phase, seconds. */
  incidentPhaseAgeSeconds: Gauge<"phase">;
  /**
   * 1 while the node's event source renews its heartbeat Lease, 0 when a Ready node's is
   * missing or stale (no observer on that node): by node, from confirm's coverage loop.
   */
  eventSourceUp: Gauge<"node">;
  /**
   * 1 when the node's heartbeat Lease reports its watchdog armed, 0 when it reports it not
   * armed (or malformed): by node, from confirm's watchdog report loop (cluster view).
   */
  watchdogArmed: Gauge<"node">;
}

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32];
/** Incident durations: the goal is seconds (p99 ≤ 2 s); a retried round takes tens. */
const INCIDENT_BUCKETS = [0.5, 0.75, 1, 1.25, 1.5, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600];

export function createFunctionMetrics(options: { defaultMetrics?: boolean } = {}): FunctionMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: DEFAULT_METRICS_PREFIX });
  const labels = ["function", "type"] as const;
  return {
    registry,
    ...createBmcMetrics(registry),
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
      help: "Events sent to the dead-letter topic, by error code and (for a rejected event) its reason code.",
      labelNames: ["function", "code", "reason"],
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
      help: "Incident status writes that changed the phase or reason, by stage, new phase, reason code and whether it is the incident's outcome (final).",
      labelNames: ["function", "phase", "reason", "final"],
      registers: [registry],
    }),
    bmcLied: new Counter({
      name: "fastfence_bmc_lied_total",
      help: "BMC read-backs of Off that the node proved false (it renewed its heartbeat with the same boot ID after the read-back), by level (1-based) and driver.",
      labelNames: ["level", "driver"],
      registers: [registry],
    }),
    incidentDurationSeconds: new Histogram({
      name: "fastfence_incident_duration_seconds",
      help: "Incident duration from the first sign of failure (first probe miss, else suspected) to Released.",
      buckets: INCIDENT_BUCKETS,
      registers: [registry],
    }),
    incidentsOpen: new Gauge({
      name: "fastfence_incidents_open",
      help: "Open incidents by phase and reason, as this replica's last reconcile pass listed them.",
      labelNames: ["phase", "reason"],
      registers: [registry],
    }),
    incidentsFencingGaveUp: new Gauge({
      name: "fastfence_incidents_fencing_gave_up",
      help: "Open incidents whose fencing gave up (FenceFailed, no round to follow): an operator must act.",
      registers: [registry],
    }),
    incidentPhaseAgeSeconds: new Gauge({
      name: "fastfence_incident_phase_age_seconds",
      help: "Longest time an open incident has been in its phase, by phase (last reconcile pass).",
      labelNames: ["phase"],
      registers: [registry],
    }),
    eventSourceUp: new Gauge({
      name: "fastfence_event_source_up",
      help: "1 while the node's event source renews its heartbeat Lease; 0 for a Ready node whose Lease is missing or stale.",
      labelNames: ["node"],
      registers: [registry],
    }),
    watchdogArmed: new Gauge({
      name: "fastfence_watchdog_armed",
      help: "1 when the node reports its watchdog armed on its heartbeat Lease, 0 when it reports it not armed (the FencingPolicy's WatchdogsArmed condition says why).",
      labelNames: ["node"],
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

/** Counters of one event-source replica (source/event-source.ts SourceMetrics). */
export interface SourceRegistry {
  registry: Registry;
  probes: Counter<"result">;
  published: Counter<"type">;
  publishErrors: Counter;
  /** The node's own watchdog agent: 1 armed, 0 not (source/watchdog-agent.ts). */
  watchdogArmed: Gauge<"node">;
  /** 1 while the agent pets (its node proves it is on the healthy side), 0 while it does not. */
  watchdogPetting: Gauge<"node">;
}

export function createSourceMetrics(options: { defaultMetrics?: boolean } = {}): SourceRegistry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: DEFAULT_METRICS_PREFIX });
  return {
    registry,
    probes: new Counter({
      name: "fastfence_probes_total",
      help: "Probes by result.",
      labelNames: ["result"],
      registers: [registry],
    }),
    published: new Counter({
      name: "fastfence_source_events_published_total",
      help: "Events published.",
      labelNames: ["type"],
      registers: [registry],
    }),
    publishErrors: new Counter({
      name: "fastfence_source_publish_errors_total",
      help: "Failed publishes.",
      registers: [registry],
    }),
    watchdogArmed: new Gauge({
      name: "fastfence_watchdog_armed",
      help: "1 while this node's watchdog agent has its device open and armed, 0 when it could not open it (the report on the heartbeat Lease says why) or has not yet.",
      labelNames: ["node"],
      registers: [registry],
    }),
    watchdogPetting: new Gauge({
      name: "fastfence_watchdog_petting",
      help: "1 while this node's watchdog agent pets its device (heartbeat renewed or vouched for by a majority), 0 while it lets it run down.",
      labelNames: ["node"],
      registers: [registry],
    }),
  };
}
