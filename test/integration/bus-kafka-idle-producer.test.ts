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
import { Kafka, logLevel } from "kafkajs";
import { encodeKafka } from "../../events/codec.ts";
import { envelope } from "../../events/envelope.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { createLogger } from "../../infra/log.ts";
import { startKafka } from "../../harness/env/index.ts";
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
const TOPIC = "t.idle";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("kafkajs bus, idle producer, its seed broker frozen", () => {
  const env = withEnv(async (scope) => ({ kafka: scope.add(await startKafka({ brokers: 3 })) }));

  it(`publishes within ${PUBLISH_BOUND_MS} ms once the frozen broker's leaderships moved`, async () => {
    const { kafka } = env();
    const log = createLogger("idle-producer-test", { level: process.env.FASTFENCE_TEST_LOG ?? "silent" });
    const security = kafka.clientSecurity("admin");
    const bus = createKafkaBus({ brokers: kafka.bootstrap, clientId: "idle-pub", security, log }, "kafkajs");
    const seed = kafka.brokers[0]!; // the first of kafka.bootstrap
    // Watches the cluster through the other brokers only.
    const admin = new Kafka({
      clientId: "idle-admin",
      brokers: kafka.bootstrap.split(",").slice(1),
      ...security,
      logLevel: logLevel.NOTHING,
    }).admin();
    try {
      await bus.ensureTopics([
        { topic: TOPIC, partitions: 3, replicationFactor: 3, config: { "min.insync.replicas": "1" } },
      ]);
      await bus.preparePublishing?.([TOPIC]);
      await sleep(TIMEOUT_MS + 500); // the producers' metadata expires
      seed.freeze();
      await admin.connect();
      const end = Date.now() + 30_000;
      for (;;) {
        const [cluster, md] = await Promise.all([
          admin.describeCluster(),
          admin.fetchTopicMetadata({ topics: [TOPIC] }),
        ]).catch(() => [undefined, undefined] as const);
        const moved =
          cluster !== undefined &&
          !cluster.brokers.some((b) => b.nodeId === seed.id) &&
          md!.topics[0]!.partitions.every((p) => p.leader !== seed.id && p.leader >= 0);
        if (moved) break;
        if (Date.now() > end)
          throw new Error(`broker ${seed.id} still leads partitions 30 s after its freeze`);
        await sleep(100);
      }
      const ev = envelope(
        { type: "io.fastfence.test.v1", subject: "node-a", data: { n: 1 } },
        "/fastfence/test/idle",
        Date.now(),
      );
      const t0 = Date.now();
      await bus.publish(TOPIC, [encodeKafka(ev)]);
      const took = Date.now() - t0;
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
