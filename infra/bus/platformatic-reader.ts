// The one-shot reader (Bus.readAll) on @platformatic/kafka, with the contract of
// kafkajs-reader.ts: every record of some topics up to their end offsets at the time of
// the call, from the beginning or from the first offset at or after `sinceMs` (the
// broker's offsets-by-timestamp index), under a throwaway reader group that commits
// nothing; progress about once a second; the topics that exist. Reads only; never
// commits offsets, never logs record values.
import { Admin, Consumer, ListOffsetTimestamps, type Message } from "@platformatic/kafka";
import { settlesWithin, systemClock } from "../../core/clock.ts";
import { FastfenceError } from "../../core/errors.ts";
import { READER_GROUP_PREFIX } from "../../events/kafka-acls.ts";
import type { BusRecord, ReadOptions } from "./bus.ts";
import { READ_REQUEST_TIMEOUT_MS } from "./kafka-config.ts";
import type { KafkaSecurity } from "./kafka-security.ts";
import { clientOptions, toRecord, type ClientSettings } from "./platformatic-client.ts";

/** clientOptions for a one-shot read or listing: the bus's, with READ_REQUEST_TIMEOUT_MS at least. */
function readerOptions(cfg: ClientSettings, security: KafkaSecurity, suffix: string) {
  const base = clientOptions(cfg, security, suffix);
  return {
    ...base,
    connectTimeout: Math.max(cfg.connectionTimeoutMs, READ_REQUEST_TIMEOUT_MS),
    requestTimeout: Math.max(cfg.requestTimeoutMs, READ_REQUEST_TIMEOUT_MS),
  };
}
/** Waits for `p` at most `ms` (its outcome is ignored). */
const bounded = (p: Promise<unknown>, ms: number) => settlesWithin(systemClock, ms, p);

/** The topics of `wanted` that exist on the cluster, sorted. */
export async function existingTopics(
  cfg: ClientSettings,
  security: KafkaSecurity,
  wanted?: (t: string) => boolean,
): Promise<string[]> {
  const admin = new Admin(readerOptions(cfg, security, "-admin"));
  try {
    return (await admin.listTopics()).filter((t) => (wanted ? wanted(t) : true)).sort();
  } finally {
    await bounded(admin.close(), 3000);
  }
}

export async function readTopics(
  cfg: ClientSettings & { sessionTimeoutMs: number },
  security: KafkaSecurity,
  topics: readonly string[],
  opts: ReadOptions = {},
): Promise<BusRecord[]> {
  const consumer = new Consumer({
    ...readerOptions(cfg, security, "-reader"),
    groupId: `${READER_GROUP_PREFIX}${process.pid}-${Date.now()}`,
    sessionTimeout: cfg.sessionTimeoutMs,
    heartbeatInterval: Math.max(100, Math.floor(cfg.sessionTimeoutMs / 3)),
    autocommit: false,
    maxWaitTime: 100,
  });
  const out: BusRecord[] = [];
  let progress: NodeJS.Timeout | undefined;
  let stream: Awaited<ReturnType<typeof consumer.consume>> | undefined;
  try {
    const list = [...topics];
    const ends = await consumer.listOffsets({ topics: list, timestamp: ListOffsetTimestamps.LATEST });
    const starts = await consumer.listOffsets({
      topics: list,
      timestamp: opts.sinceMs === undefined ? ListOffsetTimestamps.EARLIEST : BigInt(opts.sinceMs),
    });
    /** "topic/partition" → [start, end) still to read. */
    const todo = new Map<string, { start: bigint; end: bigint }>();
    const offsets: { topic: string; partition: number; offset: bigint }[] = [];
    for (const topic of list) {
      const e = ends.get(topic) ?? [];
      e.forEach((end, partition) => {
        const at = starts.get(topic)?.[partition];
        // -1: no record at or after sinceMs in this partition.
        const start = at === undefined || at < 0n ? end : at;
        offsets.push({ topic, partition, offset: start });
        if (end > start) todo.set(`${topic}/${partition}`, { start, end });
      });
    }
    if (todo.size === 0) return out;
    const partitions = todo.size;
    if (opts.onProgress)
      progress = setInterval(
        () => opts.onProgress!({ records: out.length, partitionsLeft: todo.size, partitions }),
        1000,
      );
    const subscribed = [...new Set([...todo.keys()].map((k) => k.slice(0, k.lastIndexOf("/"))))];
    const s = await consumer.consume({
      topics: subscribed,
      mode: "manual",
      offsets: offsets.filter((o) => subscribed.includes(o.topic)),
      autocommit: false,
      maxWaitTime: 100,
    });
    stream = s;
    const timeoutMs = opts.timeoutMs ?? 15_000;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new FastfenceError(
              "FF_BUS_UNAVAILABLE",
              `reading ${topics.join(", ")} timed out after ${timeoutMs} ms (${out.length} records read, ${todo.size} of ${partitions} partitions unfinished)`,
            ),
          ),
        timeoutMs,
      );
      const finish = (err?: unknown) => {
        clearTimeout(timer);
        if (err === undefined) resolve();
        else
          reject(
            new FastfenceError(
              "FF_BUS_UNAVAILABLE",
              `reading ${topics.join(", ")} failed (${out.length} records read): ${err instanceof Error ? err.message : String(err)}`,
              { cause: err },
            ),
          );
      };
      s.on("error", finish);
      s.on("data", (m: Message) => {
        const k = `${m.topic}/${m.partition}`;
        const span = todo.get(k);
        if (!span) return;
        if (m.offset >= span.start) out.push(toRecord(m));
        if (m.offset + 1n >= span.end) todo.delete(k);
        if (todo.size === 0) finish();
      });
    });
  } finally {
    if (progress) clearInterval(progress);
    if (stream) await bounded(stream.close(), 3000);
    await bounded(consumer.close(true), 3000);
  }
  return out.sort((a, b) => a.timestamp - b.timestamp);
}
