// The ISR keepalive of a Kafka-runtime replica (events/keepalive.ts says why): while the
// bus reports trouble with a broker (a fetch, heartbeat or send that could not reach it;
// Bus.onBrokerTrouble), and for TROUBLE_WINDOW_MS after the last report, every `everyMs`
// one keepalive record to every partition of each of the replica's output topics, with
// acks from the leader only. Only then: a keepalive stream kept up all the time would fill
// the brokers' disks (the pipeline topics keep records for weeks, and the bridge copies
// every record into the Broker's topic). Rounds do not wait for each other: a send to a
// dead leader may take the client's retries (seconds), and the live partitions must keep
// getting their records meanwhile, which is the whole point. A failed send is logged at
// debug and forgotten; the keepalive never fails, delays or blocks the stage's own
// publishing, and it stops with the replica's stop signal.
import type { Clock } from "../../core/clock.ts";
import { keepaliveRecord } from "../../events/keepalive.ts";
import type { Bus } from "../bus/bus.ts";
import type { Logger } from "../log.ts";

/**
 * How long keepalives go on after the last trouble report, ms: past Kafka's 9 s broker
 * session (when the controller fences the dead broker and moves its leaderships) and a
 * KRaft election on top, with margin.
 */
export const TROUBLE_WINDOW_MS = 20_000;

export interface KeepaliveOptions {
  bus: Pick<Bus, "publishToEveryPartition" | "onBrokerTrouble">;
  topics: readonly string[];
  everyMs: number;
  /** The replica's event source, written into each record's header. */
  source: string;
  clock: Clock;
  log: Logger;
  signal: AbortSignal;
}

/** Runs until `signal` aborts; resolves then (without waiting for sends still under way). */
export async function runKeepalive(opts: KeepaliveOptions): Promise<void> {
  const { bus, topics, everyMs, clock, log, signal } = opts;
  if (everyMs <= 0 || topics.length === 0) return;
  const record = keepaliveRecord(opts.source);
  let lastTrouble = Number.NEGATIVE_INFINITY;
  let wake: (() => void) | undefined;
  const unsubscribe = bus.onBrokerTrouble(() => {
    lastTrouble = clock.now();
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    while (!signal.aborted) {
      if (clock.now() - lastTrouble > TROUBLE_WINDOW_MS) {
        await new Promise<void>((r) => (wake = r)); // until the next report (or the stop)
        wake = undefined;
        if (signal.aborted) return;
        log.debug(
          { incident: "none", node: "none", topics },
          "keepalive: a broker is unreachable; writing keepalives",
        );
      }
      for (const topic of topics)
        void bus.publishToEveryPartition(topic, record).then(
          (acked) => {
            if (acked === 0)
              log.debug({ incident: "none", node: "none", topic }, "keepalive: no partition leader answered");
          },
          (err: unknown) => log.debug({ incident: "none", node: "none", topic, err }, "keepalive failed"),
        );
      try {
        await clock.sleep(everyMs, signal);
      } catch {
        return; // aborted
      }
    }
  } finally {
    unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
