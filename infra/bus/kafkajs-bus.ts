// Bus implementation on kafkajs (pure JavaScript, the client the customer's design
// names). Tuned for the fencing critical path: short request and session timeouts,
// a producer that never waits on one partition (records are spread by key only for
// ordering of one node's observations; the incident state lives in the Kubernetes API),
// acks from all in-sync replicas. Never logs record values (they are event data).
import { Kafka, logLevel, type Consumer, type IHeaders, type KafkaMessage, type Producer } from "kafkajs";
import { FastfenceError } from "../../core/errors.ts";
import type { Logger } from "../log.ts";
import type { KafkaRecord } from "../../events/codec.ts";
import type { Bus, BusRecord, SubscribeOptions, Subscription, TopicSpec } from "./bus.ts";
import { applyKafkaJsFailoverFixes } from "./kafkajs-failover.ts";

/**
 * How long a partition that missed the hedge deadline is avoided as a first choice, ms.
 * Covers a dead leader until the controller moves it (broker.session.timeout.ms, plus a
 * controller election if the controller died too); a healthy partition is tried again
 * as the third hedge choice meanwhile, and cleared as soon as it answers in time.
 */
const SLOW_PARTITION_MS = 5000;

export interface KafkaBusConfig {
  /** Comma-separated host:port list. Several brokers: a dead one is skipped. */
  brokers: string;
  /** Client id sent to the broker, e.g. "fastfence-detect-<pod>". */
  clientId: string;
  /**
   * Consumer group session timeout, ms. Default 6000 (the broker's default
   * group.min.session.timeout.ms). Lower means a dead consumer's partitions move
   * sooner, but a long GC pause or CPU starvation can cause needless rebalances.
   * The broker must allow it (group.min.session.timeout.ms).
   */
  sessionTimeoutMs?: number;
  /** Heartbeat interval, ms. Default sessionTimeoutMs / 3. */
  heartbeatIntervalMs?: number;
  /**
   * Per-request timeout, ms. Default 1000. A request to a dead broker (metadata, produce)
   * is given up on after this and retried elsewhere; after a node death every client's
   * first metadata refresh may pick that broker, so this bounds the detection stall. Too
   * low for a loaded broker causes needless retries.
   */
  requestTimeoutMs?: number;
  /** TCP connect timeout, ms. Default 1000 (a dead node's address never answers). */
  connectionTimeoutMs?: number;
  /**
   * Longest age of the client's partition-leader map, ms. Default 1000. kafkajs refreshes
   * it only when it expires or on a "not leader" answer, not when a leader's broker stops
   * answering: until the next refresh a consumer keeps fetching from the dead broker, and
   * every failed fetch stops all of its fetches (healthy brokers too) for a backoff. So this
   * bounds the consumer stall after a broker death (plus the controller's
   * broker.session.timeout.ms to move the leaders). Each refresh is one small Metadata
   * request per client; 1 s costs nothing measurable. Higher (kafkajs: 300000) means a
   * stall of up to that long.
   */
  metadataMaxAgeMs?: number;
  /**
   * Hedged publishing, ms. Default 300. A record goes to one partition (round-robin; events
   * need no cross-partition order, the incident state is in the API); if that partition's
   * leader has not acknowledged within this time (it may sit on a dead node), the same
   * record is also sent to the next partition, and so on (up to 3), and later records
   * start elsewhere for a few seconds. Duplicates are harmless (every consumer write is
   * resourceVersion-guarded; consumers skip copies of an event they handled). 0 turns
   * hedging off.
   */
  hedgeAfterMs?: number;
  /**
   * Acknowledgement: "all" (default; every in-sync replica — a record survives a broker
   * loss, but a dead follower delays acks until the controller fences it, about
   * broker.session.timeout.ms) or "leader" (faster through a broker death, but a record
   * acknowledged just before its leader dies can be lost).
   */
  acks?: "all" | "leader";
  log?: Logger;
}

function toHeaders(h: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) {
    if (v === undefined) continue;
    const first = Array.isArray(v) ? v[0] : v;
    if (first !== undefined) out[k] = Buffer.isBuffer(first) ? first.toString("utf8") : String(first);
  }
  return out;
}

function toRecord(topic: string, partition: number, message: KafkaMessage): BusRecord {
  return {
    topic,
    partition,
    offset: message.offset,
    timestamp: Number(message.timestamp),
    key: message.key ? message.key.toString("utf8") : null,
    value: message.value,
    headers: toHeaders(message.headers),
  };
}

export class KafkaJsBus implements Bus {
  private readonly kafka: Kafka;
  private producerP: Promise<Producer> | undefined;
  private readonly partitions = new Map<string, Promise<number>>();
  private nextPartition = 0;
  /** "topic/partition" → until when publishes avoid starting there (ms epoch). */
  private readonly slowUntil = new Map<string, number>();
  private readonly consumers = new Set<Consumer>();
  private readonly cfg: Required<Omit<KafkaBusConfig, "log">> & { log?: Logger };

