// A test file's handle on the run's shared single-broker Kafka cluster (started by
// kafka-global-setup.ts, reached through the facts it provides): the same addresses and
// per-principal credentials as a cluster of its own (KafkaClusterView), reset to the start
// state when the file attaches and again when it is done (stop()), so each file starts
// from the same empty cluster. Without the globalSetup it starts a cluster of its own, so
// a file still runs alone. It must never stop, freeze or reconfigure the shared broker,
// and never write into the globalSetup's files. Test processes only (it imports vitest).
import { inject } from "vitest";
import type { KafkaPrincipal } from "../../events/kafka-acls.ts";
import { clientEnvOf, clientSecurityOf } from "./kafka-auth.ts";
import { resetKafka, type ResetResult } from "./kafka-reset.ts";
import type { KafkaState } from "./kafka-state.ts";
import type { KafkaClusterView } from "./kafka.ts";
import { makeTempDir, removeTempDir } from "./registry.ts";
import { SHARED_KAFKA_KEY, type SharedKafkaFacts } from "./shared-kafka-facts.ts";
import { startSharedKafka } from "./shared-kafka-start.ts";

export interface SharedKafka extends KafkaClusterView {
  /** What the cluster is reset to. */
  start: KafkaState;
  /** Back to `start` now (kafka-reset.ts); stop() does it too. */
  reset(): Promise<ResetResult>;
}

function attach(facts: SharedKafkaFacts, stopCluster?: () => Promise<void>): SharedKafka {
  const passwords = new Map(Object.entries(facts.passwords));
  const security = (p: KafkaPrincipal) => clientSecurityOf({ caFile: facts.caFile, passwords }, p);
  // This file's own copies of the password files clientEnv() hands out, made on first use.
  let dir: string | undefined;
  const target = {
    bootstrap: facts.bootstrap,
    admin: security("admin"),
    passwords: facts.passwords,
    start: facts.start,
  };
  return {
    bootstrap: facts.bootstrap,
    clusterId: facts.clusterId,
    brokers: facts.brokers,
    start: facts.start,
    clientSecurity: security,
    clientEnv: (p: KafkaPrincipal) => {
      dir ??= makeTempDir("kafka-client");
      return clientEnvOf({ dir, caFile: facts.caFile, passwords }, p);
    },
    reset: () => resetKafka(target),
    stop: async () => {
      try {
        if (!stopCluster) await resetKafka(target);
      } finally {
        if (dir) removeTempDir(dir);
        await stopCluster?.();
      }
    },
  };
}

/**
 * The shared cluster, reset (a file before may have failed before its own reset), or —
 * without the globalSetup — a cluster of this file's own with the same settings, which
 * stop() stops.
 */
export async function sharedKafka(): Promise<SharedKafka> {
  const facts = inject(SHARED_KAFKA_KEY);
  if (!facts) {
    const own = await startSharedKafka();
    return attach(own.facts, () => own.cluster.stop());
  }
  const kafka = attach(facts);
  await kafka.reset();
  return kafka;
}
