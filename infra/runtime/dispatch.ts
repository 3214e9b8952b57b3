// One delivery of one event to one function, shared by the Kafka and HTTP runtimes:
// validate against the catalog, skip types the function does not subscribe to, run the
// handler with a deadline (which the handler may extend, never shorten), retry retriable failures with backoff, and turn everything
// into exactly one recorded outcome (S5): processed / ignored with the emitted events,
// or a dead-letter record with the reason (a rejected outcome's stable code included).
// On the runtime's shutdown a running handler gets SHUTDOWN_SETTLE_MS to finish what it
// records on the way out, and its outcome is delivered; otherwise (and for every event
// after it) the event is left for redelivery.
// Every ignored or rejected log line carries the outcome's code (core/reasons.ts); invalid
// events are logged at most INVALID_LINES_PER_SECOND a second (a flood is counted, not
// logged line by line). Each delivery of a subscribed event is one stage span
// (infra/tracing.ts; nothing when tracing is off) whose context the emitted events carry.
// It never throws for bad input, and it never drops an event silently.
import {
  FastfenceError,
  InvalidInputError,
  RejectedEventError,
  asFastfenceError,
} from "../../core/errors.ts";
import { settlesWithin, type Clock } from "../../core/clock.ts";
import { envelope, type FfEvent } from "../../events/envelope.ts";
import type { Outcome } from "../../core/decision.ts";
import { ROUND_RECORD_MARGIN_MS } from "../../core/timeout-chain.ts";
import { REFUSAL_CODES } from "../../core/reasons.ts";
import type { StageInfo } from "../../functions/contract.ts";
import type { EventHandler } from "./contract.ts";
import { forIncident, type Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";
import { noSpan, noTracing, type StageSpan, type Tracing } from "../tracing.ts";

/** What the runtime needs from the event catalog. */
export interface CatalogView {
  /** Validates an envelope; throws InvalidInputError naming each bad field. */
  parse(raw: unknown): FfEvent;
  /** Topic an event type is published to. */
  topicOf(type: string): string;
  deadLetterTopic: string;
}

export interface DispatchConfig {
  /**
   * Deadline for one handler run, ms. Default 10000. A power-off round is not bounded by
   * it: the stage executor extends the deadline to the round's own (HandlerContext
   * extendDeadline, core/policy.ts roundDeadline).
   */
  handlerTimeoutMs: number;
  /** Attempts for a retriable failure before dead-lettering. Default 5. */
  maxAttempts: number;
  /** First retry backoff, ms; doubles per attempt. Default 100. */
  retryBackoffMs: number;
}

/**
 * How long a delivery cut short by the runtime's shutdown waits for its handler to finish
 * what it records on the way out, ms: the recording margin of a power-off round
 * (core/timeout-chain.ts) and a second for the handler to return. A handler that settles
 * in time has its outcome (and emitted events) delivered; otherwise the event is left for
 * redelivery, as before.
 */
export const SHUTDOWN_SETTLE_MS = ROUND_RECORD_MARGIN_MS + 1_000;

export const DEFAULT_DISPATCH: DispatchConfig = {
  handlerTimeoutMs: 10_000,
  maxAttempts: 5,
  retryBackoffMs: 100,
};

/**
 * The deadline of one handler run: aborts `ctrl` `timeoutMs` after now, or later once
 * `extend(untilEpochMs)` (HandlerContext.extendDeadline) moved it; it never moves earlier.
 */
export function handlerDeadline(
  ctrl: AbortController,
  clock: Clock,
  timeoutMs: number,
): { extend: (untilEpochMs: number) => void; clear: () => void; at: () => number } {
  const started = clock.now();
  let at = started + timeoutMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(
      () =>
        ctrl.abort(
          new FastfenceError("FF_INTERNAL", `handler exceeded its deadline of ${at - started} ms`, {
            retriable: true,
          }),
        ),
      Math.max(0, at - clock.now()),
    );
  };
  arm();
  return {
    extend: (untilEpochMs) => {
      if (ctrl.signal.aborted || !(untilEpochMs > at)) return;
      at = untilEpochMs;
      arm();
    },
    clear: () => clearTimeout(timer),
    at: () => at,
  };
}

export type DispatchResult =
  | { kind: "done"; event: FfEvent; outcome: Outcome; emitted: FfEvent[] }
  | { kind: "skipped"; event: FfEvent }
  /** `error` is a RejectedEventError (with the outcome's code) when the handler rejected the event. */
  | { kind: "dead-letter"; event?: FfEvent; error: FastfenceError };