  constructor(cfg: KafkaBusConfig) {
    if (!applyKafkaJsFailoverFixes())
      cfg.log?.warn(
        { incident: "none", node: "none" },
        "kafkajs internals changed: failover fixes not applied",
      );
    const sessionTimeoutMs = cfg.sessionTimeoutMs ?? 6000;
    this.cfg = {
      brokers: cfg.brokers,
      clientId: cfg.clientId,
      sessionTimeoutMs,
      heartbeatIntervalMs: cfg.heartbeatIntervalMs ?? Math.max(100, Math.floor(sessionTimeoutMs / 3)),
      requestTimeoutMs: cfg.requestTimeoutMs ?? 1000,
      connectionTimeoutMs: cfg.connectionTimeoutMs ?? 1000,
      metadataMaxAgeMs: cfg.metadataMaxAgeMs ?? 1000,
      hedgeAfterMs: cfg.hedgeAfterMs ?? 300,
      acks: cfg.acks ?? "all",
      ...(cfg.log ? { log: cfg.log } : {}),
    };
    const log = cfg.log;
    this.kafka = new Kafka({
      clientId: cfg.clientId,
      brokers: cfg.brokers
        .split(",")
        .map((b) => b.trim())
        .filter(Boolean),
      connectionTimeout: this.cfg.connectionTimeoutMs,
      requestTimeout: this.cfg.requestTimeoutMs,
      retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 8 },
      logLevel: logLevel.WARN,
      logCreator: () => (entry) => {
        if (!log) return;
        const { message, ...rest } = entry.log;
        const level =
          entry.level <= logLevel.ERROR ? "error" : entry.level === logLevel.WARN ? "warn" : "debug";
        log[level]({ kafka: { namespace: entry.namespace, ...rest } }, message);
      },
    });
  }

  private producer(): Promise<Producer> {
    this.producerP ??= (async () => {
      const p = this.kafka.producer({
        allowAutoTopicCreation: false,
        idempotent: false,
        metadataMaxAge: this.cfg.metadataMaxAgeMs,
      });
      await p.connect();
      return p;
    })().catch((err: unknown) => {
      this.producerP = undefined;
      throw new FastfenceError("FF_BUS_UNAVAILABLE", "cannot connect the Kafka producer", {
        cause: err,
        retriable: true,
      });
    });
    return this.producerP;
  }

  /**
   * The partition a publish starts on: round-robin, skipping partitions that recently
   * missed the hedge deadline (their leader is probably on a dead node, until the
   * controller moves it) unless all of them did.
   */
  private firstPartition(topic: string, n: number): number {
    const now = Date.now();
    const start = this.nextPartition++;
    for (let i = 0; i < n; i++) {
      const p = (start + i) % n;
      const until = this.slowUntil.get(`${topic}/${p}`);
      if (until === undefined || until <= now) return p;
    }
    return start % n;
  }

  /** Partition count of a topic (cached; 1 if it cannot be read, which disables hedging). */
  private partitionCount(topic: string): Promise<number> {
    let n = this.partitions.get(topic);
    if (!n) {
      n = (async () => {
        const admin = this.kafka.admin();
        await admin.connect();
        try {
          const md = await admin.fetchTopicMetadata({ topics: [topic] });
          return Math.max(1, md.topics[0]?.partitions.length ?? 1);
        } finally {
          await admin.disconnect();
        }
      })().catch(() => {
        this.partitions.delete(topic);
        return 1;
      });
      this.partitions.set(topic, n);
    }
    return n;
  }

  async publish(
    topic: string,
    records: readonly KafkaRecord[],
    opts: { acks?: "leader" | "all" } = {},
  ): Promise<void> {
    const acks = opts.acks ?? this.cfg.acks;
    const p = await this.producer();
    const n = this.cfg.hedgeAfterMs > 0 ? await this.partitionCount(topic) : 1;
    const first = this.firstPartition(topic, n);
    const maxSends = Math.min(n, 3);
    const send = (partition: number | undefined) =>
      p.send({
        topic,
        acks: acks === "all" ? -1 : 1,
        timeout: this.cfg.requestTimeoutMs,
        messages: records.map((r) => ({
          key: r.key,
          value: r.value,
          headers: r.headers,
          ...(partition === undefined ? {} : { partition }),
        })),
      });
    await new Promise<void>((resolve, reject) => {
      let sent = 0;
      let failed = 0;
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (err?: unknown) => {
        if (done) return;
        done = true;
        clearInterval(timer);
        if (err === undefined) resolve();
        else
          reject(
            new FastfenceError("FF_BUS_UNAVAILABLE", `publishing to ${topic} failed`, {
              cause: err,
              retriable: true,
            }),
          );
      };
      const launch = () => {
        const partition = n > 1 ? (first + sent) % n : undefined;
        sent++;
        const started = Date.now();
        send(partition).then(
          () => {
            if (partition !== undefined && Date.now() - started < this.cfg.hedgeAfterMs)
              this.slowUntil.delete(`${topic}/${partition}`);
            finish();
          },
          (err: unknown) => {
            failed++;
            if (sent < maxSends) launch();
            else if (failed >= sent) finish(err);
          },
        );
      };
      launch();
      if (maxSends > 1)
        timer = setInterval(() => {
          if (done) return;
          // The partition tried last has not answered in time: start elsewhere for a while.
          this.slowUntil.set(`${topic}/${(first + sent - 1) % n}`, Date.now() + SLOW_PARTITION_MS);
          if (sent < maxSends) launch();
        }, this.cfg.hedgeAfterMs);
    });
  }

  async subscribe(opts: SubscribeOptions): Promise<Subscription> {
    let resolveReady!: () => void;
    const ready = new Promise<void>((r) => (resolveReady = r));
    let closed = false;
    let current: Consumer | undefined;
    let rebuild: NodeJS.Timeout | undefined;
    const start = async (): Promise<Consumer> => {
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
      try {
        await consumer.connect();
        await consumer.subscribe({ topics: [...opts.topics], fromBeginning: opts.fromBeginning ?? false });
        await consumer.run({
          autoCommit: true,
          autoCommitInterval: 500,
          eachMessage: async ({ topic, partition, message }) => {
            await opts.onRecord(toRecord(topic, partition, message));
          },
        });
      } catch (err) {
        this.consumers.delete(consumer);
        await consumer.disconnect().catch(() => undefined);
        throw err;
      }
      return consumer;
    };
    const restartLater = async (): Promise<void> => {
      if (closed) return;
      try {
        current = await start();
      } catch (err) {
        this.cfg.log?.warn(
          { incident: "none", node: "none", groupId: opts.groupId, err },
          "Kafka consumer restart failed",
        );
        rebuild = setTimeout(() => void restartLater(), 1000);
      }
    };
    current = await start();
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

  async readAll(topics: readonly string[], opts: { timeoutMs?: number } = {}): Promise<BusRecord[]> {
    const admin = this.kafka.admin();
    await admin.connect();
    const ends = new Map<string, bigint>();
    try {
      for (const topic of topics) {
        for (const p of await admin.fetchTopicOffsets(topic)) {
          if (BigInt(p.high) > BigInt(p.low)) ends.set(`${topic}/${p.partition}`, BigInt(p.high));
        }
      }
    } finally {
      await admin.disconnect();
    }
    const out: BusRecord[] = [];
    if (ends.size === 0) return out;
    const consumer = this.kafka.consumer({
      groupId: `fastfence-reader-${process.pid}-${Date.now()}`,
      maxWaitTimeInMs: 100,
    });
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [...topics], fromBeginning: true });
      const done = new Promise<void>((resolve) => {
        void consumer.run({
          autoCommit: false,
          eachMessage: async ({ topic, partition, message }) => {
            out.push(toRecord(topic, partition, message));
            const k = `${topic}/${partition}`;
            const end = ends.get(k);
            if (end !== undefined && BigInt(message.offset) + 1n >= end) ends.delete(k);
            if (ends.size === 0) resolve();
          },
        });
      });
      const timeoutMs = opts.timeoutMs ?? 15_000;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new FastfenceError(
                "FF_BUS_UNAVAILABLE",
                `reading ${topics.join(", ")} timed out after ${timeoutMs} ms`,
              ),
            ),
          timeoutMs,
        );
      });
      await Promise.race([done, timeout]).finally(() => clearTimeout(timer));
    } finally {
      await consumer.disconnect();
    }
    return out.sort((a, b) => a.timestamp - b.timestamp);
  }

  async ensureTopics(specs: readonly TopicSpec[]): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      const existing = new Set(await admin.listTopics());
      const missing = specs.filter((s) => !existing.has(s.topic));
      if (missing.length === 0) return;
      // A broker that is still starting (registered but fenced) is placed in replica sets
      // but never first, so it would never be a preferred leader: the topic's leaders stay
      // on the other brokers for good, and one broker death stalls most partitions at
      // once. Create topics only when as many brokers are up as the largest replication
      // factor asks for (the metadata lists unfenced brokers only).
      const needed = Math.max(...missing.map((s) => s.replicationFactor));
      const up = (await admin.describeCluster()).brokers.length;
      if (up < needed)
        throw new FastfenceError(
          "FF_BUS_UNAVAILABLE",
          `creating ${missing.map((s) => s.topic).join(", ")} needs ${needed} running brokers (replication factor ${needed}); ${up} are up`,
          { retriable: true },
        );
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((s) => ({
          topic: s.topic,
          numPartitions: s.partitions,
          replicationFactor: s.replicationFactor,
          configEntries: Object.entries(s.config ?? {}).map(([name, value]) => ({ name, value })),
        })),
      });
    } catch (err) {
      if (err instanceof FastfenceError) throw err;
      throw new FastfenceError("FF_BUS_UNAVAILABLE", "creating topics failed", {
        cause: err,
        retriable: true,
      });
    } finally {
      await admin.disconnect();
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.consumers].map((c) => c.disconnect()));
    this.consumers.clear();
    if (this.producerP) await (await this.producerP.catch(() => undefined))?.disconnect();
    this.producerP = undefined;
  }
}
