// The lab brokers' failover behaviour, taken from what we ship: the `spec.kafka.config` of
// the Kafka resource in knative/kafka-cluster/kafka.yaml, read from the manifest (not kept
// by hand beside it), plus the lab-only overrides below, each with its reason (listed in
// docs/lab.md "Broker settings"). FASTFENCE_LAB_BROKERS=shipped runs the lab without them,
// so `make bench` measures both. Reads one file; never writes, never talks to a broker.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadAll } from "js-yaml";
import { ROOT } from "./state.ts";

export type BrokerValue = string | number | boolean;

/** Which broker settings the lab runs: the shipped ones, or those plus the lab overrides. */
export type BrokerSettingsMode = "lab" | "shipped";

export const SHIPPED_KAFKA_MANIFEST = join(ROOT, "knative/kafka-cluster/kafka.yaml");

/** What the shipped Kafka resource says, as far as the lab's brokers are concerned. */
export interface ShippedKafka {
  version: string;
  /** `spec.kafka.config`: the broker settings Strimzi passes through. */
  config: Record<string, BrokerValue>;
}

/** A lab-only broker setting: its value in the lab, what the shipped cluster runs, and why. */
export interface LabOverride {
  value: BrokerValue;
  /** The shipped cluster's value and where it comes from (Kafka's default, the manifest). */
  shipped: string;
  why: string;
}

/**
 * The settings the lab runs that the shipped cluster does not, with the reason. A unit test
 * fails when the lab's brokers differ from the manifest in a key not listed here, and when
 * docs/lab.md does not name every key listed here.
 */
export const LAB_BROKER_OVERRIDES: Readonly<Record<string, LabOverride>> = {
  "controller.quorum.fetch.timeout.ms": {
    value: 600,
    shipped: "750 (the manifest)",
    why:
      "a dead active KRaft controller is noticed after three missed no-op records 200 ms " +
      "apart instead of 250 ms apart; the shipped value leaves more room for a real " +
      "cluster's GC pauses and network",
  },
  "metadata.max.idle.interval.ms": {
    value: 200,
    shipped: "250 (the manifest)",
    why: "the no-op records the fetch timeout counts in (600 ms = three of them)",
  },
  "group.min.session.timeout.ms": {
    value: 500,
    shipped: "3000 (the manifest)",
    why: "lets the integration tests and lab tools run short consumer sessions; fastfence's replicas use 3000",
  },
  "group.consumer.min.session.timeout.ms": {
    value: 500,
    shipped: "3000 (the manifest)",
    why: "as group.min.session.timeout.ms, for the new consumer protocol",
  },
  "group.consumer.min.heartbeat.interval.ms": {
    value: 100,
    shipped: "1000 (the manifest)",
    why: "as group.min.session.timeout.ms: short sessions need short heartbeats",
  },
};

/**
 * Kafka's broker config keys that Strimzi manages itself: `spec.kafka.config` keys with these
 * prefixes are ignored (with a warning in the operator's log, nowhere else), except the
 * listed ones. The CRD only says "certain prefixes"; these are Strimzi 1.2.0's
 * FORBIDDEN_PREFIXES and FORBIDDEN_PREFIX_EXCEPTIONS (KafkaClusterSpec.java). Since 0.48
 * the exceptions include broker.session.timeout.ms, broker.heartbeat.interval.ms and
 * controller.socket.timeout.ms.
 */
const STRIMZI_FORBIDDEN_PREFIXES = (
  "listeners, advertised., broker., listener., host.name, port, inter.broker.listener.name, sasl., " +
  "ssl., security., password., log.dir, zookeeper.connect, zookeeper.set.acl, zookeeper.ssl, " +
  "zookeeper.clientCnxnSocket, authorizer., super.user, cruise.control.metrics.topic, " +
  "cruise.control.metrics.reporter.bootstrap.servers, node.id, process.roles, controller., " +
  "metadata.log.dir, zookeeper.metadata.migration.enable, client.quota.callback.static.kafka.admin., " +
  "client.quota.callback.static.produce, client.quota.callback.static.fetch, " +
  "client.quota.callback.static.storage.per.volume.limit.min.available., " +
  "client.quota.callback.static.excluded.principal.name.list, prometheus.metrics.reporter., cordoned.log.dirs"
).split(", ");
/** The keys with a forbidden prefix that Strimzi passes through all the same. */
const STRIMZI_ALLOWED_EXCEPTIONS = (
  "zookeeper.connection.timeout.ms, sasl.server.max.receive.size, ssl.cipher.suites, ssl.protocol, " +
  "ssl.enabled.protocols, ssl.secure.random.implementation, cruise.control.metrics.topic.num.partitions, " +
  "cruise.control.metrics.topic.replication.factor, cruise.control.metrics.topic.retention.ms, " +
  "cruise.control.metrics.topic.auto.create.retries, cruise.control.metrics.topic.auto.create.timeout.ms, " +
  "cruise.control.metrics.topic.min.insync.replicas, broker.session.timeout.ms, " +
  "broker.heartbeat.interval.ms, controller.socket.timeout.ms, controller.quorum.election.backoff.max.ms, " +
  "controller.quorum.election.timeout.ms, controller.quorum.fetch.timeout.ms"
).split(", ");

