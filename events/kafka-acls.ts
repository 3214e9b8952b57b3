// The Kafka principals and their ACLs, derived from the event catalog: one principal per
// component (it may write a topic only if it emits a type there, read one only if it
// consumes a type there, and every component writes the dead letters), a read-only
// `audit` principal (fastfence trace, the lab's event log), `knative-eventing` (the Kafka
// Broker's data plane, the bridge KafkaSource that copies the catalog topics into the
// Broker for the stages and extensions off the critical path, and the dead-letter
// KafkaSink; with a broker topic only), and the
// `admin` super user of
// the harness and the lab (topics, ACLs; never given to a component). The Strimzi
// KafkaUsers in knative/base/kafka and the harness/lab brokers both follow this table
// (tests check the manifests against it). Pure data: no I/O, never a secret.
import { CATALOG, TOPICS, type Component } from "./catalog.ts";

export type KafkaPrincipal = Component | "audit" | "knative-eventing" | "admin";

/**
 * Principals with ACLs, in a stable order (admin is a super user and has none;
 * knative-eventing only exists with a broker topic).
 */
export const ACL_PRINCIPALS: readonly Exclude<KafkaPrincipal, "admin" | "knative-eventing">[] = [
  "event-source",
  "detect",
  "confirm",
  "fence",
  "remediate-workloads",
  "recover",
  "audit",
];

/** Operation names as Strimzi's KafkaUser spells them (Kafka's AclOperation). */
export type AclOperation = "Read" | "Write" | "Describe";

export interface KafkaAclEntry {
  resourceType: "topic" | "group";
  name: string;
  patternType: "literal" | "prefix";
  operation: AclOperation;
}

/** The SCRAM user name of a principal (the KafkaUser's metadata.name). */
export function kafkaUserName(p: KafkaPrincipal): string {
  return `fastfence-${p}`;
}

/**
 * Consumer-group id prefix of a principal. Group ids are `fastfence-<function>` (shared
 * mode) or `fastfence-<function>-<replica>` (infra/runtime/kafka-runtime.ts); the audit
 * reader's one-shot groups are `fastfence-reader-<pid>-<ms>` (infra/bus/kafkajs-bus.ts
 * readAll). No component name is a prefix of another's, so prefixes never overlap.
 */
export function groupPrefix(p: KafkaPrincipal): string | undefined {
  if (p === "audit") return READER_GROUP_PREFIX;
  if (p === "knative-eventing") return KNATIVE_GROUP_PREFIX;
  if (p === "admin" || p === "event-source") return undefined;
  return `fastfence-${p}`;
}

/** Prefix of readAll's one-shot consumer groups. */
export const READER_GROUP_PREFIX = "fastfence-reader-";
/**
 * Prefix of Knative's consumer groups: the Kafka Broker's (one per Trigger; Knative's default
 * template `knative-trigger-<namespace>-<name>`) and the bridge KafkaSource's
 * (`knative-fastfence-bridge`, knative/base/eventing/bridge.yaml).
 */
export const KNATIVE_GROUP_PREFIX = "knative-";

/**
 * The catalog topics the bridge KafkaSource copies into the Broker's topic, so that Triggers
 * (recover, extensions) see every event the critical stages and the event source produce,
 * while those consume the catalog topics directly. The dead letters stay out (a Trigger
 * answering one would dead-letter it again).
 */
export const BRIDGED_TOPICS: readonly string[] = Object.values(TOPICS).filter((t) => t !== TOPICS.deadLetter);

export interface AclOptions {
  /**
   * The Knative Broker's topic (FASTFENCE_KAFKA_TOPIC, knative/base/runtime-config.yaml).
   * Every event type travels on it (the bridge copies the catalog topics there), so a
   * component that runs on the Broker may read it, and write it when it emits. Topic ACLs
   * cannot tell types apart there.
   */
  brokerTopic?: string;
  /**
   * The components that run on the Broker (HTTP deliveries through Triggers): only these get
   * the broker topic's ACLs. The others consume and produce the catalog topics directly
   * (the critical stages and the event source, docs/deploy-knative.md "Event wiring").
   */
  brokerComponents?: readonly Component[];
}

const order = (a: KafkaAclEntry, b: KafkaAclEntry): number =>
  `${a.resourceType}/${a.name}/${a.patternType}/${a.operation}`.localeCompare(
    `${b.resourceType}/${b.name}/${b.patternType}/${b.operation}`,
  );

/** The ACLs of one principal, sorted and without duplicates ([] for admin). */
export function aclsFor(p: KafkaPrincipal, opts: AclOptions = {}): KafkaAclEntry[] {
  if (p === "admin") return [];
  const out = new Map<string, KafkaAclEntry>();
  const add = (e: KafkaAclEntry): void => void out.set(`${e.resourceType}/${e.name}/${e.operation}`, e);
  const topic = (name: string, ops: AclOperation[]): void => {
    for (const operation of ops) add({ resourceType: "topic", name, patternType: "literal", operation });
  };
  const entries = Object.values(CATALOG);
  if (p === "knative-eventing") {
    // The Broker's receiver writes the broker topic, its dispatcher reads it (Triggers),
    // the bridge reads the catalog topics, the KafkaSink writes the dead letters.
    if (opts.brokerTopic) topic(opts.brokerTopic, ["Read", "Write", "Describe"]);
    for (const t of BRIDGED_TOPICS) topic(t, ["Read", "Describe"]);
    topic(TOPICS.deadLetter, ["Write", "Describe"]);
  } else if (p === "audit") {
    for (const t of Object.values(TOPICS)) topic(t, ["Read", "Describe"]);
    if (opts.brokerTopic) topic(opts.brokerTopic, ["Read", "Describe"]);
  } else {
    let emits = false;
    let consumes = false;
    for (const e of entries) {
      if ((e.emittedBy as readonly Component[]).includes(p)) {
        topic(e.topic, ["Write", "Describe"]);
        emits = true;
      }
      if ((e.consumedBy as readonly Component[]).includes(p)) {
        topic(e.topic, ["Read", "Describe"]);
        consumes = true;
      }
    }
    topic(TOPICS.deadLetter, ["Write", "Describe"]);
    if (opts.brokerTopic && opts.brokerComponents?.includes(p)) {
      if (emits) topic(opts.brokerTopic, ["Write", "Describe"]);
      if (consumes) topic(opts.brokerTopic, ["Read", "Describe"]);
    }
  }
  const group = groupPrefix(p);
  if (group) add({ resourceType: "group", name: group, patternType: "prefix", operation: "Read" });
  return [...out.values()].sort(order);
}

/** Every principal's ACLs (admin excluded; knative-eventing with a broker topic only). */
export function aclTable(opts: AclOptions = {}): Map<KafkaPrincipal, KafkaAclEntry[]> {
  const list: KafkaPrincipal[] = [
    ...ACL_PRINCIPALS,
    ...(opts.brokerTopic ? ["knative-eventing" as const] : []),
  ];
  return new Map(list.map((p) => [p, aclsFor(p, opts)]));
}

/** Sorts a list of ACL entries the way aclsFor does (for comparisons). */
export function sortAcls(list: readonly KafkaAclEntry[]): KafkaAclEntry[] {
  return [...list].sort(order);
}
