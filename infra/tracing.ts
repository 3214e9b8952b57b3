// Distributed tracing of incidents: the seam between the runtimes and the OpenTelemetry SDK.
// Off by default. Only when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
// is set (and OTEL_SDK_DISABLED is not "true") does createTracing import the SDK
// (infra/telemetry/otel.ts, a dynamic import); otherwise it returns `noTracing`, whose spans
// are one shared constant object that does nothing, so a delivery costs a function call and
// not a single SDK module is loaded. Each hosted function gets its own tracer provider
// (service.name fastfence-<stage>), never the global one: the lab and the tests run every
// stage in one process, and nothing here registers anything process-wide.
//
// One trace per incident — how its trace id is chosen:
//  - Observations come from the event source with a fresh traceparent each (a new trace);
//    most end ignored in detect (below threshold) and record no span at all (see below).
//  - The observation that tips a suspicion makes detect emit node.suspected carrying the
//    detect span's context; confirm's span handling it continues that trace, and when that
//    handling creates the NodeFence it stamps its parent context (the suspicion's, i.e. the
//    detect span; StageTrace.anchor) on the incident as the annotation
//    fastfence.io/traceparent (TRACE_ANNOTATION). That is the incident's trace. The parent,
//    not the confirm span itself, so that it is known before the span starts: confirm
//    replicas racing to create the incident from other observers' suspicions (other
//    traces) lose the create, re-read, and join before anything of theirs was recorded.
//  - Any later handling whose view holds the incident joins that trace (StageTrace.join):
//    a second observer's suspicion that confirms it, operator requests, and every resync
//    of the reconciler (which starts from the annotation). The delivery's own context is
//    kept as a span link, so nothing causal is lost. Events carrying the incident already
//    carry a span context of its trace, since every event a stage emits carries the
//    traceparent of the span that handled its cause (events/envelope.ts).
//  - So fence (and its BMC calls), remediate-workloads and recover all land in the trace
//    that began with the observation which started the incident.
// Parent of a stage span, in order: the incident's annotation (once the view is read), a
// transport-level `traceparent` (the HTTP header Knative's dispatcher sends, or a Kafka
// record header; not the event's ce-traceparent extension), the event's own traceparent.
// Inputs that end ignored are not recorded unless their delivery carried a transport
// traceparent or they started child work: they come many times a second while a node is
// down (every probe miss, every duplicate), and are counted in the metrics anyway.
// This module never imports the SDK, never performs I/O, and never puts a credential or an
// event's data into a span: only ids, names, types, outcome codes and BMC driver results.
import {
  SAMPLERS,
  activeStage,
  traceChild,
  tracingActive,
  type ChildSpans,
  type Sampler,
  type SpanAttributes,
  type StageInput,
  type StageSpan,
  type StageTrace,
  type TraceSettings,
  type Tracing,
} from "./telemetry/spans.ts";

export { SAMPLERS, activeStage, traceChild, tracingActive };
export type {
  ChildSpans,
  Sampler,
  SpanAttributes,
  StageInput,
  StageSpan,
  StageTrace,
  TraceSettings,
  Tracing,
};

/** Annotation on a NodeFence holding the W3C traceparent of the span that created it. */
export const TRACE_ANNOTATION = "fastfence.io/traceparent";

/** What createTracing needs from the environment (RuntimeConfig validates these fields). */
export interface TraceEnv {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
  OTEL_SDK_DISABLED?: "true" | "false" | undefined;
  OTEL_TRACES_SAMPLER?: Sampler | undefined;
  OTEL_TRACES_SAMPLER_ARG?: number | undefined;
  OTEL_BSP_SCHEDULE_DELAY?: number | undefined;
}

/**
 * The tracer settings, or undefined when tracing is off. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * is used as is; OTEL_EXPORTER_OTLP_ENDPOINT is a base URL that gets /v1/traces (OTLP spec).
 */
export function traceSettings(env: TraceEnv): TraceSettings | undefined {
  if (env.OTEL_SDK_DISABLED === "true") return undefined;
  const specific = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const url = specific ? specific : base ? `${base.replace(/\/+$/, "")}/v1/traces` : undefined;
  if (!url) return undefined;
  return {
    url,
    sampler: env.OTEL_TRACES_SAMPLER ?? "parentbased_always_on",
    ratio: env.OTEL_TRACES_SAMPLER_ARG ?? 1,
    scheduleDelayMs: env.OTEL_BSP_SCHEDULE_DELAY ?? 5000,
  };
}

/** The span of a handling that is not traced. */
export const noSpan: StageSpan = {
  traceparent: () => undefined,
  anchor: () => undefined,
  join: () => undefined,
  outcome: () => undefined,
  fail: () => undefined,
  retry: () => undefined,
};

/** Tracing off: no SDK, no spans, no allocation per delivery. */
export const noTracing: Tracing = {
  enabled: false,
  stage: (_input, fn) => fn(noSpan),
  shutdown: async () => undefined,
};

/** The tracing of one hosted function: `noTracing` unless an OTLP endpoint is configured. */
export async function createTracing(
  env: TraceEnv,
  service: { stage: string; replica: string; version?: string },
): Promise<Tracing> {
  const settings = traceSettings(env);
  if (!settings) return noTracing;
  const { otelTracing } = await import("./telemetry/otel.ts");
  return otelTracing(settings, service);
}
