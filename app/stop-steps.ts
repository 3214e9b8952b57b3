// Stopping a stage replica in a fixed order, each step bounded: a step that has not
// finished within its bound is left to finish in the background, with a warning naming
// it, and the next step starts. A replica's stop therefore ends within the sum of the
// bounds even when a broker, a BMC or the API server stops answering. Steps run one at a
// time, in the order given: the caller puts first what must end first (handling records).
// Never throws: a step's error is logged and the next step runs.
import { settlesWithin, type Clock } from "../core/clock.ts";
import type { Logger } from "../infra/log.ts";

/** How long one step of a replica's stop may take before the next one starts, ms. */
export const STOP_STEP_MS = 5_000;

export interface StopStep {
  /** What the step stops, for the warning ("the Kafka runtime", "background loops"). */
  name: string;
  run: () => Promise<unknown> | unknown;
}

/** Runs each step in order, waiting at most `stepMs` for each; resolves once every step ended or timed out. */
export async function stopInOrder(
  steps: readonly StopStep[],
  deps: { clock: Clock; log: Logger; stepMs?: number },
): Promise<void> {
  const stepMs = deps.stepMs ?? STOP_STEP_MS;
  for (const step of steps) {
    const done = Promise.resolve()
      .then(step.run)
      .catch((err: unknown) =>
        deps.log.warn(
          { incident: "none", node: "none", step: step.name, err },
          `stopping ${step.name} failed`,
        ),
      );
    const inTime = await settlesWithin(deps.clock, stepMs, done);
    if (!inTime)
      deps.log.warn(
        { incident: "none", node: "none", step: step.name, stepMs },
        `stopping ${step.name} took longer than ${stepMs} ms; going on without waiting for it`,
      );
  }
}

/** What a stage replica stops (app/host.ts). */
export interface ReplicaParts {
  rt: { stop(): Promise<void> };
  reconciler?: { stop(): Promise<void> };
  report: { stop(): Promise<void> };
  /** The bus, when the replica created it (not when it was handed one). */
  ownBus?: { close(): Promise<void> };
  tracing: { shutdown(): Promise<void> };
}

/**
 * A replica's stop: handling first (nothing is handled once a stop began), then the
 * reconciler, the background loops, the bus it owns and tracing, each step bounded.
 */
export function stopReplica(
  p: ReplicaParts,
  deps: { clock: Clock; log: Logger; stepMs?: number },
): Promise<void> {
  return stopInOrder(
    [
      { name: "the event runtime", run: () => p.rt.stop() },
      { name: "the reconciler", run: () => p.reconciler?.stop() },
      { name: "the background loops", run: () => p.report.stop() },
      { name: "the Kafka clients", run: () => p.ownBus?.close() },
      { name: "tracing", run: () => p.tracing.shutdown() },
    ],
    deps,
  );
}
