// Starts the Kafka cluster the test files share (SHARED_KAFKA_OPTIONS) and makes it ready
// to be reset: it has the broker create its group-offsets topic first (as a file's first
// consumer group would), so that topic is part of the start state rather than something
// a file made, then reads that start state (kafka-state.ts) and the facts a test process
// needs to reach it. Used by the run's globalSetup and, when a file runs without it, by
// sharedKafka()'s fallback. Stopping the cluster is its caller's job.
import { FindCoordinatorKeyTypes } from "@platformatic/kafka";
import { EnvError, sleep } from "./base.ts";
import { openKafkaAdmin } from "./kafka-admin.ts";
import { readKafkaState } from "./kafka-state.ts";
import { startKafka, type KafkaCluster } from "./kafka.ts";
import { SHARED_KAFKA_OPTIONS, type SharedKafkaFacts } from "./shared-kafka-facts.ts";

const OFFSETS_TOPIC = "__consumer_offsets";

/** Asks for a group coordinator until the broker has made and loaded its offsets topic. */
async function primeGroupCoordinator(kafka: KafkaCluster, timeoutMs = 30_000): Promise<void> {
  const c = openKafkaAdmin(kafka.bootstrap, kafka.clientSecurity("admin"));
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      try {
        await c.admin.findCoordinator({ keyType: FindCoordinatorKeyTypes.GROUP, keys: ["fastfence-prime"] });
        await c.admin.listConsumerGroupOffsets({ groups: ["fastfence-prime"] });
        const leaders = (await c.metadata()).topics.get(OFFSETS_TOPIC)?.leaders ?? [];
        if (leaders.length > 0 && leaders.every((l) => l >= 0)) return;
      } catch (err) {
        // The coordinator is not available until the topic exists and is loaded.
        if (Date.now() > deadline)
          throw new EnvError(`Kafka: no group coordinator after ${timeoutMs} ms`, { cause: err });
      }
      if (Date.now() > deadline)
        throw new EnvError(`Kafka: ${OFFSETS_TOPIC} has no leaders after ${timeoutMs} ms`);
      await sleep(100);
    }
  } finally {
    await c.close().catch(() => undefined);
  }
}

/** What a test process needs to reach `kafka` and reset it to the state read now. */
async function factsOf(kafka: KafkaCluster): Promise<SharedKafkaFacts> {
  const c = openKafkaAdmin(kafka.bootstrap, kafka.clientSecurity("admin"));
  try {
    return {
      bootstrap: kafka.bootstrap,
      clusterId: kafka.clusterId,
      brokers: kafka.brokers.map((b) => ({
        id: b.id,
        port: b.port,
        controllerPort: b.controllerPort,
        dataDir: b.dataDir,
        logPath: b.logPath,
      })),
      caFile: kafka.auth.caFile,
      passwords: Object.fromEntries(kafka.auth.passwords),
      users: kafka.auth.users,
      start: await readKafkaState(c, "all"),
    };
  } finally {
    await c.close().catch(() => undefined);
  }
}

/** The shared cluster, started and primed, with its facts (its start state included). */
export async function startSharedKafka(): Promise<{ cluster: KafkaCluster; facts: SharedKafkaFacts }> {
  const cluster = await startKafka(SHARED_KAFKA_OPTIONS);
  try {
    await primeGroupCoordinator(cluster);
    return { cluster, facts: await factsOf(cluster) };
  } catch (err) {
    await cluster.stop().catch(() => undefined);
    throw err;
  }
}
