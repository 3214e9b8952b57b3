// The contract between an event handler and the two runtimes that host it (Kafka consumer,
// Knative HTTP): the handler gets a validated event and a context (log, clock, abort
// signal) and returns exactly one outcome plus the events to publish. The runtime validates
// every incoming event against the catalog before the handler sees it, publishes what the
// handler returns, and records the outcome (S5). Types only; never I/O.
import type { Clock } from "../../core/clock.ts";
import type { Outcome } from "../../core/decision.ts";
import type { FfEvent, OutgoingEvent } from "../../events/envelope.ts";
import type { Logger } from "../log.ts";
import type { StageTrace } from "../tracing.ts";

export interface HandlerResult {
  outcome: Outcome;
  emit: OutgoingEvent[];
}

export interface HandlerContext {
  log: Logger;
  clock: Clock;
  /** Aborted when the runtime shuts down or the delivery's deadline passes. */
  signal: AbortSignal;
  /**
   * Moves this delivery's deadline to `untilEpochMs` (ms of `clock`) when that is later;
   * never earlier. For work with its own bounded budget longer than the generic handler
   * deadline: a power-off round (until its start + powerOffTimeoutMs + the recording margin).
   */
  extendDeadline(untilEpochMs: number): void;
  /** This handling's trace (infra/tracing.ts); absent or inert when tracing is off. */
  trace?: StageTrace;
}

export type EventHandler = (event: FfEvent, ctx: HandlerContext) => Promise<HandlerResult>;
