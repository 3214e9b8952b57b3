// Needs real Kafka (3 brokers): an idle producer's seed broker frozen, its leaderships moved.
// An idle producer whose seed broker froze (issue 14; docs/lab.md, "Where the hangs' time
// goes"). A stage's producer publishes only when an incident moves, so at that moment its
// metadata has expired and its one connection is the one it made at start, to its seed
// broker, which kafkajs takes from the front of the broker list. When that broker is frozen
// (its TCP connections open, nothing answering), the producer's next send first refreshes
// its metadata there and waits out the request timeout, then reconnects to the same seed
// and waits out the connection timeout: about 2 s in the lab's hangs, on the fencing path,
// long after the controller had moved the frozen broker's leaderships. The publish hedge
// sends its copies through a second producer whose list starts at another broker
// (kafkajs-publish.ts), so the publish is acknowledged a hedge deadline later instead.
//
// Real brokers; the freeze is a SIGSTOP of the first broker of the bus's list, after the
// producers were prepared and their metadata had expired, and the publish starts once the
// controller has fenced the frozen broker and moved its leaderships (what a publish on the
// fencing path meets: the freeze has to be noticed before anything is confirmed).
import { describe, expect, it } from "vitest";
import { Kafka, logLevel, type Admin } from "kafkajs";
import { encodeKafka } from "../../events/codec.ts";
import { envelope } from "../../events/envelope.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import type { KafkaBus } from "../../infra/bus/kafka-config.ts";
import { isSuspect } from "../../infra/bus/kafkajs-suspects.ts";
import { createLogger } from "../../infra/log.ts";
import { startKafka, type KafkaCluster } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";

/** The bus's request and connection timeouts (its defaults), and its metadata age, ms. */
const TIMEOUT_MS = 1_000;
/**
 * Longest publish, ms. Through the stage's producer alone it takes a request timeout and
 * a connection timeout (at least 2 × TIMEOUT_MS); the hedge leaves after 300 ms (the bus's
 * default) and needs a metadata refresh and a produce to brokers that answer (tens of ms),
 * with room for a 2-core machine running three brokers.
 */
const PUBLISH_BOUND_MS = 1_500;
/**
 * Longest unhedged publish once the frozen seed is suspect, ms: a connection, SASL handshake
 * and metadata refresh at a live broker and a produce (tens of ms); through the frozen seed
 * it is at least 2 × TIMEOUT_MS.
 */
const SUSPECT_PUBLISH_BOUND_MS = 1_000;
const TOPIC = "t.idle";

/** Until `admin` lists no partition of TOPIC led by broker `id` and no broker `id` (30 s at most). */
async function leadershipsMoved(admin: Admin, id: number): Promise<void> {
  const end = Date.now() + 30_000;
  for (;;) {
    const [cluster, md] = await Promise.all([
      admin.describeCluster(),
      admin.fetchTopicMetadata({ topics: [TOPIC] }),
    ]).catch(() => [undefined, undefined] as const);
    const moved =
      cluster !== undefined &&
      !cluster.brokers.some((b) => b.nodeId === id) &&
      md!.topics[0]!.partitions.every((p) => p.leader !== id && p.leader >= 0);
    if (moved) return;
    if (Date.now() > end) throw new Error(`broker ${id} still leads partitions 30 s after its freeze`);
    await sleep(100);
  }
}

const testEvent = () =>
  envelope(
    { type: "io.fastfence.test.v1", subject: "node-a", data: { n: 1 } },
    "/fastfence/test/idle",
    Date.now(),
  );

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A kafkajs bus on `kafka` (its options `extra` added) with TOPIC created and its producers
 * prepared, the broker it starts at (the first of kafka.bootstrap), and an admin client
 * that watches the cluster through the other brokers only (not connected yet).
 */
