// What the integration run's Kafka globalSetup (kafka-global-setup.ts) hands every test
// process about the shared single-broker cluster — its bootstrap, broker ports and log
// files, the CA and the principals' passwords, and the state right after start that
// every reset returns to — as a vitest provided value, typed through vitest's
// ProvidedContext; and the start options of that cluster. Declarations only: it must
// never start, read or write anything.
import type { ManifestKafkaUser } from "./kafka-auth.ts";
import type { KafkaState } from "./kafka-state.ts";
import type { KafkaOptions } from "./kafka.ts";

/**
 * How the shared cluster starts: the pipeline cluster's Kafka (one broker, group sessions
 * down to 1 s), so the pipeline files can share it as well as the bus and runtime files.
 */
export const SHARED_KAFKA_OPTIONS: KafkaOptions = {
  brokers: 1,
  properties: { "group.min.session.timeout.ms": 1000 },
};

/** One broker of the shared cluster: where it listens and logs, never its process. */
export interface SharedBrokerFacts {
  id: number;
  port: number;
  controllerPort: number;
  dataDir: string;
  logPath: string;
}

/** The shared cluster's connection facts (plain data: vitest serialises it). */
export interface SharedKafkaFacts {
  /** "127.0.0.1:port" */
  bootstrap: string;
  clusterId: string;
  brokers: SharedBrokerFacts[];
  /** The CA's certificate file (owned by the globalSetup process: read it, never write there). */
  caFile: string;
  /** KafkaUser name -> password: the manifests' users and fastfence-admin. */
  passwords: Record<string, string>;
  users: ManifestKafkaUser[];
  /** The cluster right after start (kafka-state.ts): what reset() returns it to. */
  start: KafkaState;
}

/** The key of the provided value. */
export const SHARED_KAFKA_KEY = "fastfenceSharedKafka";

declare module "vitest" {
  export interface ProvidedContext {
    fastfenceSharedKafka: SharedKafkaFacts;
  }
}
