// One background loop shared by the report loops of a stage's process (remediator
// conflicts, event-source coverage): run a pass, sleep the interval, again until stopped.
// A failing pass is logged once per distinct error (not every interval) with what it
// leaves stale, and the loop goes on. It never decides anything and never throws.
import type { Clock } from "../../core/clock.ts";
import { asFastfenceError } from "../../core/errors.ts";
import type { Logger } from "../log.ts";

export interface PeriodicLoop {
  /** One pass now (tests; the loop runs its own). Never throws. */
  pass(): Promise<void>;
  stop(): void;
}

export function startPeriodic(o: {
  /** What the loop is, for the stop reason. */
  name: string;
  intervalMs: number;
  clock: Clock;
  log: Logger;
  /** Logged when a pass fails: what is not updated now. */
  staleMessage: string;
  body(now: number): Promise<void>;
}): PeriodicLoop {
  const stopping = new AbortController();
  let lastError = "";
  async function pass(): Promise<void> {
    try {
      await o.body(o.clock.now());
      lastError = "";
    } catch (err) {
      const e = asFastfenceError(err);
      if (e.message !== lastError)
        o.log.warn({ incident: "none", node: "none", err: e.toJSON() }, o.staleMessage);
      lastError = e.message;
    }
  }
  void (async () => {
    while (!stopping.signal.aborted) {
      await pass();
      await o.clock.sleep(o.intervalMs, stopping.signal).catch(() => undefined);
    }
  })();
  return { pass, stop: () => stopping.abort(new Error(`${o.name} stopped`)) };
}
