// The OpenTelemetry side of infra/tracing.ts, imported only when tracing is on: one
// TracerProvider per hosted function (resource service.name fastfence-<stage>), a sampler
// from OTEL_TRACES_SAMPLER, and a batch processor exporting OTLP/HTTP protobuf to the
// configured URL. Nothing is registered globally (no global provider, propagator or
// context manager): the lab and the tests host every stage in one process, each with its
// own provider; the active stage span is carried by infra/tracing.ts's AsyncLocalStorage.
// A stage span starts lazily: its parent may change when the stage joins the incident's
// trace after reading its view (infra/tracing.ts explains the one-trace-per-incident
// rule), and an ignored input with nothing under it is not recorded at all. It never
// records event data, credentials or error causes; an export failure never reaches a
// handler (the SDK drops the batch and its error handler logs nothing of ours).
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from "@opentelemetry/api";
import { parseTraceParent } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace";
import {
  ATTR_ERROR_TYPE,
  ATTR_SERVICE_INSTANCE_ID,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
} from "@opentelemetry/semantic-conventions";
import type { Outcome } from "../../core/decision.ts";
import {
  activeStage,
  type ChildSpans,
  type SpanAttributes,
  type StageInput,
  type StageSpan,
  type TraceSettings,
  type Tracing,
} from "./spans.ts";

/** CloudEvents semantic conventions (incubating, so spelled out here as OTel advises). */
const CE_TYPE = "cloudevents.event_type";
const CE_ID = "cloudevents.event_id";
const CE_SUBJECT = "cloudevents.event_subject";

/** The sampler OTEL_TRACES_SAMPLER names. */
export function samplerFor(s: Pick<TraceSettings, "sampler" | "ratio">): Sampler {
  const ratio = new TraceIdRatioBasedSampler(s.ratio);
  switch (s.sampler) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return ratio;
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: ratio });
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** A remote parent from a W3C traceparent, if it is one. */
function remote(traceparent: string | undefined): SpanContext | undefined {
  const sc = traceparent ? parseTraceParent(traceparent) : null;
  return sc && trace.isSpanContextValid(sc) ? { ...sc, isRemote: true } : undefined;
}

/** The W3C traceparent of a span context. */
export function formatTraceparent(sc: SpanContext): string {
  const flags = (sc.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, "0");
  return `00-${sc.traceId}-${sc.spanId}-${flags}`;
}

/** Child spans (BMC calls) under `parent`, nesting through the AsyncLocalStorage. */
function childSpans(tracer: Tracer, parent: () => Context): ChildSpans {
  return {
    async child(name, attributes, fn, after) {
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent());
      const ctx = trace.setSpan(ROOT_CONTEXT, span);
      try {
        const r = await activeStage.run(
          childSpans(tracer, () => ctx),
          fn,
        );
        if (after) span.setAttributes(after(r));
        return r;
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        span.setAttribute(ATTR_ERROR_TYPE, typeof code === "string" ? code : "unknown");
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw err;
      } finally {
        span.end();
      }
    },
  };
}

/** One stage's handling of one input (see the header on its laziness). */
class LazyStageSpan implements StageSpan {
  private readonly tracer: Tracer;
  private readonly name: string;
  private readonly kind: SpanKind;
  private readonly attributes: SpanAttributes;
  private readonly recordIgnored: boolean;
  private parent: SpanContext | undefined;
  private links: Link[] = [];
  private startTime = Date.now();
  private span: Span | undefined;
  /** Spans this handling ended up continuing from (a join after the span had started). */
  private readonly earlier: Span[] = [];
  private joined = false;
  private result: { outcome?: Outcome; emitted?: number; fail?: { code: string; message: string } } = {};

  constructor(tracer: Tracer, input: StageInput) {
    this.tracer = tracer;
    const resync = input.input === "resync";
    this.name = `fastfence.${input.stage} ${resync ? "resync" : `handle ${input.input}`}`;
    this.kind = resync ? SpanKind.INTERNAL : SpanKind.CONSUMER;
    this.attributes = {
      "fastfence.stage": input.stage,
      "fastfence.node": input.node,
      ...(input.incident ? { "fastfence.incident": input.incident } : {}),
      ...(resync ? {} : { [CE_TYPE]: input.input, [CE_SUBJECT]: input.node }),
      ...(input.eventId ? { [CE_ID]: input.eventId } : {}),
    };
    const transport = remote(input.transport);
    const event = remote(input.traceparent);
    this.recordIgnored = transport !== undefined;
    this.parent = transport ?? event;
    if (transport && event && event.traceId !== transport.traceId)
      this.links.push({ context: event, attributes: { "fastfence.link": "event traceparent" } });
  }

