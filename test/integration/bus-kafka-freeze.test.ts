// Frozen is not dead (issue 14): the Kafka bus against three real brokers when one of them
// freezes (SIGSTOP: its TCP connections stay open, nothing answers) — the broker that
// coordinates the consumer group, leads partitions and may be the active KRaft controller.
// A stream of events is published every 100 ms by one bus and consumed by a group on
// another; the test measures, for every event, how long after its publication it was
// consumed, and asserts that no event published after the freeze waits longer than a
// bound stated from the broker and client timings.
import { describe, expect, it } from "vitest";
import { Kafka, logLevel } from "kafkajs";
import { decodeKafka, encodeKafka } from "../../events/codec.ts";
import { envelope, type FfEvent } from "../../events/envelope.ts";
import { KafkaJsBus } from "../../infra/bus/kafkajs-bus.ts";
import { createLogger } from "../../infra/log.ts";
import { startKafka } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const env = withEnv(async (scope) => ({ kafka: scope.add(await startKafka({ brokers: 3 })) }));

const ev = (n: number): FfEvent =>
  envelope(
    { type: "io.fastfence.test.v1", subject: "node-a", data: { n } },
    "/fastfence/test/freeze",
    Date.now(),
  );

function coordinatorPartition(groupId: string): number {
  let h = 0;
  for (const ch of groupId) h = (Math.imul(31, h) + ch.charCodeAt(0)) | 0;
  return Math.abs(h) % 6;
}

describe("a frozen broker", () => {
  it("delays no event by more than the bound when the group coordinator freezes", async () => {
    const { kafka } = env();
    const log = createLogger("freeze-test", { level: process.env.FASTFENCE_TEST_LOG ?? "silent" });
    const pub = new KafkaJsBus({
      brokers: kafka.bootstrap,
      clientId: "freeze-pub",
      security: kafka.clientSecurity("admin"),
      log,
    });
    const con = new KafkaJsBus({
      brokers: kafka.bootstrap,
      clientId: "freeze-con",
      sessionTimeoutMs: 3000,
      security: kafka.clientSecurity("admin"),
      log,
    });
    const groupId = "g-freeze";
    const topic = "t.freeze";
    const admin = new Kafka({
      clientId: "freeze-admin",
      brokers: kafka.bootstrap.split(","),
      ...kafka.clientSecurity("admin"),
      logLevel: logLevel.NOTHING,
    }).admin();
    const published = new Map<number, number>();
    const consumed = new Map<number, number>();
    let stop = false;
    try {
      await pub.ensureTopics([
        { topic, partitions: 3, replicationFactor: 3, config: { "min.insync.replicas": "1" } },
      ]);
      const sub = await con.subscribe({
        groupId,
        topics: [topic],
        fromBeginning: true,
        onRecord: async (r) => {
          const n = (decodeKafka(r).data as { n: number }).n;
          if (!consumed.has(n)) consumed.set(n, Date.now());
        },
      });
      let n = 0;
      const producing = (async () => {
        while (!stop) {
          const k = ++n;
          published.set(k, Date.now());
          void pub.publish(topic, [encodeKafka(ev(k))]).catch(() => published.delete(k));
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      // steady state first
      const t0 = Date.now();
      while (consumed.size < 10 && Date.now() - t0 < 60_000) await new Promise((r) => setTimeout(r, 50));
      await admin.connect();
      const md = await admin.fetchTopicMetadata({ topics: ["__consumer_offsets"] });
      const coordinator = md.topics[0]!.partitions.find(
        (p) => p.partitionId === coordinatorPartition(groupId),
      )!.leader;
      await admin.disconnect();
      const frozenAt = Date.now();
      const frozenFrom = n;
      kafka.brokers[coordinator - 1]!.freeze();
      await new Promise((r) => setTimeout(r, 30_000));
      stop = true;
      await producing;
      await new Promise((r) => setTimeout(r, 3_000));
      kafka.brokers[coordinator - 1]!.thaw();
      const after = [...published.entries()].filter(([k]) => k > frozenFrom);
      const waits = after.map(([k, at]) => (consumed.get(k) ?? Number.POSITIVE_INFINITY) - at);
      const lost = after.filter(([k]) => !consumed.has(k)).length;
      const sorted = [...waits].sort((a, b) => a - b);
      console.log(
        `froze broker ${coordinator} (group coordinator) at +0; ${after.length} events published after; lost ${lost}; wait p50 ${sorted[Math.floor(sorted.length / 2)]} ms, max ${sorted.at(-1)} ms; first consumed after freeze at +${Math.min(...after.map(([k]) => (consumed.get(k) ?? Infinity) - frozenAt))} ms`,
      );
      await sub.close();
      expect(lost).toBe(0);
      expect(sorted.at(-1)).toBeLessThan(10_000);
    } finally {
      stop = true;
      await admin.disconnect().catch(() => undefined);
      await pub.close();
      await con.close();
    }
  });
});
