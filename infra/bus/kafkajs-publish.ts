// Hedged publishing on kafkajs, the fencing path's answer to a dead partition leader: a
// record goes to one partition (round-robin; events need no cross-partition order, the
// incident state lives in the Kubernetes API); if that leader has not acknowledged within
// hedgeAfterMs, the same record also goes to another partition, away from the brokers of
// the one that missed (up to 3), and later records start elsewhere for a while
// (hedge.ts); bulk records off the fencing path (dead letters) ask for no hedge and get
// one send to a partition chosen the same way. The hedges go through a second producer,
// on a client whose broker list starts at another broker (until kafkajs rotates a seed
// after a connection error, KafkaJsBus): a kafkajs producer that has been idle sends a
// metadata refresh first, through its one open connection, to the seed broker it started
// on (the first of its list); when that broker is frozen, every send of the producer
// waits for a request timeout and a connection timeout before kafkajs tries another
// broker (docs/lab.md, "Where the hangs' time goes"), and a hedge through the same
// producer waits with it. Duplicates are harmless (consumer writes are
// resourceVersion-guarded). Owns the bus's producers; never logs record values.
import type { Kafka, Producer } from "kafkajs";
import { FastfenceError } from "../../core/errors.ts";
import type { KafkaRecord } from "../../events/codec.ts";
import type { BrokerTrouble } from "./broker-trouble.ts";
import { PartitionHedge, TopicLayouts } from "./hedge.ts";

/** The bus settings publishing uses (KafkaBusConfig, defaults applied). */
export interface PublishSettings {
  requestTimeoutMs: number;
  metadataMaxAgeMs: number;
  /** 0 turns hedging off. */
  hedgeAfterMs: number;
  acks: "all" | "leader";
}

export class HedgedPublisher {
  private readonly kafka: Kafka;
  private readonly cfg: PublishSettings;
  private producerP: Promise<Producer> | undefined;
  private readonly partitions = new TopicLayouts(async (topic) => {
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      const md = await admin.fetchTopicMetadata({ topics: [topic] });
      const parts = [...(md.topics[0]?.partitions ?? [])].sort((a, b) => a.partitionId - b.partitionId);
      return { partitions: parts.length, replicas: parts.map((p) => p.replicas) };
    } finally {
      await admin.disconnect();
    }
  });
  private readonly hedge: PartitionHedge;
  /** Keepalives' own producer, without retries: they never wait on the stage's sends, nor these on them. */
  private keepaliveP: Promise<Producer> | undefined;
  /** The client of the hedges' producer: the same cluster, its broker list started elsewhere. */
  private readonly hedgeKafka: Kafka;
  /** The hedged copies' own producer (see the header). */
  private hedgeP: Promise<Producer> | undefined;

  /**
   * `hedgeKafka`: the client the hedged copies are sent through, the same cluster with its
   * broker list rotated (KafkaJsBus); without one they share the first copy's producer.
   */
  constructor(kafka: Kafka, cfg: PublishSettings, trouble?: BrokerTrouble, hedgeKafka?: Kafka) {
    this.kafka = kafka;
    this.cfg = cfg;
    this.hedge = new PartitionHedge(() => trouble?.report());
    this.hedgeKafka = hedgeKafka ?? kafka;
  }

  private connect(retries?: number, kafka: Kafka = this.kafka): Promise<Producer> {
    return (async () => {
      const p = kafka.producer({
        allowAutoTopicCreation: false,
        idempotent: false,
        metadataMaxAge: this.cfg.metadataMaxAgeMs,
        ...(retries === undefined ? {} : { retry: { retries } }),
      });
      await p.connect();
      return p;
    })().catch((err: unknown) => {
      throw new FastfenceError("FF_BUS_UNAVAILABLE", "cannot connect the Kafka producer", {
        cause: err,
        retriable: true,
      });
    });
  }

  private producer(): Promise<Producer> {
    this.producerP ??= this.connect().catch((err: unknown) => {
      this.producerP = undefined;
      throw err;
    });
    return this.producerP;
  }

  private hedgeProducer(): Promise<Producer> {
    this.hedgeP ??= this.connect(undefined, this.hedgeKafka).catch((err: unknown) => {
      this.hedgeP = undefined;
      throw err;
    });
    return this.hedgeP;
  }

  private keepaliveProducer(): Promise<Producer> {
    this.keepaliveP ??= this.connect(0).catch((err: unknown) => {
      this.keepaliveP = undefined;
      throw err;
    });
    return this.keepaliveP;
  }

  async publish(
    topic: string,
    records: readonly KafkaRecord[],
    opts: { acks?: "leader" | "all"; hedge?: boolean } = {},
  ): Promise<void> {
    const acks = opts.acks ?? this.cfg.acks;
    const p = await this.producer();
    const layout = this.cfg.hedgeAfterMs > 0 ? await this.partitions.of(topic) : { partitions: 1 };
    // Unhedged: one send, still to one chosen partition (kafkajs would otherwise hash
    // every record's key to spread one call over all partitions, costly for bulk records).
    const maxSends = opts.hedge === false ? 1 : Math.min(layout.partitions, 3);
    // The first copy goes through the stage's producer, the hedges through their own (a
    // hedge producer that cannot connect leaves the hedges to the first one's).
    const send = async (partition: number | undefined, copy: number) =>
      (copy === 0 ? p : await this.hedgeProducer().catch(() => p)).send({
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
    await this.hedge.send(topic, layout, maxSends, this.cfg.hedgeAfterMs, send);
  }

  /**
   * Connects the producers and reads the topics' partition counts now
   * (Bus.preparePublishing). The hedges' producer is optional: if it cannot connect now,
   * the first hedge tries again.
   */
  async prepare(topics: readonly string[]): Promise<void> {
    await this.producer();
    if (this.cfg.hedgeAfterMs > 0) {
      await this.hedgeProducer().catch(() => undefined);
      await this.partitions.prepare(topics);
    }
  }

  /** One unhedged send per partition, acks from the leader; how many were acknowledged. The hedge learns from each. */
  async publishToEveryPartition(topic: string, record: KafkaRecord): Promise<number> {
    const p = await this.keepaliveProducer();
    const n = (await this.partitions.of(topic)).partitions;
    // The hedge learns from each answer which partitions' leaders are alive (hedge.ts).
    return this.hedge.sendToEvery(topic, n, this.cfg.hedgeAfterMs, (partition) =>
      p.send({
        topic,
        acks: 1,
        timeout: this.cfg.requestTimeoutMs,
        messages: [{ key: record.key, value: record.value, headers: record.headers, partition }],
      }),
    );
  }

  /** Disconnects the producers that were connected. */
  async close(): Promise<void> {
    for (const pp of [this.producerP, this.hedgeP, this.keepaliveP])
      if (pp) await (await pp.catch(() => undefined))?.disconnect();
    this.producerP = undefined;
    this.hedgeP = undefined;
    this.keepaliveP = undefined;
  }
}
