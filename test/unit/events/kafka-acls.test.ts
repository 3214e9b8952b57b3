// The Kafka ACL table derived from the event catalog (events/kafka-acls.ts): each
// component writes only the topics it emits on and reads only those it consumes from,
// every component writes the dead letters, audit only reads, and consumer-group prefixes
// match the group ids the runtimes form and never overlap.
import { describe, expect, it } from "vitest";
import { CATALOG, TOPICS, type Component } from "../../../events/catalog.ts";
import {
  ACL_PRINCIPALS,
  BRIDGED_TOPICS,
  READER_GROUP_PREFIX,
  aclTable,
  aclsFor,
  groupPrefix,
  kafkaUserName,
  type KafkaAclEntry,
} from "../../../events/kafka-acls.ts";

const COMPONENTS: Component[] = [
  "event-source",
  "detect",
  "confirm",
  "fence",
  "remediate-workloads",
  "recover",
];

const topics = (acls: KafkaAclEntry[], op: KafkaAclEntry["operation"]) =>
  acls
    .filter((a) => a.resourceType === "topic" && a.operation === op)
    .map((a) => a.name)
    .sort();

describe("Kafka ACLs from the catalog", () => {
  it("event-source writes observations and dead letters only, reads nothing, joins no group", () => {
    const acls = aclsFor("event-source");
    expect(topics(acls, "Write")).toEqual([TOPICS.deadLetter, TOPICS.observations].sort());
    expect(topics(acls, "Read")).toEqual([]);
    expect(acls.filter((a) => a.resourceType === "group")).toEqual([]);
  });

  it("detect reads observations and writes suspicions; it can neither read fence requests nor write them", () => {
    const acls = aclsFor("detect");
    expect(topics(acls, "Read")).toEqual([TOPICS.observations]);
    expect(topics(acls, "Write")).toEqual([TOPICS.deadLetter, TOPICS.suspicions].sort());
    expect(topics(acls, "Read")).not.toContain(TOPICS.fenceRequests);
    expect(topics(acls, "Write")).not.toContain(TOPICS.fenceRequests);
  });

  it("only confirm writes fence requests, only fence reads them", () => {
    const writers = COMPONENTS.filter((c) => topics(aclsFor(c), "Write").includes(TOPICS.fenceRequests));
    const readers = COMPONENTS.filter((c) => topics(aclsFor(c), "Read").includes(TOPICS.fenceRequests));
    expect(writers).toEqual(["confirm"]);
    expect(readers).toEqual(["fence"]);
  });

  it("a component writes a topic iff it emits a type there (or it is the dead-letter topic), reads one iff it consumes a type there", () => {
    const entries = Object.values(CATALOG);
    for (const c of COMPONENTS) {
      const acls = aclsFor(c);
      const emits = new Set(
        entries.filter((e) => (e.emittedBy as readonly string[]).includes(c)).map((e) => e.topic),
      );
      const consumes = new Set(
        entries.filter((e) => (e.consumedBy as readonly string[]).includes(c)).map((e) => e.topic),
      );
      expect(topics(acls, "Write"), c).toEqual([...new Set([...emits, TOPICS.deadLetter])].sort());
      expect(topics(acls, "Read"), c).toEqual([...consumes].sort());
      // Describe exactly where it reads or writes (metadata for the topics it uses).
      expect(topics(acls, "Describe"), c).toEqual(
        [...new Set([...emits, ...consumes, TOPICS.deadLetter])].sort(),
      );
      expect(acls.every((a) => a.patternType === (a.resourceType === "group" ? "prefix" : "literal"))).toBe(
        true,
      );
    }
  });

  it("audit reads every topic and writes none", () => {
    const acls = aclsFor("audit");
    expect(topics(acls, "Read")).toEqual(Object.values(TOPICS).sort());
    expect(topics(acls, "Write")).toEqual([]);
    expect(acls.filter((a) => a.resourceType === "group")).toEqual([
      { resourceType: "group", name: READER_GROUP_PREFIX, patternType: "prefix", operation: "Read" },
    ]);
  });

  it("admin has no ACLs (it is a super user); knative-eventing exists only with a broker topic", () => {
    expect(aclsFor("admin")).toEqual([]);
    expect([...aclTable().keys()]).toEqual([...ACL_PRINCIPALS]);
    const withBroker = aclTable({ brokerTopic: "fastfence.events" });
    expect(topics(withBroker.get("knative-eventing")!, "Write")).toEqual(
      [TOPICS.deadLetter, "fastfence.events"].sort(),
    );
    // The Broker's dispatcher reads its topic; the bridge KafkaSource reads every catalog topic
    // but the dead letters.
    expect(topics(withBroker.get("knative-eventing")!, "Read")).toEqual(
      ["fastfence.events", ...BRIDGED_TOPICS].sort(),
    );
    expect(BRIDGED_TOPICS).not.toContain(TOPICS.deadLetter);
    expect([...BRIDGED_TOPICS, TOPICS.deadLetter].sort()).toEqual(Object.values(TOPICS).sort());
  });

  it("with a broker topic, only the components that run on the Broker may use it", () => {
    const t = aclTable({ brokerTopic: "fastfence.events", brokerComponents: ["recover"] });
    expect(topics(t.get("recover")!, "Read")).toContain("fastfence.events");
    expect(topics(t.get("recover")!, "Write")).toContain("fastfence.events");
    for (const c of ["event-source", "detect", "confirm", "fence", "remediate-workloads"] as const) {
      expect(topics(t.get(c)!, "Read"), c).not.toContain("fastfence.events");
      expect(topics(t.get(c)!, "Write"), c).not.toContain("fastfence.events");
      expect(t.get(c), c).toEqual(aclsFor(c)); // exactly its catalog ACLs
    }
    expect(topics(t.get("audit")!, "Read")).toContain("fastfence.events");
  });

  it("group prefixes match the runtime's group ids (shared and per-replica) and never overlap", () => {
    const functions = COMPONENTS.filter((c) => c !== "event-source");
    for (const f of functions) {
      const prefix = groupPrefix(f)!;
      // infra/runtime/kafka-runtime.ts: fastfence-<fn> (shared) or fastfence-<fn>-<replica>
      expect(`fastfence-${f}`.startsWith(prefix)).toBe(true);
      expect(`fastfence-${f}-${f}-node-a`.startsWith(prefix)).toBe(true);
      for (const other of functions)
        if (other !== f) {
          expect(`fastfence-${other}`.startsWith(prefix), `${f} vs ${other}`).toBe(false);
          expect(`fastfence-${other}-x`.startsWith(prefix), `${f} vs ${other}`).toBe(false);
        }
      expect(READER_GROUP_PREFIX.startsWith(prefix)).toBe(false);
    }
    expect(new Set(ACL_PRINCIPALS.map(kafkaUserName)).size).toBe(ACL_PRINCIPALS.length);
  });
});
