// The event bus interface every runtime and tool uses; the Kafka client behind it is an
// implementation detail (kafkajs-bus.ts or platformatic-bus.ts, chosen in kafka-bus.ts). Keep this small: publish, group
// subscribe, read a topic from the beginning (for `fastfence trace`), create topics.
// This module declares types only; it must never perform I/O.
import type { KafkaRecord } from "../../events/codec.ts";

export interface BusRecord extends KafkaRecord {
  topic: string;
  partition: number;
  offset: string;
  /** Broker timestamp, epoch ms. */
  timestamp: number;
}

/** How a one-shot read (Bus.readAll) reads. */
export interface ReadOptions {
  /** Give up after this long, ms. Default 15000. */
  timeoutMs?: number;
  /** Start at each partition's first record at or after this time (epoch ms; the broker's timestamps). */
  sinceMs?: number;
  /** Called about once a second while reading. */
  onProgress?: (p: { records: number; partitionsLeft: number; partitions: number }) => void;
}

export interface TopicSpec {
  topic: string;
  partitions: number;
  replicationFactor: number;
  /** e.g. { "min.insync.replicas": "2", "retention.ms": "604800000" } */
  config?: Record<string, string>;
}

export interface SubscribeOptions {
  groupId: string;
  topics: readonly string[];
  /** Start at the earliest offset when the group has no committed offset. Default false. */
  fromBeginning?: boolean;
  /**
   * Called once per record, in partition order. The offset is committed only after it
   * resolves; if it throws, the record is redelivered (at-least-once).
   */
  onRecord(rec: BusRecord): Promise<void>;
  /**
   * When given, used instead of onRecord: consecutive records of one partition (a slice of
   * one fetch, in partition order), so the consumer can do its I/O once per batch (e.g.
   * dead-letter them in one produce call). It resolves once the records are handled; the
   * `settled` it may return resolves once their outcomes are recorded, which can overlap
   * the next batch's handling. The batch's offsets are committed only after both (and
   * after every earlier batch's); if either fails, the batch is redelivered.
   */
  onBatch?(recs: BusRecord[]): Promise<{ settled: Promise<void> } | undefined>;
}

export interface Subscription {
  /** Resolves when the consumer has joined its group and been assigned partitions. */
  ready: Promise<void>;
  close(): Promise<void>;
}

export interface Bus {
  /**
   * Publishes records. `acks` overrides the bus default: "leader" for events that are
   * re-emitted anyway (a dead follower never delays them), "all" for one-shot events.
   */
  publish(
    topic: string,
    records: readonly KafkaRecord[],
    opts?: {
      acks?: "leader" | "all";
      /**
       * false: one send, no hedged copies on other partitions (bulk records off the fencing
       * path, e.g. dead letters, which a hedge would only duplicate under load). Default true.
       */
      hedge?: boolean;
    },
  ): Promise<void>;
  /**
   * Does now what the first publish to these topics would otherwise do on the fencing path
   * (connect the producer, read each topic's partition count for hedging), so a replica's
   * first event of an incident does not wait for a connect, a SASL handshake and a metadata
   * read while a broker may be dead. Rejects if that failed; publishing then does it later.
   */
  preparePublishing?(topics: readonly string[]): Promise<void>;
  /**
   * Sends `record` once to every partition of `topic`, side by side, with acks from the
   * leader only and no hedge; resolves with how many partitions acknowledged (a dead
   * leader's is simply not counted, never an error). For ISR keepalives
   * (events/keepalive.ts): what matters is that the records reach the live leaders.
   */
  publishToEveryPartition(topic: string, record: KafkaRecord): Promise<number>;
  /**
   * Calls `listener` whenever this bus's client could not reach a broker (infra/bus/
   * broker-trouble.ts); returns the call that stops it.
   */
  onBrokerTrouble(listener: () => void): () => void;
  subscribe(opts: SubscribeOptions): Promise<Subscription>;
  /**
   * Every record currently in the topics (up to their end offsets now), from the beginning
   * or from `sinceMs` (no consumer group). Topics that do not exist fail the read.
   */
  readAll(topics: readonly string[], opts?: ReadOptions): Promise<BusRecord[]>;
  /**
   * Creates the topics that do not exist yet. Throws a retriable FF_BUS_UNAVAILABLE while
   * fewer brokers are running than the largest replication factor asks for, or than
   * `opts.brokers` when that is more (a topic made while a broker is still starting never
   * gets that broker as a preferred leader, nor, with fewer replicas than brokers, any
   * replica: the cluster places them on the brokers it knows).
   */
  ensureTopics(specs: readonly TopicSpec[], opts?: { brokers?: number }): Promise<void>;
  close(): Promise<void>;
}
