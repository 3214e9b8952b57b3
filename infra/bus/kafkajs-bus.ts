// Bus implementation on kafkajs (pure JavaScript, the client the customer's design
// names). Tuned for the fencing critical path: short request and session timeouts,
// a producer that never waits on one partition (records are spread by key only for
// ordering of one node's observations; the incident state lives in the Kubernetes API),
// acks from all in-sync replicas. This module holds the settings, the client, topic
// creation and the one-shot reader; hedged publishing is kafkajs-publish.ts, group
// consumers kafkajs-subscribe.ts. Never logs record values (they are event data).
import { Kafka, logLevel } from "kafkajs";
import { FastfenceError } from "../../core/errors.ts";
import type { Logger } from "../log.ts";
import type { KafkaRecord } from "../../events/codec.ts";
import type { Bus, BusRecord, ReadOptions, SubscribeOptions, Subscription, TopicSpec } from "./bus.ts";
import { existingTopics, readTopics } from "./kafkajs-reader.ts";
import { applyKafkaJsFailoverFixes } from "./kafkajs-failover.ts";
import { HedgedPublisher } from "./kafkajs-publish.ts";
import { GroupSubscriptions } from "./kafkajs-subscribe.ts";
import type { KafkaSecurity } from "./kafka-security.ts";

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
  /**
   * TLS and SASL (kafka-security.ts, from the FASTFENCE_KAFKA_* settings). Required, so
   * every caller decides: `{}` is a plaintext, unauthenticated connection.
   */
  security: KafkaSecurity;
  log?: Logger;
}

export class KafkaJsBus implements Bus {
  private readonly kafka: Kafka;
  private readonly publisher: HedgedPublisher;
  private readonly subscriptions: GroupSubscriptions;
  private readonly cfg: Required<Omit<KafkaBusConfig, "log" | "security">> & { log?: Logger };

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
    this.publisher = new HedgedPublisher(this.kafka, this.cfg);
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

  /** A consumer-group subscription (kafkajs-subscribe.ts). */
  subscribe(opts: SubscribeOptions): Promise<Subscription> {
    return this.subscriptions.subscribe(opts);
  }

  async readAll(topics: readonly string[], opts: ReadOptions = {}): Promise<BusRecord[]> {
    return readTopics(this.kafka, topics, opts);
  }

  /** The topics that exist on the cluster (optionally only those `wanted`). */
  async topics(wanted?: (t: string) => boolean): Promise<string[]> {
    return existingTopics(this.kafka, wanted);
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
    await this.subscriptions.closeAll();
    await this.publisher.close();
  }
}
