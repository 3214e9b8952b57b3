// The chaos `replay` step (lab/chaos-schedule.ts): every pipeline record of a recent window
// is published again, unchanged (key, value, headers), each as the principal whose ACLs
// allow writing its topic. That is what a producer's retries duplicate, and what a replica
// holding that identity could replay from an earlier incident (a fence request for a node
// fenced, released and healthy again since). The pipeline must treat each as the duplicate
// or stale record it is. The plan is pure; `replayRecords` does the reading and writing,
// with the lab's read-only audit principal for the read. Never writes the dead-letter topic
// and never changes a record.
import { TOPICS } from "../events/catalog.ts";
import type { KafkaRecord } from "../events/codec.ts";
import { isKeepalive } from "../events/keepalive.ts";
import { ACL_PRINCIPALS, aclsFor, type KafkaPrincipal } from "../events/kafka-acls.ts";
import type { BusRecord } from "../infra/bus/bus.ts";
import { createKafkaBus } from "../infra/bus/kafka-bus.ts";
import { labKafkaSecurity } from "./kafka.ts";
import type { Lab } from "./lab.ts";

/** Observations are many (every probe): only the newest this many are replayed. */
export const REPLAY_OBSERVATIONS = 500;

/** How often a topic's replay is tried, 2 s apart, before the step fails. */
const PUBLISH_TRIES = 8;
/** How often the window is read, 2 s apart, before the step fails. */
const READ_TRIES = 3;
/** The pause between two tries of a read or a topic's publish, ms. */
const RETRY_PAUSE_MS = 2000;

/** The topics a replay reads and writes again: every catalog topic but the dead letters. */
export const REPLAY_TOPICS: readonly string[] = Object.values(TOPICS).filter((t) => t !== TOPICS.deadLetter);

/** The first principal (in ACL order) allowed to write `topic`, if any. */
export function writerOf(topic: string): KafkaPrincipal | undefined {
  return ACL_PRINCIPALS.find((p) =>
    aclsFor(p).some(
      (a) =>
        a.resourceType === "topic" &&
        a.operation === "Write" &&
        (a.patternType === "literal" ? a.name === topic : topic.startsWith(a.name)),
    ),
  );
}

export interface ReplayBatch {
  topic: string;
  principal: KafkaPrincipal;
  records: KafkaRecord[];
}

/**
 * What to publish again: per topic, its records in the order read (observations: only the
 * newest REPLAY_OBSERVATIONS by broker timestamp), as that topic's writer. A record of a
 * topic nobody may write is left out and counted in `unwritable`.
 */
export function replayPlan(records: readonly BusRecord[]): { batches: ReplayBatch[]; unwritable: number } {
  const byTopic = new Map<string, BusRecord[]>();
  for (const r of records) {
    if (!REPLAY_TOPICS.includes(r.topic) || isKeepalive(r)) continue;
    const list = byTopic.get(r.topic) ?? [];
    list.push(r);
    byTopic.set(r.topic, list);
  }
  const batches: ReplayBatch[] = [];
  let unwritable = 0;
  for (const [topic, list] of [...byTopic].sort(([a], [b]) => a.localeCompare(b))) {
    const principal = writerOf(topic);
    if (!principal) {
      unwritable += list.length;
      continue;
    }
    const chosen =
      topic === TOPICS.observations
        ? [...list].sort((a, b) => a.timestamp - b.timestamp).slice(-REPLAY_OBSERVATIONS)
        : list;
    batches.push({
      topic,
      principal,
      records: chosen.map((r) => ({ key: r.key, value: r.value, headers: r.headers })),
    });
  }
  return { batches, unwritable };
}

/** Reads the records of the last `windowMs` and publishes them again; returns how many per topic. */
export async function replayRecords(lab: Lab, windowMs: number): Promise<Record<string, number>> {
  const since = Date.now() - windowMs;
  // A fresh client per try: right after a fault the first may have picked a hung or dead
  // bootstrap broker (chaos seed 129: "cannot connect the Kafka producer"; seed 168: a
  // killed broker refused the reader, "connect ECONNREFUSED").
  const records = await withRetries(READ_TRIES, async () => {
    const reader = createKafkaBus({
      brokers: lab.brokers,
      clientId: `lab-replay-read-${Date.now()}`,
      security: labKafkaSecurity("audit"),
    });
    try {
      return await reader.readAll(REPLAY_TOPICS, { timeoutMs: 30_000, sinceMs: since });
    } finally {
      await reader.close().catch(() => undefined);
    }
  });
  const { batches } = replayPlan(records);
  const done: Record<string, number> = {};
  for (const b of batches)
    await withRetries(PUBLISH_TRIES, async () => {
      const bus = createKafkaBus({
        brokers: lab.brokers,
        clientId: `lab-replay-${b.principal}`,
        security: labKafkaSecurity(b.principal),
      });
      try {
        for (let i = 0; i < b.records.length; i += 100)
          await bus.publish(b.topic, b.records.slice(i, i + 100));
        done[b.topic] = b.records.length;
      } finally {
        await bus.close().catch(() => undefined);
      }
    });
  return done;
}

/** Runs `attempt` up to `tries` times, RETRY_PAUSE_MS apart; rethrows the last failure. */
async function withRetries<T>(tries: number, attempt: () => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (n >= tries) throw err;
      await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
    }
  }
}
