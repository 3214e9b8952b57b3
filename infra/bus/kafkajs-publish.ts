// Hedged publishing on kafkajs, the fencing path's answer to a dead partition leader: a
// record goes to one partition (round-robin; events need no cross-partition order, the
// incident state lives in the Kubernetes API); if that leader has not acknowledged within
// hedgeAfterMs, the same record also goes to the next partition (up to 3), and later
// records start elsewhere for a while; bulk records off the fencing path (dead letters)
// ask for no hedge and get one send to a partition chosen the same way. Duplicates are harmless (consumer writes are
// resourceVersion-guarded). Owns the bus's one producer; never logs record values.
import type { Kafka, Producer } from "kafkajs";
import { FastfenceError } from "../../core/errors.ts";
import type { KafkaRecord } from "../../events/codec.ts";

/**
 * How long a partition that missed the hedge deadline is avoided as a first choice, ms.
 * Covers a dead leader until the controller moves it (broker.session.timeout.ms, plus a
 * controller election if the controller died too); a healthy partition is tried again
 * as the third hedge choice meanwhile, and cleared as soon as it answers in time.
 */
const SLOW_PARTITION_MS = 5000;

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
  private readonly partitions = new Map<string, Promise<number>>();
  private nextPartition = 0;
  /** "topic/partition" → until when publishes avoid starting there (ms epoch). */
  private readonly slowUntil = new Map<string, number>();

  constructor(kafka: Kafka, cfg: PublishSettings) {
    this.kafka = kafka;
    this.cfg = cfg;
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
    opts: { acks?: "leader" | "all"; hedge?: boolean } = {},
  ): Promise<void> {
    const acks = opts.acks ?? this.cfg.acks;
    const p = await this.producer();
    const n = this.cfg.hedgeAfterMs > 0 ? await this.partitionCount(topic) : 1;
    const first = this.firstPartition(topic, n);
    // Unhedged: one send, still to one chosen partition (kafkajs would otherwise hash
    // every record's key to spread one call over all partitions, costly for bulk records).
    const maxSends = opts.hedge === false ? 1 : Math.min(n, 3);
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

  /** Disconnects the producer, if one was connected. */
  async close(): Promise<void> {
    if (this.producerP) await (await this.producerP.catch(() => undefined))?.disconnect();
    this.producerP = undefined;
  }
}