/** What the transport itself says about the delivery (not the event's own attributes). */
export interface Transport {
  /** A W3C `traceparent` header of the delivery (HTTP header, Kafka record header). */
  traceparent?: string | undefined;
}

export interface Dispatcher {
  /** `decode` turns the transport message into an unvalidated envelope (may throw InvalidInputError). */
  dispatch(
    decode: () => Record<string, unknown>,
    signal: AbortSignal,
    transport?: Transport,
  ): Promise<DispatchResult>;
}

/**
 * Invalid-event log lines per second, at most: a flood of bad records must not cost a log
 * line each (they are all counted in fastfence_events_dead_lettered_total and all in the
 * dead-letter topic); the next line says how many were not logged (`suppressed`).
 */
const INVALID_LINES_PER_SECOND = 10;

/** A per-second budget of log lines that counts the lines it refused. */
export class LogBudget {
  private readonly perSecond: number;
  private windowStart = -Infinity;
  private used = 0;
  private skipped = 0;
  constructor(perSecond: number) {
    this.perSecond = perSecond;
  }
  /** undefined: do not log; else log, with this many lines skipped since the last one. */
  take(nowMs: number): number | undefined {
    if (nowMs - this.windowStart >= 1000) {
      this.windowStart = nowMs;
      this.used = 0;
    }
    if (this.used >= this.perSecond) {
      this.skipped++;
      return undefined;
    }
    this.used++;
    const skipped = this.skipped;
    this.skipped = 0;
    return skipped;
  }
}

