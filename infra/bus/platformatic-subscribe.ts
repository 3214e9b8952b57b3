// Consumer-group subscriptions on @platformatic/kafka, with the contract of
// kafkajs-subscribe.ts: records in partition order, each offset committed only after its
// handler (and, for batches, its `settled`) resolved, so delivery is at-least-once; a
// handler failure or a consumer the library gives up on means a new consumer a moment
// later, which starts again from the committed offsets. Every request of the consumer is
// bounded (platformatic-client.ts): heartbeats, fetches and commits to a frozen broker
// time out and go to the new coordinator or leader. Never logs record values.
import { Consumer, type Message, type MessagesStream } from "@platformatic/kafka";
import { settlesWithin, systemClock } from "../../core/clock.ts";
import type { Logger } from "../log.ts";
import type { BusRecord, SubscribeOptions, Subscription } from "./bus.ts";
import type { KafkaSecurity } from "./kafka-security.ts";
import { clientOptions, toRecord, type ClientSettings } from "./platformatic-client.ts";

/** Records handed to SubscribeOptions.onBatch at once, at most. */
const BATCH_SLICE = 1000;
/** Batches handled whose outcomes are still being recorded, at most. */
const MAX_UNSETTLED = 4;
/** Records taken from the stream but not handled yet before it is paused. */
const QUEUE_HIGH = 2 * BATCH_SLICE;
/** Pause before a failed or crashed consumer is rebuilt, ms. */
const REBUILD_MS = 500;
/** Tries of a subscription's first start, REBUILD_MS apart. */
const START_TRIES = 10;

/** The bus settings consumers use (KafkaBusConfig, defaults applied). */
export interface ConsumerSettings extends ClientSettings {
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  log?: Logger;
}

type Stream = MessagesStream<Buffer, Buffer, Buffer, Buffer>;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());
/** Waits for `p` at most `ms` (its outcome is ignored). */
const bounded = (p: Promise<unknown>, ms: number) => settlesWithin(systemClock, ms, p);
const commit = (m: Message) => void (m.commit() as Promise<void>).catch(() => undefined);

/** What pump() uses of a consumer stream (a MessagesStream; a stand-in in unit tests). */
export interface RecordStream {
  on(event: "data", listener: (m: Message) => void): unknown;
  on(event: "error" | "close", listener: (err?: unknown) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  isPaused(): boolean;
}

/**
 * Takes records from the stream and hands them to the subscriber, in order per partition;
 * a record's offset is committed once its handler resolved (onRecord), or once its
 * batch's `settled` and every earlier batch's of that partition resolved (onBatch), at
 * most MAX_UNSETTLED batches being unsettled. Resolves `failed` with the first error
 * (handler, settle, stream). stop() ends it after the batch under way and its outcomes.
 */
export function pump(stream: RecordStream, opts: SubscribeOptions) {
  const queue: Message[] = [];
  let wake: (() => void) | undefined;
  let stopped = false;
  let failure: ((err: unknown) => void) | undefined;
  const failed = new Promise<unknown>((r) => (failure = r));
  const fail = (err: unknown) => {
    if (stopped) return;
    stopped = true;
    failure?.(err);
    wake?.();
  };
  stream.on("data", (m: Message) => {
    queue.push(m);
    if (queue.length >= QUEUE_HIGH) stream.pause();
    wake?.();
  });
  stream.on("error", (err) => fail(err));
  stream.on("close", () => fail(new Error("the consumer stream closed")));
  /** Per partition: the promise of its last batch's outcomes. */
  const lastSettled = new Map<string, Promise<void>>();
  const unsettled = new Set<Promise<void>>();
  const handle = async (taken: Message[]): Promise<void> => {
    if (!opts.onBatch) {
      for (const m of taken) {
        if (stopped) return;
        await opts.onRecord(toRecord(m));
        commit(m);
      }
      return;
    }
    const byPartition = new Map<string, Message[]>();
    for (const m of taken) {
      const k = `${m.topic}/${m.partition}`;
      const list = byPartition.get(k) ?? [];
      list.push(m);
      byPartition.set(k, list);
    }
    for (const [k, msgs] of byPartition) {
      if (stopped) return;
      const recs: BusRecord[] = msgs.map(toRecord);
      const r = await opts.onBatch(recs);
      const last = msgs[msgs.length - 1]!;
      const p = Promise.all([lastSettled.get(k), r?.settled]).then(() => commit(last));
      lastSettled.set(k, p);
      unsettled.add(p);
      p.then(
        () => unsettled.delete(p),
        (err: unknown) => fail(err),
      );
      while (unsettled.size > MAX_UNSETTLED && !stopped) await Promise.race(unsettled);
    }
  };
  const loop = (async () => {
    while (!stopped) {
      if (queue.length === 0) {
        if (stream.isPaused()) stream.resume();
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
        continue;
      }
      const taken = queue.splice(0, BATCH_SLICE);
      if (queue.length < BATCH_SLICE && stream.isPaused()) stream.resume();
      try {
        await handle(taken);
      } catch (err) {
        fail(err);
      }
    }
    await Promise.allSettled(unsettled);
  })();
  return {
    failed,
    fail,
    stop: async () => {
      stopped = true;
      wake?.();
      await loop;
    },
  };
}

export class PlatformaticSubscriptions {
  private readonly cfg: ConsumerSettings;
  private readonly security: KafkaSecurity;
  /** Every live subscription's close, for closeAll. */
  private readonly closers = new Set<() => Promise<void>>();

