// What a pipeline stage is (functions/<name>/handler.ts exports one `stage`): what it
// consumes and emits, what state its adapter must read for an input (`locate`), and the
// pure decision (`decide`). The stage executor (infra/runtime/stage-executor.ts) reads the
// view, calls decide, executes the actions in order, feeds action results back into the
// same decide, and publishes `emit` only if every action succeeded (core/decision.ts states
// the contract). Types only: this module, like everything in functions/, must never import
// infra/ or app/ and never perform I/O.
import type { FfEvent } from "../events/envelope.ts";
import type { Decision, DecideInput, Resync, ViewRequest } from "../core/decision.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import type { NodeFence, Phase } from "../core/incident.ts";

export interface Subscription {
  topic: string;
  /** Event types this function handles on that topic; others are skipped (not an error). */
  types: readonly string[];
}

/** A stage as the runtimes and the deployment see it: its name and its events. */
export interface StageInfo {
  /** Folder and service name, e.g. "detect". */
  name: string;
  description: string;
  subscriptions: readonly Subscription[];
  /** Event types this stage may emit. */
  emits: readonly string[];
  /** On the fencing critical path: min-scale >= 2, never scaled to zero. */
  critical: boolean;
}

/** What a stage's checks before the view (screen, sameAs) get: the event, the policy, the time. */
export interface PreViewInput {
  event: FfEvent;
  policy: FencingPolicySpec;
  now: number;
}

export interface PureStage extends StageInfo {
  locate(event: FfEvent): ViewRequest;
  /**
   * Optional cheap pre-check from the event and the policy alone: a Decision here (always
   * "ignored") skips reading the view. It must be a subset of decide's own checks, so
   * skipping it never changes an outcome; it only spares the API server the reads.
   */
  screen?(input: PreViewInput): Decision | undefined;
  /**
   * Optional: the identity of what an input says, for inputs that arrive more than once
   * (every detect replica forwards the same signed evidence). After this replica decided
   * an input with a write, a later input with the same key, within the policy's evidence
   * window, is answered ignored (DuplicateEvidence) without reading the view. The key must
   * cover everything decide reads from the event (signature included), so the copy carries
   * nothing the incident does not already hold; any change since is acted on by the input
   * that made it, which is decided in full.
   */
  sameAs?(input: PreViewInput): string | undefined;
  /**
   * Optional, for stages whose locate asks for the cluster lists (all nodes, open
   * incidents): given the view read without them (both empty), whether decide would use
   * them. When false, the adapter decides on that view and never lists the cluster. It
   * must be exact — false only if decide's result cannot depend on the lists.
   */
  clusterNeeded?(input: DecideInput<FfEvent>): boolean;
  /**
   * Decides on an event (or, with `input.result`, on the result of an action the previous
   * decision for that event asked for). Pure: no I/O, no clock.
   */
  decide(input: DecideInput<FfEvent>): Decision;
  /**
   * Optional: what to read to re-drive one open incident without an event (a periodic
   * resync). A stage without it ignores resyncs.
   */
  locateResync?(input: Resync): ViewRequest;
  /**
   * The incident phases this stage re-drives (required with locateResync): the reconciler
   * (infra/runtime/reconciler.ts) resyncs only open incidents in these phases.
   */
  resyncPhases?: readonly Phase[];
  /**
   * Optional: of the open incidents in resyncPhases, those worth a resync, judged from the
   * listed object alone (no view read). It must only skip incidents `resync` would ignore.
   */
  resyncWants?(incident: NodeFence, now: number, policy: FencingPolicySpec): boolean;
  /** Decides on a resync's fresh view; required with locateResync. */
  resync?(input: DecideInput<Resync>): Decision;
}