export function createDispatcher(opts: {
  def: StageInfo;
  handler: EventHandler;
  catalog: CatalogView;
  source: string;
  clock: Clock;
  log: Logger;
  metrics: FunctionMetrics;
  config?: Partial<DispatchConfig>;
  /** Default: noTracing. */
  tracing?: Tracing;
}): Dispatcher {
  const { def, handler, catalog, source, clock, log, metrics } = opts;
  const tracing = opts.tracing ?? noTracing;
  const cfg = { ...DEFAULT_DISPATCH, ...opts.config };
  const subscribed = new Set(def.subscriptions.flatMap((s) => s.types));
  const fn = def.name;
  const invalidLines = new LogBudget(INVALID_LINES_PER_SECOND);

  async function runHandler(event: FfEvent, elog: Logger, outer: AbortSignal, span: StageSpan) {
    for (let attempt = 1; ; attempt++) {
      // Stopping already (the delivery before this one settled on the way out): not started.
      if (outer.aborted) throw asFastfenceError(outer.reason);
      const ctrl = new AbortController();
      const onOuter = () => ctrl.abort(outer.reason);
      outer.addEventListener("abort", onOuter, { once: true });
      const deadline = handlerDeadline(ctrl, clock, cfg.handlerTimeoutMs);
      const end = metrics.handlerSeconds.startTimer({ function: fn, type: event.type });
      try {
        const aborted = new Promise<never>((_, reject) =>
          ctrl.signal.addEventListener("abort", () => reject(asFastfenceError(ctrl.signal.reason)), {
            once: true,
          }),
        );
        const ctx = { log: elog, clock, signal: ctrl.signal, extendDeadline: deadline.extend, trace: span };
        const run = handler(event, ctx);
        try {
          return await Promise.race([run, aborted]);
        } catch (err) {
          // Shutdown: a handler records what it did on the way out (a power-off round, on a
          // deadline of its own, ROUND_RECORD_MARGIN_MS); its result, if it comes in that
          // time, is this delivery's outcome, so the events it emits are not lost.
          if (outer.aborted) {
            const late = await settledResult(run, SHUTDOWN_SETTLE_MS);
            if (late) return late;
          }
          throw err;
        }
      } catch (err) {
        const e = asFastfenceError(err);
        metrics.errors.inc({ function: fn, code: e.code });
        if (!e.retriable || attempt >= cfg.maxAttempts || outer.aborted) throw e;
        const backoff = cfg.retryBackoffMs * 2 ** (attempt - 1);
        span.retry(attempt, e.code);
        elog.warn({ err: e.toJSON(), attempt, backoffMs: backoff }, "handler failed; retrying");
        await clock.sleep(backoff, outer);
      } finally {
        end();
        deadline.clear();
        outer.removeEventListener("abort", onOuter);
      }
    }
  }

  /** `run`'s result if it fulfils within `ms`; undefined if it rejects or takes longer. */
  async function settledResult<T>(run: Promise<T>, ms: number): Promise<T | undefined> {
    const outcome = run.then(
      (r) => ({ r }),
      () => undefined,
    );
    return (await settlesWithin(clock, ms, outcome)) ? (await outcome)?.r : undefined;
  }

  /** One subscribed event's delivery, inside its stage span. */
  async function deliver(event: FfEvent, signal: AbortSignal, span: StageSpan): Promise<DispatchResult> {
    const elog = forIncident(log, event.ffincident, event.subject).child({
      eventId: event.id,
      eventType: event.type,
    });
    let result;
    const started = clock.now();
    try {
      result = await runHandler(event, elog, signal, span);
    } catch (err) {
      const e = asFastfenceError(err);
      span.fail(e.code, e.message);
      metrics.outcomes.inc({ function: fn, outcome: "failed" });
      if (signal.aborted) {
        // Shutdown: the runtime redelivers instead of dead-lettering.
        elog.info({ err: e.toJSON() }, "handler interrupted by shutdown; left for redelivery");
        return { kind: "dead-letter", event, error: e };
      }
      metrics.deadLettered.inc({ function: fn, code: e.code, reason: "" });
      elog.error({ err: e.toJSON() }, "handler failed; dead-lettered");
      return { kind: "dead-letter", event, error: e };
    }
    span.outcome(result.outcome, result.emit.length);
    const lag = (clock.now() - Date.parse(event.time)) / 1000;
    if (Number.isFinite(lag))
      metrics.stageLatencySeconds.observe({ function: fn, type: event.type }, Math.max(0, lag));
    metrics.outcomes.inc({ function: fn, outcome: result.outcome.kind });
    if (result.outcome.kind === "rejected") {
      const e = new RejectedEventError(result.outcome.code, result.outcome.reason);
      metrics.deadLettered.inc({ function: fn, code: e.code, reason: result.outcome.code });
      if (REFUSAL_CODES.has(result.outcome.code))
        metrics.inputsRefused.inc({ stage: fn, reason: result.outcome.code });
      elog.warn({ outcome: result.outcome }, "event rejected; dead-lettered");
      return { kind: "dead-letter", event, error: e };
    }
    const now = clock.now();
    // The emitted events carry this span's context (tracing off: a child of the cause's).
    const traceparent = result.emit.length ? span.traceparent() : undefined;
    const emitted = result.emit.map((out) => envelope(out, source, now, event, traceparent));
    for (const ev of emitted) metrics.eventsOut.inc({ function: fn, type: ev.type });
    elog.info(
      {
        outcome: result.outcome,
        emitted: emitted.map((e) => e.type),
        stageMs: Math.round(lag * 1000),
        handlerMs: Math.round(now - started),
      },
      result.outcome.kind === "processed" ? "event processed" : "event ignored",
    );
    return { kind: "done", event, outcome: result.outcome, emitted };
  }

  return {
    async dispatch(decode, signal, transport) {
      let event: FfEvent;
      try {
        event = catalog.parse(decode());
      } catch (err) {
        const e = err instanceof InvalidInputError ? err : asFastfenceError(err, "FF_INVALID_EVENT");
        metrics.eventsIn.inc({ function: fn, type: "invalid" });
        metrics.outcomes.inc({ function: fn, outcome: "invalid" });
        metrics.deadLettered.inc({ function: fn, code: e.code, reason: "" });
        const suppressed = invalidLines.take(clock.now());
        if (suppressed !== undefined)
          log.warn(
            { incident: "none", node: "unknown", err: e.toJSON(), ...(suppressed ? { suppressed } : {}) },
            "invalid event; dead-lettered",
          );
        return { kind: "dead-letter", error: e };
      }
      metrics.eventsIn.inc({ function: fn, type: event.type });
      if (!subscribed.has(event.type)) return { kind: "skipped", event };
      if (!tracing.enabled) return deliver(event, signal, noSpan);
      const input = {
        stage: fn,
        input: event.type,
        node: event.subject,
        incident: event.ffincident,
        eventId: event.id,
        traceparent: event.traceparent,
        transport: transport?.traceparent,
      };
      return tracing.stage(input, (span) => deliver(event, signal, span));
    },
  };
}
