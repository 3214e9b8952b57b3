// The ISR keepalive of a Kafka-runtime replica (events/keepalive.ts says why): every
// `everyMs` one keepalive record to every partition of each of the replica's output
// topics, with acks from the leader only. Rounds do not wait for each other: a send to a
// dead leader may take the client's retries (seconds), and the live partitions must keep
// getting their records meanwhile, which is the whole point. A failed send is logged at
// debug and forgotten; the keepalive never fails, delays or blocks the stage's own
// publishing, and it stops with the replica's stop signal.
import type { Clock } from "../../core/clock.ts";
import { keepaliveRecord } from "../../events/keepalive.ts";
import type { Bus } from "../bus/bus.ts";
import type { Logger } from "../log.ts";

export interface KeepaliveOptions {
  bus: Pick<Bus, "publishToEveryPartition">;
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
  while (!signal.aborted) {
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
}
