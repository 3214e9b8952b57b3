// Topic creation on kafkajs that waits for leaders without kafkajs' own wait. With KRaft
// the broker that accepted CreateTopics may not yet know the topic in its metadata;
// kafkajs' `waitForLeaders` retries only LEADER_NOT_AVAILABLE and fails the whole call
// on that UNKNOWN_TOPIC_OR_PARTITION (seen in CI). Here any error of the metadata poll is
// waited out until the deadline. Never creates a topic that already exists and never
// changes one.
import type { Admin, ITopicConfig } from "kafkajs";
import { FastfenceError } from "../../core/errors.ts";

/** How long new topics may take to have a leader on every partition. */
export const TOPIC_LEADERS_WAIT_MS = 15_000;
const POLL_MS = 100;

/**
 * Creates `topics` (those that exist already are left alone) and resolves once every
 * partition of each has a leader. Throws FF_BUS_UNAVAILABLE (retriable) when the
 * leaders do not appear within `waitMs`; a creation refused by the cluster throws
 * what kafkajs threw.
 */
export async function createTopicsWithLeaders(
  admin: Admin,
  topics: readonly ITopicConfig[],
  waitMs: number = TOPIC_LEADERS_WAIT_MS,
): Promise<void> {
  if (topics.length === 0) return;
  await admin.createTopics({ waitForLeaders: false, topics: [...topics] });
  const names = topics.map((t) => t.topic);
  const wanted = new Map(topics.map((t) => [t.topic, partitionsOf(t)]));
  const end = Date.now() + waitMs;
  let lastError: unknown;
  for (;;) {
    try {
      const md = await admin.fetchTopicMetadata({ topics: names });
      const ready = md.topics.every((t) => {
        const n = wanted.get(t.name) ?? 1;
        return t.partitions.length >= n && t.partitions.every((p) => p.leader >= 0);
      });
      if (ready && md.topics.length === names.length) return;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > end)
      throw new FastfenceError("FF_BUS_UNAVAILABLE", `topics ${names.join(", ")} have no leaders yet`, {
        retriable: true,
        ...(lastError === undefined ? {} : { cause: lastError }),
      });
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

function partitionsOf(t: ITopicConfig): number {
  if (t.replicaAssignment && t.replicaAssignment.length > 0) return t.replicaAssignment.length;
  return t.numPartitions !== undefined && t.numPartitions > 0 ? t.numPartitions : 1;
}
