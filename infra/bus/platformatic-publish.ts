// Hedged publishing on @platformatic/kafka: the same contract as kafkajs-publish.ts (one
// partition first, round-robin; the same record on another partition, away from the
// brokers of the one that missed, when the leader has not acknowledged within
// hedgeAfterMs, up to 3 — hedge.ts; one send for bulk records that ask for no hedge), on
// one Producer whose every request is bounded (platformatic-client.ts). Owns the bus's
// producer; never logs record values.
import { ProduceAcks, Producer, stringSerializer } from "@platformatic/kafka";
import type { KafkaRecord } from "../../events/codec.ts";
import type { BrokerTrouble } from "./broker-trouble.ts";
import { PartitionHedge, TopicLayouts } from "./hedge.ts";
import type { KafkaSecurity } from "./kafka-security.ts";
import { clientOptions, type ClientSettings } from "./platformatic-client.ts";

/** The bus settings publishing uses (KafkaBusConfig, defaults applied). */
export interface PublishSettings extends ClientSettings {
  /** 0 turns hedging off. */
  hedgeAfterMs: number;
  acks: "all" | "leader";
}

type BusProducer = Producer<string, Buffer, string, string>;

export class PlatformaticPublisher {
  private readonly cfg: PublishSettings;
  private readonly security: KafkaSecurity;
  private producerP: BusProducer | undefined;
  private readonly partitions = new TopicLayouts((topic) =>
    this.producer()
      .metadata({ topics: [topic] })
      .then((md) => {
        const parts = md.topics.get(topic)?.partitions ?? [];
        return { partitions: parts.length, replicas: parts.map((p) => p.replicas) };
      }),
  );
  private readonly hedge: PartitionHedge;
  /** Keepalives' own producer, without retries: they never wait on the stage's sends, nor these on them. */
  private keepaliveP: BusProducer | undefined;

  constructor(cfg: PublishSettings, security: KafkaSecurity, trouble?: BrokerTrouble) {
    this.cfg = cfg;
    this.security = security;
    this.hedge = new PartitionHedge(() => trouble?.report());
  }

  private keepaliveProducer(): BusProducer {
    this.keepaliveP ??= new Producer<string, Buffer, string, string>({
      ...clientOptions(this.cfg, this.security, "-keepalive"),
      retries: 0,
      idempotent: false,
      serializers: { key: stringSerializer, headerKey: stringSerializer, headerValue: stringSerializer },
    });
    this.keepaliveP.on("error", () => undefined);
    return this.keepaliveP;
  }

  /** The producer (created on first use; it connects lazily, per broker). */
  private producer(): BusProducer {
    this.producerP ??= new Producer<string, Buffer, string, string>({
      ...clientOptions(this.cfg, this.security, "-producer"),
      idempotent: false,
      serializers: { key: stringSerializer, headerKey: stringSerializer, headerValue: stringSerializer },
    });
    // Failures reach the caller through send(); an "error" event without a listener would throw.
    this.producerP.on("error", () => undefined);
    return this.producerP;
  }

  /** Reads the topics' partition counts now, which connects the producer (Bus.preparePublishing). */
  async prepare(topics: readonly string[]): Promise<void> {
    await this.partitions.prepare(topics);
  }

  async publish(
    topic: string,
    records: readonly KafkaRecord[],
    opts: { acks?: "leader" | "all"; hedge?: boolean } = {},
  ): Promise<void> {
    const acks = (opts.acks ?? this.cfg.acks) === "all" ? ProduceAcks.ALL : ProduceAcks.LEADER;
    const p = this.producer();
    const layout = this.cfg.hedgeAfterMs > 0 ? await this.partitions.of(topic) : { partitions: 1 };
    const maxSends = opts.hedge === false ? 1 : Math.min(layout.partitions, 3);
    const send = (partition: number | undefined) =>
      p.send({
        acks,
        messages: records.map((r) => ({
          topic,
          ...(r.key === null ? {} : { key: r.key }),
          ...(r.value === null ? {} : { value: r.value }),
          headers: r.headers,
          // One partition for the whole call (the library would otherwise hash each key).
          partition: partition ?? 0,
        })),
      });
    await this.hedge.send(topic, layout, maxSends, this.cfg.hedgeAfterMs, send);
  }

  /** One unhedged send per partition, acks from the leader; how many were acknowledged. The hedge learns from each. */
  async publishToEveryPartition(topic: string, record: KafkaRecord): Promise<number> {
    const p = this.keepaliveProducer();
    const n = (await this.partitions.of(topic)).partitions;
    // The hedge learns from each answer which partitions' leaders are alive (hedge.ts).
    return this.hedge.sendToEvery(topic, n, this.cfg.hedgeAfterMs, (partition) =>
      p.send({
        acks: ProduceAcks.LEADER,
        messages: [
          {
            topic,
            ...(record.key === null ? {} : { key: record.key }),
            ...(record.value === null ? {} : { value: record.value }),
            headers: record.headers,
            partition,
          },
        ],
      }),
    );
  }

  /** Closes the producer, if one was made. */
  async close(): Promise<void> {
    const ps = [this.producerP, this.keepaliveP];
    this.producerP = undefined;
    this.keepaliveP = undefined;
    for (const p of ps) if (p) await p.close(true).catch(() => undefined);
  }
}
