// The shapes tracing is made of, shared by infra/tracing.ts (always loaded) and the SDK side
// (infra/telemetry/otel.ts, loaded only when tracing is on): the stage span and its
// handler-facing view, child spans, settings, and the AsyncLocalStorage that carries the
// active stage span to the BMC calls (traceChild). Types and one storage only: it never
// imports the SDK, never performs I/O, and never records event data or credentials.
import { AsyncLocalStorage } from "node:async_hooks";
import type { Outcome } from "../../core/decision.ts";

/** The standard OTEL_TRACES_SAMPLER values this tracer supports. */
export const SAMPLERS = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
] as const;
export type Sampler = (typeof SAMPLERS)[number];

/** Resolved settings of an enabled tracer. */
export interface TraceSettings {
  /** Full OTLP/HTTP traces URL (…/v1/traces). */
  url: string;
  sampler: Sampler;
  /** Ratio of the traceidratio samplers, 0..1 (default 1). */
  ratio: number;
  /** Batch export delay, ms. */
  scheduleDelayMs: number;
}

/** What one stage span is about. */
export interface StageInput {
  stage: string;
  /** The event type handled, or "resync" for the reconciler's re-drive of an incident. */
  input: string;
  node: string;
  incident?: string | undefined;
  eventId?: string | undefined;
  /** The event's traceparent extension (the span that produced it). */
  traceparent?: string | undefined;
  /** A transport-level traceparent (HTTP or Kafka header); continued before the event's. */
  transport?: string | undefined;
}

/** The handling's trace as a handler sees it (HandlerContext.trace). */
export interface StageTrace {
  /** The W3C traceparent of this handling's span (starting it); undefined when not tracing. */
  traceparent(): string | undefined;
  /**
   * The traceparent to record on an incident this handling creates (TRACE_ANNOTATION): the
   * span's parent (the delivery's context), so it is known before the span starts and
   * every handling that later joins becomes its sibling; the span's own context if it has
   * no parent. Undefined when not tracing.
   */
  anchor(): string | undefined;
  /** Continue in the incident's trace (its TRACE_ANNOTATION); the delivery's becomes a link. */
  join(incidentTraceparent: string | undefined): void;
}

export type SpanAttributes = Record<string, string | number | boolean>;

/** One stage span, as the runtime drives it. */
export interface StageSpan extends StageTrace {
  /** Records the outcome (attributes, and whether an ignored input is recorded at all). */
  outcome(o: Outcome, emitted: number): void;
  /** Records a failure (status error, the error's code; never its cause chain). */
  fail(code: string, message: string): void;
  /** A retry of the handler after a retriable failure (a span event). */
  retry(attempt: number, code: string): void;
}

/** Child spans under the current stage span (BMC calls). */
export interface ChildSpans {
  child<T>(
    name: string,
    attributes: SpanAttributes,
    fn: () => Promise<T>,
    after?: (result: T) => SpanAttributes,
  ): Promise<T>;
}

export interface Tracing {
  readonly enabled: boolean;
  /** Runs `fn` as one stage span; traceChild calls inside it become its children. */
  stage<T>(input: StageInput, fn: (span: StageSpan) => Promise<T>): Promise<T>;
  /** Exports what is buffered and stops exporting. */
  shutdown(): Promise<void>;
}

/** The stage span a BMC call happens under; never set while tracing is off. */
export const activeStage = new AsyncLocalStorage<ChildSpans>();

/** Whether a stage span is active here (so callers can skip building span attributes). */
export function tracingActive(): boolean {
  return activeStage.getStore() !== undefined;
}

/**
 * Runs `fn` as a child span of the active stage span (a BMC call); just `fn` without one.
 * `after` adds attributes from the result; an error ends the span with status error.
 */
export function traceChild<T>(
  name: string,
  attributes: SpanAttributes,
  fn: () => Promise<T>,
  after?: (result: T) => SpanAttributes,
): Promise<T> {
  const s = activeStage.getStore();
  return s ? s.child(name, attributes, fn, after) : fn();
}
