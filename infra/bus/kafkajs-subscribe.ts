// Consumer-group subscriptions on kafkajs: one consumer per subscription, tuned so a dead
// broker or group member costs seconds (short session, fetch and retry timings; the
// failover fixes in kafkajs-failover.ts do the rest), offsets auto-committed only after
// the handler resolved (at-least-once; per record, or per slice of a fetched batch for a
// subscriber that takes batches), and a consumer that kafkajs gives up on (a crash
// it does not restart by itself) rebuilt after a second. Never logs record values.
import type { Consumer, EachBatchHandler, Kafka } from "kafkajs";
import type { Logger } from "../log.ts";
import type { BusRecord, SubscribeOptions, Subscription } from "./bus.ts";
import { toRecord } from "./kafkajs-records.ts";

/** Records handed to SubscribeOptions.onBatch at once, at most. */
const BATCH_SLICE = 1000;
/** Slices handled whose outcomes are still being recorded, at most. */
const MAX_UNSETTLED = 4;

/**
 * A fetched batch handed to `onBatch` in slices of at most BATCH_SLICE records, in order:
 * a slice's offsets are resolved once it and every earlier slice have settled (their
 * outcomes recorded), while later slices are already being handled (at most
 * MAX_UNSETTLED unsettled, which bounds the memory they hold); the group is heartbeated
 * between slices. A failure stops taking slices and, once the earlier ones have settled,
 * redelivers from the first unresolved offset.
 */
export function inSlices(onBatch: NonNullable<SubscribeOptions["onBatch"]>): EachBatchHandler {
  return async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
    const msgs = batch.messages;
    const settled: Promise<void>[] = [];
    let failed = false;
    try {
      for (let i = 0; i < msgs.length && !failed && isRunning() && !isStale(); i += BATCH_SLICE) {
        const slice: BusRecord[] = msgs
          .slice(i, i + BATCH_SLICE)
          .map((m) => toRecord(batch.topic, batch.partition, m));
        const r = await onBatch(slice);
        const last = slice[slice.length - 1]!.offset;
        const p = Promise.all([settled.at(-1), r?.settled]).then(() => resolveOffset(last));
        p.catch(() => (failed = true)); // awaited below
        settled.push(p);
        if (settled.length > MAX_UNSETTLED) await settled[settled.length - 1 - MAX_UNSETTLED];
        await heartbeat();
      }
    } catch (err) {
      await Promise.allSettled(settled);
      throw err;
    }
    await Promise.all(settled);
  };
}

/** The bus settings consumers use (KafkaBusConfig, defaults applied). */
export interface ConsumerSettings {
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  metadataMaxAgeMs: number;
  log?: Logger;
}

export class GroupSubscriptions {
  private readonly kafka: Kafka;
  private readonly cfg: ConsumerSettings;
  /** Every live consumer, for closeAll. */
  private readonly consumers = new Set<Consumer>();

  constructor(kafka: Kafka, cfg: ConsumerSettings) {
    this.kafka = kafka;
    this.cfg = cfg;
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    let resolveReady!: () => void;
    const ready = new Promise<void>((r) => (resolveReady = r));
    let closed = false;
    let current: Consumer | undefined;
    let rebuild: NodeJS.Timeout | undefined;
    const start = async (): Promise<void> => {
      const consumer = this.kafka.consumer({
        groupId: opts.groupId,
        sessionTimeout: this.cfg.sessionTimeoutMs,
        heartbeatInterval: this.cfg.heartbeatIntervalMs,
        rebalanceTimeout: Math.max(this.cfg.sessionTimeoutMs, 3000),
        // How long a broker holds an empty fetch. It adds no latency (a fetch returns as
        // soon as a record arrives), it only bounds idle polling: 100 ms cost every replica
        // ~10 fetches per second per broker, a visible share of a small node's CPU.
        maxWaitTimeInMs: 500,
        metadataMaxAge: this.cfg.metadataMaxAgeMs,
        allowAutoTopicCreation: false,
        // A failed fetch round (e.g. a partition leader that just died) pauses every fetch
        // of this consumer for the backoff, so keep it short. After 10 failures in a row
        // kafkajs restarts the consumer (reconnect, re-join): a last resort, since the
        // failover fixes (kafkajs-failover.ts) handle a dead leader or coordinator.
        retry: { initialRetryTime: 100, maxRetryTime: 250, retries: 10 },
      });
      consumer.on(consumer.events.GROUP_JOIN, () => resolveReady());
      consumer.on(consumer.events.CRASH, (e) => {
        const { error, restart } = e.payload as { error: unknown; restart: boolean };
        this.cfg.log?.warn(
          { incident: "none", node: "none", groupId: opts.groupId, restart, err: error },
          "Kafka consumer crashed",
        );
        // kafkajs restarts by itself after retriable errors only; after any other error
        // the consumer would stay dead, so build a new one.
        if (!restart && !closed && current === consumer) {
          this.consumers.delete(consumer);
          rebuild = setTimeout(() => void restartLater(), 1000);
        }
      });
      this.consumers.add(consumer);
      // Current before it runs: run() awaits the first group join, and a crash during that
      // join (e.g. an ACL not yet on every broker) must already rebuild this consumer.
      current = consumer;
      try {
        await consumer.connect();
        await consumer.subscribe({ topics: [...opts.topics], fromBeginning: opts.fromBeginning ?? false });
        const onBatch = opts.onBatch?.bind(opts);
        await consumer.run({
          autoCommit: true,
          autoCommitInterval: 500,
          ...(onBatch
            ? {
                // Resolved offsets are committed within autoCommitInterval, so a fetch of
                // thousands of records neither waits for its end to commit nor outlives
                // the session (inSlices heartbeats).
                eachBatchAutoResolve: false,
                eachBatch: inSlices(onBatch),
              }
            : {
                eachMessage: async ({ topic, partition, message }) => {
                  await opts.onRecord(toRecord(topic, partition, message));
                },
              }),
        });
      } catch (err) {
        this.consumers.delete(consumer);
        await consumer.disconnect().catch(() => undefined);
        throw err;
      }
    };
    const restartLater = async (): Promise<void> => {
      if (closed) return;
      try {
        await start();
      } catch (err) {
        this.cfg.log?.warn(
          { incident: "none", node: "none", groupId: opts.groupId, err },
          "Kafka consumer restart failed",
        );
        rebuild = setTimeout(() => void restartLater(), 1000);
      }
    };
    await start();
    return {
      ready,
      close: async () => {
        closed = true;
        clearTimeout(rebuild);
        if (current) {
          this.consumers.delete(current);
          await current.disconnect();
        }
      },
    };
  }

  /** Disconnects every consumer (failures ignored). */
  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.consumers].map((c) => c.disconnect()));
    this.consumers.clear();
  }
}
