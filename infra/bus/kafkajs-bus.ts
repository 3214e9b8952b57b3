// Bus implementation on kafkajs (pure JavaScript, the client the customer's design
// names). Tuned for the fencing critical path: short request and session timeouts,
// a producer that never waits on one partition (records are spread by key only for
// ordering of one node's observations; the incident state lives in the Kubernetes API),
// acks from all in-sync replicas. This module holds the settings, the client, topic
// creation and the one-shot reader; hedged publishing is kafkajs-publish.ts, group
// consumers kafkajs-subscribe.ts. Never logs record values (they are event data).
import { Kafka, logLevel } from "kafkajs";
import { FastfenceError } from "../../core/errors.ts";
import type { KafkaRecord } from "../../events/codec.ts";
import type { BusRecord, ReadOptions, SubscribeOptions, Subscription, TopicSpec } from "./bus.ts";
import { existingTopics, readTopics } from "./kafkajs-reader.ts";
import { createTopicsWithLeaders } from "./kafkajs-topics.ts";
import { kafkaJsTrouble } from "./broker-trouble.ts";
import { applyKafkaJsFailoverFixes } from "./kafkajs-failover.ts";
import { HedgedPublisher } from "./kafkajs-publish.ts";
import { GroupSubscriptions } from "./kafkajs-subscribe.ts";
import {
  busSettings,
  READ_REQUEST_TIMEOUT_MS,
  type BusSettings,
  type KafkaBus,
  type KafkaBusConfig,
} from "./kafka-config.ts";

export type { KafkaBusConfig } from "./kafka-config.ts";

export class KafkaJsBus implements KafkaBus {
  private readonly kafka: Kafka;
  /** The same cluster with READ_REQUEST_TIMEOUT_MS at least, for one-shot reads and listings. */
  private readonly reader: Kafka;
  private readonly publisher: HedgedPublisher;
  private readonly subscriptions: GroupSubscriptions;
  private readonly cfg: BusSettings;

  constructor(cfg: KafkaBusConfig) {
    if (!applyKafkaJsFailoverFixes())
      cfg.log?.warn(
        { incident: "none", node: "none" },
        "kafkajs internals changed: failover fixes not applied",
      );
    this.cfg = busSettings(cfg);
    const log = cfg.log;
    const brokers = cfg.brokers
      .split(",")
      .map((b) => b.trim())
      .filter(Boolean);
    const client = (timeouts: { connectionTimeout: number; requestTimeout: number }, list = brokers) =>
      new Kafka({
        clientId: cfg.clientId,
        brokers: list,
        ...timeouts,
        retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 8 },
        ...(cfg.security.ssl ? { ssl: cfg.security.ssl } : {}),
        ...(cfg.security.sasl ? { sasl: cfg.security.sasl } : {}),
        logLevel: logLevel.WARN,
        logCreator: () => (entry) => {
          if (!log) return;
          const { message, ...rest } = entry.log;
          const level =
            entry.level <= logLevel.ERROR ? "error" : entry.level === logLevel.WARN ? "warn" : "debug";
          log[level]({ kafka: { namespace: entry.namespace, ...rest } }, message);
        },
      });
    this.kafka = client({
      connectionTimeout: this.cfg.connectionTimeoutMs,
      requestTimeout: this.cfg.requestTimeoutMs,
    });
    // kafkajs sets timeouts per client, not per consumer or admin: reads get their own.
    this.reader = client({
      connectionTimeout: Math.max(this.cfg.connectionTimeoutMs, READ_REQUEST_TIMEOUT_MS),
      requestTimeout: Math.max(this.cfg.requestTimeoutMs, READ_REQUEST_TIMEOUT_MS),
    });
    // kafkajs starts every client at the first broker of its list (its seed broker): the
    // hedges' producer starts at the second, so at first one frozen broker is not both
    // producers' seed (kafkajs-publish.ts). kafkajs moves a seed to the next broker of its
    // list after a connection error, so after a broker restart both may start at the same
    // one. With one bootstrap address (a Service), each client's first connection lands on
    // a broker of its own and rotating changes nothing.
    const hedgeClient = client(
      { connectionTimeout: this.cfg.connectionTimeoutMs, requestTimeout: this.cfg.requestTimeoutMs },
      [...brokers.slice(1), ...brokers.slice(0, 1)],
    );
    this.publisher = new HedgedPublisher(this.kafka, this.cfg, kafkaJsTrouble, hedgeClient);
    this.subscriptions = new GroupSubscriptions(this.kafka, this.cfg);
  }

  /** Hedged publishing (kafkajs-publish.ts). */
  publish(
    topic: string,
    records: readonly KafkaRecord[],
    opts: { acks?: "leader" | "all"; hedge?: boolean } = {},
  ): Promise<void> {
    return this.publisher.publish(topic, records, opts);
  }

  /** Connects the producer and reads partition counts before the first publish. */
  preparePublishing(topics: readonly string[]): Promise<void> {
    return this.publisher.prepare(topics);
  }

  /** Reports of an unreachable broker: the failover fixes' (every kafkajs client here) and this bus's publishes. */
  onBrokerTrouble(listener: () => void): () => void {
    return kafkaJsTrouble.on(listener);
  }

  /** One unhedged send per partition (ISR keepalives); how many were acknowledged. */
  publishToEveryPartition(topic: string, record: KafkaRecord): Promise<number> {
    return this.publisher.publishToEveryPartition(topic, record);
  }

  /** A consumer-group subscription (kafkajs-subscribe.ts). */
  subscribe(opts: SubscribeOptions): Promise<Subscription> {
    return this.subscriptions.subscribe(opts);
  }

  async readAll(topics: readonly string[], opts: ReadOptions = {}): Promise<BusRecord[]> {
    return readTopics(this.reader, topics, opts);
  }

  /** The topics that exist on the cluster (optionally only those `wanted`). */
  async topics(wanted?: (t: string) => boolean): Promise<string[]> {
    return existingTopics(this.reader, wanted);
  }

  async ensureTopics(specs: readonly TopicSpec[], opts: { brokers?: number } = {}): Promise<void> {
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
      const needed = Math.max(opts.brokers ?? 0, ...missing.map((s) => s.replicationFactor));
      const up = (await admin.describeCluster()).brokers.length;
      if (up < needed)
        throw new FastfenceError(
          "FF_BUS_UNAVAILABLE",
          `creating ${missing.map((s) => s.topic).join(", ")} needs ${needed} running brokers; ${up} are up`,
          { retriable: true },
        );
      await createTopicsWithLeaders(
        admin,
        missing.map((s) => ({
          topic: s.topic,
          numPartitions: s.partitions,
          replicationFactor: s.replicationFactor,
          configEntries: Object.entries(s.config ?? {}).map(([name, value]) => ({ name, value })),
        })),
      );
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
    await this.subscriptions.closeAll();
    await this.publisher.close();
  }
}
