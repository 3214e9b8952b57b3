// Bus implementation on @platformatic/kafka (maintained, pure TypeScript), selectable
// with FASTFENCE_KAFKA_CLIENT=platformatic (kafka-bus.ts) in place of kafkajs, with the
// same settings (KafkaBusConfig) and contract. Every connect (TCP + TLS + SASL), request
// and metadata age is bounded by the config's short timeouts, and the library drops a
// connection whose request timed out, so a frozen broker is left for another instead of
// being waited on. This module holds the settings and topic creation; hedged publishing is
// platformatic-publish.ts, group consumers platformatic-subscribe.ts, the one-shot reader
// platformatic-reader.ts. Never logs record values.
import { Admin } from "@platformatic/kafka";
import { FastfenceError } from "../../core/errors.ts";
import type { KafkaRecord } from "../../events/codec.ts";
import { BrokerTrouble } from "./broker-trouble.ts";
import type { BusRecord, ReadOptions, SubscribeOptions, Subscription, TopicSpec } from "./bus.ts";
import { busSettings, type BusSettings, type KafkaBus, type KafkaBusConfig } from "./kafka-config.ts";
import type { KafkaSecurity } from "./kafka-security.ts";
import { clientOptions } from "./platformatic-client.ts";
import { PlatformaticPublisher } from "./platformatic-publish.ts";
import { existingTopics, readTopics } from "./platformatic-reader.ts";
import { PlatformaticSubscriptions } from "./platformatic-subscribe.ts";

/** How long topic creation waits for every new partition to have a leader, ms. */
const LEADERS_WAIT_MS = 15_000;

export class PlatformaticBus implements KafkaBus {
  private readonly cfg: BusSettings;
  private readonly security: KafkaSecurity;
  private readonly publisher: PlatformaticPublisher;
  private readonly subscriptions: PlatformaticSubscriptions;
  private readonly trouble = new BrokerTrouble();

  constructor(cfg: KafkaBusConfig) {
    this.cfg = busSettings(cfg);
    this.security = cfg.security;
    this.publisher = new PlatformaticPublisher(this.cfg, this.security, this.trouble);
    this.subscriptions = new PlatformaticSubscriptions(this.cfg, this.security);
  }

  /** Hedged publishing (platformatic-publish.ts). */
  publish(
    topic: string,
    records: readonly KafkaRecord[],
    opts: { acks?: "leader" | "all"; hedge?: boolean } = {},
  ): Promise<void> {
    return this.publisher.publish(topic, records, opts);
  }

  /** Reads partition counts (connecting the producer) before the first publish. */
  preparePublishing(topics: readonly string[]): Promise<void> {
    return this.publisher.prepare(topics);
  }

  /** Reports of an unreachable broker: this bus's publishes only (its consumers report none yet). */
  onBrokerTrouble(listener: () => void): () => void {
    return this.trouble.on(listener);
  }

  /** One unhedged send per partition (ISR keepalives); how many were acknowledged. */
  publishToEveryPartition(topic: string, record: KafkaRecord): Promise<number> {
    return this.publisher.publishToEveryPartition(topic, record);
  }

  /** A consumer-group subscription (platformatic-subscribe.ts). */
  subscribe(opts: SubscribeOptions): Promise<Subscription> {
    return this.subscriptions.subscribe(opts);
  }

  readAll(topics: readonly string[], opts: ReadOptions = {}): Promise<BusRecord[]> {
    return readTopics(this.cfg, this.security, topics, opts);
  }

  topics(wanted?: (t: string) => boolean): Promise<string[]> {
    return existingTopics(this.cfg, this.security, wanted);
  }

  async ensureTopics(specs: readonly TopicSpec[], opts: { brokers?: number } = {}): Promise<void> {
    // Admin requests (topic creation) may take longer than a produce on a busy controller;
    // they are not on the fencing path.
    const admin = new Admin({
      ...clientOptions(this.cfg, this.security, "-admin"),
      requestTimeout: Math.max(this.cfg.requestTimeoutMs, 5000),
      timeout: 5000,
    });
    try {
      const existing = new Set(await admin.listTopics());
      const missing = specs.filter((s) => !existing.has(s.topic));
      if (missing.length === 0) return;
      // Only when as many brokers are up as the largest replication factor asks for (see
      // kafkajs-bus.ts: a broker still starting would never be a preferred leader).
      const needed = Math.max(opts.brokers ?? 0, ...missing.map((s) => s.replicationFactor));
      const up = (await admin.metadata({ topics: [], forceUpdate: true })).brokers.size;
      if (up < needed)
        throw new FastfenceError(
          "FF_BUS_UNAVAILABLE",
          `creating ${missing.map((s) => s.topic).join(", ")} needs ${needed} running brokers; ${up} are up`,
          { retriable: true },
        );
      // One call per topic: the configs of a call apply to every topic in it.
      for (const s of missing)
        await admin.createTopics({
          topics: [s.topic],
          partitions: s.partitions,
          replicas: s.replicationFactor,
          configs: Object.entries(s.config ?? {}).map(([name, value]) => ({ name, value })),
        });
      await this.waitForLeaders(admin, missing);
    } catch (err) {
      if (err instanceof FastfenceError) throw err;
      throw new FastfenceError("FF_BUS_UNAVAILABLE", "creating topics failed", {
        cause: err,
        retriable: true,
      });
    } finally {
      await Promise.race([admin.close().catch(() => undefined), new Promise((r) => setTimeout(r, 3000))]);
    }
  }

  /** Waits until every partition of the new topics has a leader (as kafkajs' waitForLeaders). */
  private async waitForLeaders(admin: Admin, specs: readonly TopicSpec[]): Promise<void> {
    const end = Date.now() + LEADERS_WAIT_MS;
    const topics = specs.map((s) => s.topic);
    for (;;) {
      const md = await admin.metadata({ topics, forceUpdate: true }).catch(() => undefined);
      const ok =
        md !== undefined &&
        specs.every((s) => {
          const t = md.topics.get(s.topic);
          return (
            t !== undefined && t.partitionsCount >= s.partitions && t.partitions.every((p) => p.leader >= 0)
          );
        });
      if (ok) return;
      if (Date.now() > end)
        throw new FastfenceError("FF_BUS_UNAVAILABLE", `topics ${topics.join(", ")} have no leaders yet`, {
          retriable: true,
        });
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async close(): Promise<void> {
    await this.subscriptions.closeAll();
    await this.publisher.close();
  }
}
