// Needs real Kafka: max.message.bytes and committed offsets past a flood of bad records.
// Bad records never stall a partition and are cheap (issue 14, item 4), on a real Kafka
// broker: the Kafka runtime hosts a one-type test stage ("relay", consuming node.observed,
// emitting nothing) whose handler records what reaches it; everything else is the
// production runtime, bus and dead-lettering.
// - An oversized record (near the broker's 1 MiB max.message.bytes, far more than a dead
//   letter may carry) is dead-lettered with a truncated copy, its size and hash, its offset
//   is committed, and the valid event behind it on the same partition is handled.
// - A flood of 20000 malformed records (plus other stages' events, skipped unread) ahead
//   of one valid event on the same partition delays it by a measured time, printed and
//   bounded generously for a shared 2-core machine; every malformed record on the topic
//   (a retried test produce may write some twice) has its offset named by a dead letter
//   (a handed-over batch's share one: far fewer letters than records), and the group's
//   committed offset passes them all.
// Both on kafkajs and on @platformatic/kafka (FASTFENCE_KAFKA_CLIENT).
import { Kafka, logLevel } from "kafkajs";
import { loadavg } from "node:os";
import { describe, expect, it } from "vitest";
import { testedKafkaClients } from "../../harness/env/kafka-clients.ts";
import { systemClock } from "../../core/clock.ts";
import { EVENT_TYPES, TOPICS } from "../../events/catalog.ts";
import { encodeKafka, type KafkaRecord } from "../../events/codec.ts";
import type { FfEvent } from "../../events/envelope.ts";
import { DeadLetterSchema, type DeadLetter } from "../../events/schemas.ts";
import type { StageInfo } from "../../functions/contract.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { createLogger } from "../../infra/log.ts";
import { createFunctionMetrics } from "../../infra/metrics.ts";
import { startKafkaRuntime } from "../../infra/runtime/kafka-runtime.ts";
import { catalogViewFor, pipelineTopics } from "../../app/host.ts";
import { sharedKafka } from "../../harness/env/shared-kafka.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { observed } from "../scenarios/fixtures.ts";
import { waitFor } from "./pipeline-helpers.ts";

const OVERSIZED = "fastfence.test-oversized";
const FLOOD = "fastfence.test-flood";

const relay: StageInfo = {
  name: "relay",
  description: "test stage: records each node.observed it is handed",
  subscriptions: [{ topic: TOPICS.observations, types: [EVENT_TYPES.nodeObserved] }],
  emits: [],
  critical: false,
};