async function idleBus(kafka: KafkaCluster, extra: { hedgeAfterMs?: number } = {}) {
  const log = createLogger("idle-producer-test", { level: process.env.FASTFENCE_TEST_LOG ?? "silent" });
  const security = kafka.clientSecurity("admin");
  const bus = createKafkaBus(
    { brokers: kafka.bootstrap, clientId: "idle-pub", ...extra, security, log },
    "kafkajs",
  );
  const admin = new Kafka({
    clientId: "idle-admin",
    brokers: kafka.bootstrap.split(",").slice(1),
    ...security,
    logLevel: logLevel.NOTHING,
  }).admin();
  await bus.ensureTopics([
    { topic: TOPIC, partitions: 3, replicationFactor: 3, config: { "min.insync.replicas": "1" } },
  ]);
  await bus.preparePublishing?.([TOPIC]);
  return { bus, admin, seed: kafka.brokers[0]!, log, security };
}

/** How long one publish of a test event to TOPIC takes, ms. */
async function timedPublish(bus: KafkaBus): Promise<number> {
  const t0 = Date.now();
  await bus.publish(TOPIC, [encodeKafka(testEvent())]);
  return Date.now() - t0;
}

describe("kafkajs bus, idle producer, its seed broker frozen", () => {
  const env = withEnv(async (scope) => ({ kafka: scope.add(await startKafka({ brokers: 3 })) }));

  it(`publishes within ${PUBLISH_BOUND_MS} ms once the frozen broker's leaderships moved`, async () => {
    const { bus, admin, seed } = await idleBus(env().kafka);
    try {
      await sleep(TIMEOUT_MS + 500); // the producers' metadata expires
      seed.freeze();
      await admin.connect();
      await leadershipsMoved(admin, seed.id);
      const took = await timedPublish(bus);
      console.log(
        `broker ${seed.id} (the bus's seed) frozen; a publish after its leaderships moved took ${took} ms`,
      );
      expect(took).toBeLessThan(PUBLISH_BOUND_MS);
    } finally {
      seed.thaw();
      await admin.disconnect().catch(() => undefined);
      await bus.close();
    }
  });
});

// Fix 7 (kafkajs-suspects.ts): once any client of the process found a broker silent (here a
// consumer whose fetch from it timed out), an idle producer whose seed is that broker
// refreshes its metadata through another one, without waiting on the frozen seed at all.
// Hedging is off for this bus, so only the stage's own producer is measured.
describe("kafkajs bus, idle producer, its seed broker frozen and already found silent", () => {
  const env = withEnv(async (scope) => ({ kafka: scope.add(await startKafka({ brokers: 3 })) }));

  it(`publishes through another broker within ${SUSPECT_PUBLISH_BOUND_MS} ms, without a hedge`, async () => {
    const { kafka } = env();
    const { bus, admin, seed, log, security } = await idleBus(kafka, { hedgeAfterMs: 0 });
    const con = createKafkaBus({ brokers: kafka.bootstrap, clientId: "idle-con", security, log }, "kafkajs");
    const [host, port] = kafka.bootstrap.split(",")[0]!.split(":");
    try {
      const sub = await con.subscribe({
        groupId: "g-idle",
        topics: [TOPIC],
        onRecord: async () => undefined,
      });
      await sub.ready;
      seed.freeze();
      // The consumer's fetch from the frozen broker times out: that marks it suspect.
      const marked = Date.now() + 15_000;
      while (!isSuspect(host, Number(port))) {
        if (Date.now() > marked) throw new Error(`no client marked broker ${seed.id} suspect within 15 s`);
        await sleep(50);
      }
      await admin.connect();
      await leadershipsMoved(admin, seed.id);
      const took = await timedPublish(bus);
      console.log(
        `broker ${seed.id} (the bus's seed) frozen and suspect; an unhedged publish took ${took} ms`,
      );
      expect(took).toBeLessThan(SUSPECT_PUBLISH_BOUND_MS);
      await sub.close();
    } finally {
      seed.thaw();
      await admin.disconnect().catch(() => undefined);
      await con.close();
      await bus.close();
    }
  });
});