/** Whether Strimzi would pass `key` from `spec.kafka.config` to the brokers. */
export function strimziAllows(key: string): boolean {
  if (STRIMZI_ALLOWED_EXCEPTIONS.includes(key)) return true;
  return !STRIMZI_FORBIDDEN_PREFIXES.some((p) => key.startsWith(p));
}

/** Thrown when the shipped manifest or FASTFENCE_LAB_BROKERS cannot be used; names what. */
export class BrokerSettingsError extends Error {
  override name = "BrokerSettingsError";
}

/** Reads the Kafka resource of the shipped Kafka cluster manifest. */
export function readShippedKafka(path = SHIPPED_KAFKA_MANIFEST): ShippedKafka {
  const docs = loadAll(readFileSync(path, "utf8"));
  const kafka = docs.find(
    (d): d is { spec?: { kafka?: { version?: unknown; config?: unknown } } } =>
      typeof d === "object" && d !== null && (d as { kind?: unknown }).kind === "Kafka",
  );
  const spec = kafka?.spec?.kafka;
  if (!spec) throw new BrokerSettingsError(`${path}: no Kafka resource with spec.kafka`);
  if (typeof spec.version !== "string")
    throw new BrokerSettingsError(`${path}: spec.kafka.version is missing or not a string`);
  const config: Record<string, BrokerValue> = {};
  for (const [k, v] of Object.entries((spec.config ?? {}) as Record<string, unknown>)) {
    if (typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean")
      throw new BrokerSettingsError(`${path}: spec.kafka.config.${k} is not a string, number or boolean`);
    config[k] = v;
  }
  return { version: spec.version, config };
}

/** FASTFENCE_LAB_BROKERS: "lab" (default) or "shipped"; anything else is an error naming it. */
export function brokerSettingsMode(env: NodeJS.ProcessEnv = process.env): BrokerSettingsMode {
  const v = env.FASTFENCE_LAB_BROKERS ?? "lab";
  if (v === "lab" || v === "shipped") return v;
  throw new BrokerSettingsError(`FASTFENCE_LAB_BROKERS must be "lab" or "shipped", not ${JSON.stringify(v)}`);
}

/**
 * The failover settings the lab's brokers run: the shipped config, then in mode "lab" the
 * overrides. Structural settings (listeners, ids, storage, threads) are lab/kafka.ts's.
 */
export function labBrokerSettings(
  mode: BrokerSettingsMode,
  shipped: ShippedKafka = readShippedKafka(),
): Record<string, BrokerValue> {
  if (mode === "shipped") return { ...shipped.config };
  const overrides = Object.fromEntries(Object.entries(LAB_BROKER_OVERRIDES).map(([k, o]) => [k, o.value]));
  return { ...shipped.config, ...overrides };
}

/** One line for reports: which broker settings ran, and the lab-only ones if any. */
export function describeBrokerSettings(mode: BrokerSettingsMode): string {
  if (mode === "shipped") return "shipped (knative/kafka-cluster/kafka.yaml, no lab overrides)";
  const list = Object.entries(LAB_BROKER_OVERRIDES)
    .map(([k, o]) => `${k}=${String(o.value)}`)
    .join(", ");
  return `lab (knative/kafka-cluster/kafka.yaml plus ${list})`;
}

/**
 * FASTFENCE_LAB_TOPIC_REPLICAS: the replicas of each pipeline topic's partitions in the lab;
 * unset, the shipped three (knative/base/kafka/topics.yaml). 2 is the experiment in
 * docs/lab.md ("A frozen controller, two replicas per partition, and a silent group
 * coordinator"): with three brokers, a node's death or freeze leaves some partitions with no
 * replica on it. Anything but 1 to min(3, `brokers`) is an error naming it.
 */
export function labTopicReplicas(brokers: number, env: NodeJS.ProcessEnv = process.env): number | undefined {
  const v = env.FASTFENCE_LAB_TOPIC_REPLICAS;
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (Number.isInteger(n) && n >= 1 && n <= Math.min(3, brokers)) return n;
  throw new BrokerSettingsError(
    `FASTFENCE_LAB_TOPIC_REPLICAS must be a whole number from 1 to ${Math.min(3, brokers)} (the lab has ${brokers} brokers), not ${JSON.stringify(v)}`,
  );
}