  constructor(cfg: ConsumerSettings, security: KafkaSecurity) {
    this.cfg = cfg;
    this.security = security;
  }

  /** How long closing one consumer may take before it is left behind, ms. */
  private get closeWaitMs(): number {
    return Math.max(3000, 3 * this.cfg.requestTimeoutMs);
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    let resolveReady!: () => void;
    const ready = new Promise<void>((r) => (resolveReady = r));
    let closed = false;
    let current: { consumer: Consumer; stream: Stream; pump: ReturnType<typeof pump> } | undefined;
    let rebuild: NodeJS.Timeout | undefined;
    const log = this.cfg.log;
    const rebalanceTimeout = Math.max(this.cfg.sessionTimeoutMs, 3000);
    const stopCurrent = async () => {
      const c = current;
      current = undefined;
      if (!c) return;
      await c.pump.stop();
      await bounded(c.stream.close(), this.closeWaitMs);
      await bounded(c.consumer.close(true), this.closeWaitMs);
    };
    const start = async (): Promise<void> => {
      const consumer = new Consumer({
        ...clientOptions(this.cfg, this.security, "-consumer"),
        // The coordinator holds a JoinGroup until every member it knows has joined again or
        // the rebalance timeout passed: after a coordinator restart, this consumer's own
        // member from before. With the fencing path's 1 s request timeout every such join
        // timed out, and each retry left one more member to wait for: a consumer took up to
        // a minute to consume again after a one-broker restart (bus-kafka.test.ts). Cost: a
        // request of this consumer to a frozen broker is dropped only after this long.
        requestTimeout: this.cfg.requestTimeoutMs + rebalanceTimeout,
        groupId: opts.groupId,
        sessionTimeout: this.cfg.sessionTimeoutMs,
        heartbeatInterval: this.cfg.heartbeatIntervalMs,
        rebalanceTimeout,
        // How long a broker holds an empty fetch; it adds no latency (kafkajs-subscribe.ts).
        maxWaitTime: 500,
        autocommit: false,
      });
      consumer.on("consumer:group:join", () => resolveReady());
      // The library emits "error" when a re-join fails (it then stops heartbeating: this
      // consumer is done); an EventEmitter without a listener would throw it instead.
      consumer.on("error", (err: unknown) => {
        if (current?.consumer === consumer) current.pump.fail(err);
      });
      consumer.on("consumer:heartbeat:error", (e) =>
        log?.debug(
          { incident: "none", node: "none", groupId: opts.groupId, err: e.error },
          "Kafka heartbeat failed",
        ),
      );
      let stream: Stream;
      try {
        stream = await consumer.consume({
          topics: [...opts.topics],
          mode: "committed",
          fallbackMode: opts.fromBeginning ? "earliest" : "latest",
          autocommit: false,
          sessionTimeout: this.cfg.sessionTimeoutMs,
          heartbeatInterval: this.cfg.heartbeatIntervalMs,
          rebalanceTimeout,
          maxWaitTime: 500,
        });
      } catch (err) {
        await bounded(consumer.close(true), this.closeWaitMs);
        throw err;
      }
      resolveReady();
      const p = pump(stream, opts);
      current = { consumer, stream, pump: p };
      void p.failed.then(async (err) => {
        if (closed || current?.pump !== p) return;
        log?.warn(
          { incident: "none", node: "none", groupId: opts.groupId, err },
          "Kafka consumer stopped; rebuilding it from the committed offsets",
        );
        await stopCurrent();
        if (!closed) rebuild = setTimeout(() => void restartLater(), REBUILD_MS);
      });
    };
    const restartLater = async (): Promise<void> => {
      if (closed) return;
      try {
        await start();
      } catch (err) {
        log?.warn(
          { incident: "none", node: "none", groupId: opts.groupId, err },
          "Kafka consumer restart failed",
        );
        rebuild = setTimeout(() => void restartLater(), 2 * REBUILD_MS);
      }
    };
    // The first start is retried for a while: right after the cluster starts, the group
    // coordinator is not available until __consumer_offsets has leaders.
    for (let tries = 1; ; tries++) {
      try {
        await start();
        break;
      } catch (err) {
        if (tries >= START_TRIES) throw err;
        await sleep(REBUILD_MS);
      }
    }
    const close = async () => {
      closed = true;
      clearTimeout(rebuild);
      this.closers.delete(close);
      await stopCurrent();
    };
    this.closers.add(close);
    return { ready, close };
  }

  /** Closes every subscription (failures ignored). */
  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.closers].map((c) => c()));
  }
}