  private started(): Span {
    if (!this.span) {
      const ctx = this.parent ? trace.setSpanContext(ROOT_CONTEXT, this.parent) : ROOT_CONTEXT;
      this.span = this.tracer.startSpan(
        this.name,
        { kind: this.kind, attributes: this.attributes, links: this.links, startTime: this.startTime },
        ctx,
      );
    }
    return this.span;
  }

  /** The context child spans start under (starting this span). */
  context(): Context {
    return trace.setSpan(ROOT_CONTEXT, this.started());
  }

  traceparent(): string {
    return formatTraceparent(this.started().spanContext());
  }

  anchor(): string {
    return this.parent ? formatTraceparent(this.parent) : this.traceparent();
  }

  join(incidentTraceparent: string | undefined): void {
    const inc = remote(incidentTraceparent);
    if (!inc || this.joined) return;
    this.joined = true;
    const current = this.span?.spanContext() ?? this.parent;
    if (current?.traceId === inc.traceId) return;
    if (current) this.links.push({ context: current, attributes: { "fastfence.link": "delivery" } });
    if (this.span) {
      // Already started (a race to create the incident, lost): continue in a second span.
      this.span.setAttribute("fastfence.continued_in_trace", inc.traceId);
      this.earlier.push(this.span);
      this.span = undefined;
      this.links = this.links.slice(-1);
      this.startTime = Date.now();
    }
    this.parent = inc;
  }

  outcome(o: Outcome, emitted: number): void {
    this.result = { ...this.result, outcome: o, emitted };
  }

  fail(code: string, message: string): void {
    this.result = { ...this.result, fail: { code, message } };
  }

  retry(attempt: number, code: string): void {
    this.started().addEvent("retry", { "fastfence.attempt": attempt, [ATTR_ERROR_TYPE]: code });
  }

  end(): void {
    const { outcome, emitted, fail } = this.result;
    if (!this.span && !fail && !this.recordIgnored && (!outcome || outcome.kind === "ignored")) return;
    const span = this.started();
    if (outcome) {
      span.setAttribute("fastfence.outcome.kind", outcome.kind);
      if (outcome.kind !== "processed") span.setAttribute("fastfence.outcome.code", outcome.code);
      span.setAttribute("fastfence.emitted", emitted ?? 0);
      if (outcome.kind === "rejected") span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.code });
    }
    if (fail) {
      span.setAttribute(ATTR_ERROR_TYPE, fail.code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: fail.message });
    }
    span.end();
    for (const s of this.earlier) s.end();
  }
}

/**
 * The tracing of one hosted function. `processor` replaces the OTLP batch export (unit
 * tests hand in an in-memory exporter's processor).
 */
export function otelTracing(
  settings: TraceSettings,
  service: { stage: string; replica: string; version?: string },
  opts: { processor?: SpanProcessor; exporter?: SpanExporter } = {},
): Tracing {
  const exporter = opts.exporter ?? new OTLPTraceExporter({ url: settings.url });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: `fastfence-${service.stage}`,
      [ATTR_SERVICE_INSTANCE_ID]: service.replica,
      ...(service.version ? { [ATTR_SERVICE_VERSION]: service.version } : {}),
    }),
    sampler: samplerFor(settings),
    spanProcessors: [
      opts.processor ?? new BatchSpanProcessor({ exporter, scheduledDelayMillis: settings.scheduleDelayMs }),
    ],
  });
  const tracer = provider.getTracer("fastfence");
  return {
    enabled: true,
    async stage(input, fn) {
      const span = new LazyStageSpan(tracer, input);
      try {
        return await activeStage.run(
          childSpans(tracer, () => span.context()),
          () => fn(span),
        );
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        span.fail(typeof code === "string" ? code : "unknown", "handling failed");
        throw err;
      } finally {
        span.end();
      }
    },
    shutdown: () => provider.shutdown(),
  };
}
