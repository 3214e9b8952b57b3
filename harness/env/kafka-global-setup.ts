// The integration project's vitest globalSetup for Kafka: starts ONE single-broker
// cluster for the whole vitest invocation (shared-kafka-start.ts), hands its connection
// facts and start state to the test processes (provide: SHARED_KAFKA_KEY), and stops it
// in teardown. Files attach with sharedKafka() (shared-kafka.ts), which resets the
// cluster around each file. It must never hand out the broker process (only addresses and
// files), nor outlive the vitest process that started it.
import type { TestProject } from "vitest/node";
import { EnvError } from "./base.ts";
import { SHARED_KAFKA_KEY } from "./shared-kafka-facts.ts";
import { startSharedKafka } from "./shared-kafka-start.ts";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Two files at once would reset each other's topics away.
  if (project.config.maxWorkers !== 1)
    throw new EnvError(
      `${project.name}: a shared Kafka needs its files one at a time (fileParallelism: false)`,
    );
  const { cluster, facts } = await startSharedKafka();
  project.provide(SHARED_KAFKA_KEY, facts);
  return () => cluster.stop();
}
