// The one-shot reader (Bus.readAll) on kafkajs: every record of some topics up to their
// end offsets at the time of the call, from the beginning or from the first offset at or
// after a time (`sinceMs`, the broker's offsets-by-timestamp index), with no consumer
// group committed anywhere. It reports progress while it reads (records so far, partitions
// left) for long reads, asks again when a partition's leader moved while it lists the
// offsets, and lists which topics exist (so callers read only those). It is handed a
// client with READ_REQUEST_TIMEOUT_MS at least (kafkajs-bus.ts), not the fencing path's
// 1 s. Reads only; never commits offsets, never logs record values.
import kafkajs, { type Kafka } from "kafkajs";
import { FastfenceError } from "../../core/errors.ts";
import { READER_GROUP_PREFIX } from "../../events/kafka-acls.ts";
import type { BusRecord, ReadOptions } from "./bus.ts";
import { toRecord } from "./kafkajs-records.ts";

/** Where each partition's read starts and ends (end exclusive). */
interface Span {
  start: bigint;
  end: bigint;
}

/** The partitions to read, keyed "topic/partition", with their start and end offsets. */
async function spans(kafka: Kafka, topics: readonly string[], sinceMs: number | undefined) {
  const admin = kafka.admin();
  await admin.connect();
  const out = new Map<string, Span>();
  try {
    for (const topic of topics) {
      const ends = await admin.fetchTopicOffsets(topic);
      const starts =
        sinceMs === undefined ? undefined : await admin.fetchTopicOffsetsByTimestamp(topic, sinceMs);
      for (const p of ends) {
        // -1: no record at or after sinceMs in this partition.
        const at = starts?.find((s) => s.partition === p.partition)?.offset;
        const start = at === undefined ? BigInt(p.low) : at === "-1" ? BigInt(p.high) : BigInt(at);
        const end = BigInt(p.high);
        if (end > start) out.set(`${topic}/${p.partition}`, { start, end });
      }
    }
  } finally {
    await admin.disconnect();
  }
  return out;
}

// kafkajs is CommonJS: its error classes are reached through the default export.
const { KafkaJSError } = kafkajs;

/** Attempts at listing the spans; a leader moving (NOT_LEADER, a broker just gone) is retried. */
const SPAN_ATTEMPTS = 5;

/**
 * spans() with a fresh admin (and so fresh metadata) per attempt while the error is one
 * kafkajs marks retriable: right after a broker dies, its partitions' offsets are asked of
 * a leader that no longer is one, and kafkajs' admin does not ask again itself.
 */
async function spansRetrying(kafka: Kafka, topics: readonly string[], sinceMs: number | undefined) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await spans(kafka, topics, sinceMs);
    } catch (err) {
      if (!(err instanceof KafkaJSError && err.retriable) || attempt >= SPAN_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 250 * attempt));
    }
  }
}

/** The topics of `wanted` that exist on the cluster. */
export async function existingTopics(kafka: Kafka, wanted?: (t: string) => boolean): Promise<string[]> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return (await admin.listTopics()).filter((t) => (wanted ? wanted(t) : true)).sort();
  } finally {
    await admin.disconnect();
  }
}

export async function readTopics(
  kafka: Kafka,
  topics: readonly string[],
  opts: ReadOptions = {},
): Promise<BusRecord[]> {
  const todo = await spansRetrying(kafka, topics, opts.sinceMs);
  const out: BusRecord[] = [];
  if (todo.size === 0) return out;
  const partitions = todo.size;
  const consumer = kafka.consumer({
    groupId: `${READER_GROUP_PREFIX}${process.pid}-${Date.now()}`,
    maxWaitTimeInMs: 100,
  });
  await consumer.connect();
  const progress = opts.onProgress
    ? setInterval(
        () => opts.onProgress!({ records: out.length, partitionsLeft: todo.size, partitions }),
        1000,
      )
    : undefined;
  try {
    const subscribed = [...new Set([...todo.keys()].map((k) => k.slice(0, k.lastIndexOf("/"))))];
    await consumer.subscribe({ topics: subscribed, fromBeginning: true });
    const done = new Promise<void>((resolve) => {
      void consumer.run({
        autoCommit: false,
        eachMessage: async ({ topic, partition, message }) => {
          const k = `${topic}/${partition}`;
          const span = todo.get(k);
          if (!span) return;
          const offset = BigInt(message.offset);
          if (offset >= span.start) out.push(toRecord(topic, partition, message));
          if (offset + 1n >= span.end) todo.delete(k);
          if (todo.size === 0) resolve();
        },
      });
    });
    if (opts.sinceMs !== undefined)
      for (const [k, span] of todo) {
        const i = k.lastIndexOf("/");
        consumer.seek({
          topic: k.slice(0, i),
          partition: Number(k.slice(i + 1)),
          offset: String(span.start),
        });
      }
    const timeoutMs = opts.timeoutMs ?? 15_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new FastfenceError(
              "FF_BUS_UNAVAILABLE",
              `reading ${topics.join(", ")} timed out after ${timeoutMs} ms (${out.length} records read, ${todo.size} of ${partitions} partitions unfinished)`,
            ),
          ),
        timeoutMs,
      );
    });
    await Promise.race([done, timeout]).finally(() => clearTimeout(timer));
  } finally {
    if (progress) clearInterval(progress);
    await consumer.disconnect();
  }
  return out.sort((a, b) => a.timestamp - b.timestamp);
}
