// The contract between a function and the two runtimes that host it (Kafka consumer,
// Knative HTTP). A function folder exports one FunctionDefinition: what it consumes,
// what it emits, and a factory that builds its event handler from injected adapters.
// The runtime validates every incoming event against the catalog before the handler
// sees it, publishes what the handler returns, and records the outcome (S5). This
// module declares types only; it must never perform I/O.
import type { FfEvent, OutgoingEvent } from "../events/envelope.ts";
import type { Logger } from "../infra/log.ts";
import type { Clock } from "../core/clock.ts";
import type { Decision, DecideInput, ViewRequest } from "../core/decision.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import type { IgnoreCode, RejectCode } from "../core/reasons.ts";

/**
 * What happened to one delivered event. Every event ends in exactly one outcome. An ignored
 * or rejected outcome carries a stable `code` (core/reasons.ts: match on it) and a human
 * `reason` (free text for logs and operators: never match on it).
 */
export type Outcome =
  /** The handler acted on it (state written and/or events emitted). */
  | { kind: "processed"; detail?: string }
  /** Valid but nothing to do (duplicate, stale, below threshold); code and reason are recorded. */
  | { kind: "ignored"; code: IgnoreCode; reason: string }
  /** Valid envelope but unusable content; goes to the dead-letter topic with the code and reason. */
  | { kind: "rejected"; code: RejectCode; reason: string };

export interface HandlerResult {
  outcome: Outcome;
  emit: OutgoingEvent[];
}

export interface HandlerContext {
  log: Logger;
  clock: Clock;
  /** Aborted when the runtime shuts down or the delivery times out. */
  signal: AbortSignal;
}

export type EventHandler = (event: FfEvent, ctx: HandlerContext) => Promise<HandlerResult>;

export interface Subscription {
  topic: string;
  /** Event types this function handles on that topic; others are skipped (not an error). */
  types: readonly string[];
}

export interface FunctionDefinition<Deps = unknown> {
  /** Folder and service name, e.g. "detect". */
  name: string;
  description: string;
  subscriptions: readonly Subscription[];
  /** Event types this function may emit. */
  emits: readonly string[];
  /** On the fencing critical path: min-scale >= 2, never scaled to zero. */
  critical: boolean;
  /** Builds the handler from its adapters (Kubernetes, BMC, ...). */
  create(deps: Deps): EventHandler;
}

/**
 * A stage's pure half (functions/<name>/handler.ts): what it consumes and emits, what state
 * its adapter must read for an event (`locate`), and the decision (`decide`). The adapter
 * (written per runtime) reads the view, calls decide, executes the actions in order and
 * publishes `emit` only if they all succeeded (see core/decision.ts).
 */
export interface PureStage<I extends DecideInput<FfEvent> = DecideInput<FfEvent>> {
  name: string;
  description: string;
  subscriptions: readonly Subscription[];
  emits: readonly string[];
  critical: boolean;
  locate(event: FfEvent): ViewRequest;
  /**
   * Optional cheap pre-check from the event and the policy alone: a Decision here (always
   * "ignored") skips reading the view. It must be a subset of decide's own checks, so
   * skipping it never changes an outcome; it only spares the API server the reads.
   */
  screen?(input: { event: FfEvent; policy: FencingPolicySpec; now: number }): Decision | undefined;
  /**
   * Optional, for stages whose locate asks for the cluster lists (all nodes, open
   * incidents): given the view read without them (both empty), whether decide would use
   * them. When false, the adapter decides on that view and never lists the cluster. It
   * must be exact — false only if decide's result cannot depend on the lists.
   */
  clusterNeeded?(input: I): boolean;
  decide(input: I): Decision;
}

/** A FunctionDefinition for a pure stage: its metadata plus how to build the handler. */
export function stageFunction<Deps>(
  stage: PureStage<never> | PureStage,
  create: (deps: Deps) => EventHandler,
): FunctionDefinition<Deps> {
  const { name, description, subscriptions, emits, critical } = stage;
  return { name, description, subscriptions, emits, critical, create };
}