describe.each(testedKafkaClients())("%s bus", (client) => {
  const env = withEnv(async (scope) => {
    const kafka = scope.add(await sharedKafka());
    const security = kafka.clientSecurity("admin");
    const bus = createKafkaBus({ brokers: kafka.bootstrap, clientId: "flood-test", security }, client);
    scope.add({ stop: () => bus.close() });
    await bus.ensureTopics([
      ...pipelineTopics(1),
      { topic: OVERSIZED, partitions: 1, replicationFactor: 1 },
      { topic: FLOOD, partitions: 1, replicationFactor: 1 },
    ]);
    const admin = new Kafka({
      clientId: "flood-test-admin",
      brokers: kafka.bootstrap.split(","),
      logLevel: logLevel.NOTHING,
      ...security,
    }).admin();
    await admin.connect();
    scope.add({ stop: () => admin.disconnect() });

    /** The relay stage on `topic`, with its own bus (principal admin), recording arrival times. */
    async function host(topic: string, replica: string) {
      const seen: { id: string; at: number }[] = [];
      const rt = await startKafkaRuntime({
        def: relay,
        handler: async (ev: FfEvent) => {
          seen.push({ id: ev.id, at: Date.now() });
          return { outcome: { kind: "processed" }, emit: [] };
        },
        bus: scope.add(
          (() => {
            const b = createKafkaBus({ brokers: kafka.bootstrap, clientId: replica, security }, client);
            return { bus: b, stop: () => b.close() };
          })(),
        ).bus,
        catalog: catalogViewFor(topic),
        clock: systemClock,
        log: createLogger("relay", { level: "silent" }),
        metrics: createFunctionMetrics({ defaultMetrics: false }),
        config: { groupMode: "each-replica", replica },
      });
      scope.add({ stop: () => rt.stop() });
      await rt.ready;
      // A new group starts at the end of the topic once it has fetched its first offsets,
      // which may be just after it joined: one event seen means the position is fixed (offset 0).
      const first = valid("node-warm");
      let base = 0;
      await waitFor("the warm-up event handled", async () => {
        if (!seen.some((s) => s.id === first.id)) {
          await bus.publish(topic, [encodeKafka(first)]);
          base++;
        }
        await new Promise((r) => setTimeout(r, 500));
        return seen.some((s) => s.id === first.id);
      });
      const groupId = `fastfence-relay-${replica}`;
      await waitFor("the warm-up offsets committed", async () => (await committed(groupId, topic)) === base);
      seen.length = 0;
      /** The offset of the first record published from now on. */
      return { seen, groupId, base };
    }
    return { bus, admin, host };
  });

  /** Dead letters of records from `topic`. */
  async function deadLetters(topic: string): Promise<DeadLetter[]> {
    const recs = await env().bus.readAll([TOPICS.deadLetter], { timeoutMs: 10_000 });
    return recs
      .map((r) => DeadLetterSchema.parse(JSON.parse(r.value!.toString())))
      .filter((d) => d.topic === topic);
  }

  /** Every offset the dead letters name: their `offsets` ranges, or the one `offset`. */
  function coveredOffsets(dead: readonly DeadLetter[]): Set<number> {
    const out = new Set<number>();
    for (const d of dead)
      for (const range of (d.offsets ?? d.offset).split(",")) {
        const [from, to = from] = range.split("-").map(Number) as [number, number?];
        for (let o = from; o <= to; o++) out.add(o);
      }
    return out;
  }

  async function committed(groupId: string, topic: string): Promise<number> {
    const [t] = await env().admin.fetchOffsets({ groupId, topics: [topic] });
    return Number(t?.partitions[0]?.offset ?? -1);
  }

  const valid = (target: string) => observed("w1", target, 3, Date.now());

  describe("Kafka runtime: bad records never stall a partition", () => {
    it("dead-letters a record near the broker's size limit with a truncated copy and moves on", async () => {
      const { bus, host } = env();
      const relayOn = await host(OVERSIZED, "oversized");
      const big = Buffer.alloc(1_000_000, 0x7b);
      await bus.publish(OVERSIZED, [
        { key: "big", value: big, headers: { ce_type: EVENT_TYPES.nodeObserved } },
      ]);
      const ev = valid("node-a");
      await bus.publish(OVERSIZED, [encodeKafka(ev)]);
      await waitFor(
        "the valid event behind it handled",
        async () => relayOn.seen.some((s) => s.id === ev.id),
        30_000,
      );
      const [dl] = await waitFor("its dead letter", async () => {
        const d = await deadLetters(OVERSIZED);
        return d.length ? d : undefined;
      });
      expect(dl).toMatchObject({
        code: "FF_INVALID_EVENT",
        key: "big",
        offset: String(relayOn.base),
        truncated: true,
        originalBytes: 1_000_000,
      });
      expect(dl!.reason).toMatch(/larger than any event/);
      expect(Buffer.from(dl!.originalBase64, "base64")).toEqual(big.subarray(0, 32 * 1024));
      // Both offsets committed: a restart resumes after them.
      await waitFor(
        "both offsets committed",
        async () => (await committed(relayOn.groupId, OVERSIZED)) === relayOn.base + 2,
        10_000,
      );
    });

    it("a flood of 20000 malformed records delays a valid event by little, and every one is dead-lettered", async () => {
      const { bus, host } = env();
      const relayOn = await host(FLOOD, "flood");
      const BAD = 20_000;
      const OTHERS = 5_000;
      const sample = encodeKafka(valid("node-b"));
      const records: KafkaRecord[] = [];
      for (let i = 0; i < BAD; i++)
        records.push(
          i % 2 === 0
            ? { key: `junk-${i}`, value: Buffer.from(`not an event ${i}`), headers: {} } // no CloudEvent headers
            : {
                ...sample,
                key: `bad-${i}`,
                headers: { ...sample.headers, ce_id: `bad-${i}` },
                value: Buffer.from(`{"target":1}`),
              }, // fails the schema
        );
      // Other stages' events on the same topic: skipped by type, never decoded, not dead-lettered.
      for (let i = 0; i < OTHERS; i++)
        records.push({
          key: `other-${i}`,
          value: Buffer.from("{}"),
          headers: { ce_type: EVENT_TYPES.nodeSuspected },
        });
      for (let i = 0; i < records.length; i += 2000) await bus.publish(FLOOD, records.slice(i, i + 2000));
      const ev = valid("node-b");
      const sentAt = Date.now();
      const cpuAt = process.cpuUsage(); // this process: the runtime, its Kafka client and the test
      await bus.publish(FLOOD, [encodeKafka(ev)]);
      const got = await waitFor(
        "the valid event handled",
        async () => relayOn.seen.find((s) => s.id === ev.id),
        60_000,
        10,
      );
      const delayMs = got.at - sentAt;
      const cpu = process.cpuUsage(cpuAt);
      console.log(
        `flood: valid event handled ${delayMs} ms after it was sent behind ${BAD} malformed and ${OTHERS} other records ` +
          `(CPU of this process meanwhile ${Math.round((cpu.user + cpu.system) / 1000)} ms; load average ${loadavg()[0]!.toFixed(1)})`,
      );
      expect(delayMs).toBeLessThan(10_000);
      expect(relayOn.seen.map((s) => s.id)).toEqual([ev.id]);

      // The test's own producer is not idempotent: a produce retried under load writes its
      // chunk twice. What the topic holds, not what was sent, is what must be dead-lettered.
      const onTopic = (await bus.readAll([FLOOD], { timeoutMs: 30_000 })).filter(
        (r) => Number(r.offset) >= relayOn.base,
      );
      const malformed = new Set(
        onTopic.filter((r) => /^(junk|bad)-/.test(r.key ?? "")).map((r) => Number(r.offset)),
      );
      expect(malformed.size).toBeGreaterThanOrEqual(BAD);
      if (malformed.size > BAD) console.log(`flood: ${malformed.size - BAD} malformed records written twice`);
      const dead = await waitFor(
        `dead letters naming all ${malformed.size} malformed offsets`,
        async () => {
          const d = await deadLetters(FLOOD);
          return coveredOffsets(d).size >= malformed.size ? d : undefined;
        },
        60_000,
        1000,
      );
      // At least once: a retried produce may duplicate a dead letter, never lose one. A
      // handed-over batch's malformed records share one dead letter (its copy is the first's).
      expect([...coveredOffsets(dead)].sort((a, b) => a - b)).toEqual([...malformed].sort((a, b) => a - b));
      console.log(`flood: ${dead.length} dead letters for ${malformed.size} malformed records`);
      expect(dead.length).toBeLessThan(BAD / 10);
      expect(dead.every((d) => d.code === "FF_INVALID_EVENT" && !d.truncated)).toBe(true);
      expect(dead.reduce((n, d) => n + (d.count ?? 1), 0)).toBeGreaterThanOrEqual(malformed.size);
      const end = Math.max(...onTopic.map((r) => Number(r.offset))) + 1;
      expect(end).toBeGreaterThanOrEqual(relayOn.base + BAD + OTHERS + 1);
      await waitFor(
        "every offset committed",
        async () => (await committed(relayOn.groupId, FLOOD)) === end,
        10_000,
      );
    });
  });
});
