// The lab's brokers against the shipped Kafka cluster (issue 16, "the lab runs the shipped
// configuration"): the lab reads knative/kafka-cluster/kafka.yaml, and differs from it only
// in the listed, documented overrides and in machinery that is not a failover setting.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  brokerSettingsMode,
  BrokerSettingsError,
  LAB_BROKER_OVERRIDES,
  labBrokerSettings,
  labTopicReplicas,
  readShippedKafka,
  strimziAllows,
  type BrokerValue,
} from "../../../lab/broker-settings.ts";
import { pipelineTopics } from "../../../app/host.ts";
import { brokerProperties, LAB_BROKER_MACHINERY } from "../../../lab/kafka.ts";
import { ROOT } from "../../../lab/state.ts";

const shipped = readShippedKafka();
/** Security is the manifest's listeners and `authorization: simple` (harness/env/kafka-auth.ts). */
const AUTH = { "sasl.enabled.mechanisms": "SCRAM-SHA-512", "allow.everyone.if.no.acl.found": "false" };
const propsOf = (mode: "lab" | "shipped", n = 3) =>
  brokerProperties(
    { id: 1, ip: "10.77.0.11", dir: "/tmp/b1" },
    { n, voters: "1@10.77.0.11:9093", authProps: AUTH, settings: labBrokerSettings(mode, shipped) },
  );
const differences = (props: Record<string, BrokerValue>) =>
  Object.keys({ ...props, ...shipped.config }).filter(
    (k) => k in shipped.config && props[k] !== shipped.config[k],
  );

describe("the lab's brokers and the shipped Kafka cluster", () => {
  it("reads the failover settings from the shipped manifest", () => {
    expect(shipped.config["min.insync.replicas"]).toBe(2);
    expect(Object.keys(shipped.config).length).toBeGreaterThan(10);
  });

  it("runs the same Kafka version as the shipped cluster", () => {
    const pom = readFileSync(join(ROOT, "tools/kafka/pom.xml"), "utf8");
    expect(pom).toContain(`<kafka.version>${shipped.version}</kafka.version>`);
  });

  it("with FASTFENCE_LAB_BROKERS=shipped, runs every shipped setting unchanged", () => {
    expect(differences(propsOf("shipped"))).toEqual([]);
  });

  it("by default, differs from the shipped settings only in the listed overrides", () => {
    const props = propsOf("lab");
    expect(differences(props).sort()).toEqual(
      Object.keys(LAB_BROKER_OVERRIDES)
        .filter((k) => k in shipped.config)
        .sort(),
    );
    for (const [k, o] of Object.entries(LAB_BROKER_OVERRIDES)) expect(props[k], k).toBe(o.value);
  });

  it("lists only overrides that change something, each with its reason and the shipped value", () => {
    for (const [k, o] of Object.entries(LAB_BROKER_OVERRIDES)) {
      expect(shipped.config[k], `${k} overrides a different value`).not.toBe(o.value);
      expect(o.why.length, k).toBeGreaterThan(20);
      expect(o.shipped, k).toMatch(/^\d+ \(/);
    }
  });

  it("sets no failover setting of its own outside the manifest and the overrides", () => {
    // Every key the lab writes is Strimzi-managed (listeners, ids, TLS), machinery, shipped or
    // overridden: a key any Strimzi user could set must not hide in the lab alone.
    const props = propsOf("shipped");
    const unaccounted = Object.keys(props).filter(
      (k) =>
        strimziAllows(k) &&
        !(k in AUTH) &&
        !(k in LAB_BROKER_MACHINERY) &&
        !(k in shipped.config) &&
        !k.startsWith("share."),
    );
    expect(unaccounted).toEqual([]);
  });

  it("keeps machinery apart from the failover settings", () => {
    for (const k of Object.keys(LAB_BROKER_MACHINERY)) {
      expect(k in shipped.config, `${k} is shipped`).toBe(false);
      expect(k in LAB_BROKER_OVERRIDES, `${k} is an override`).toBe(false);
    }
  });

  it("ships only settings Strimzi passes to the brokers", () => {
    expect(Object.keys(shipped.config).filter((k) => !strimziAllows(k))).toEqual([]);
    // Strimzi 0.48 and later pass these three (its FORBIDDEN_PREFIX_EXCEPTIONS).
    expect(strimziAllows("broker.session.timeout.ms")).toBe(true);
    expect(strimziAllows("controller.socket.timeout.ms")).toBe(true);
    expect(strimziAllows("broker.id")).toBe(false);
    expect(strimziAllows("broker.rack")).toBe(false);
    expect(strimziAllows("controller.quorum.fetch.timeout.ms")).toBe(true);
    expect(strimziAllows("controller.listener.names")).toBe(false);
  });

  it("documents every override in docs/lab.md", () => {
    const doc = readFileSync(join(ROOT, "docs/lab.md"), "utf8");
    for (const k of Object.keys(LAB_BROKER_OVERRIDES)) expect(doc, k).toContain(`\`${k}\``);
  });

  it("fits a lab of fewer than three brokers to its size", () => {
    const props = propsOf("shipped", 1);
    expect(props["default.replication.factor"]).toBe(1);
    expect(props["min.insync.replicas"]).toBe(1);
  });

  it("refuses an unknown FASTFENCE_LAB_BROKERS, naming it", () => {
    expect(brokerSettingsMode({})).toBe("lab");
    expect(brokerSettingsMode({ FASTFENCE_LAB_BROKERS: "shipped" })).toBe("shipped");
    expect(() => brokerSettingsMode({ FASTFENCE_LAB_BROKERS: "strimzi" })).toThrow(BrokerSettingsError);
    expect(() => brokerSettingsMode({ FASTFENCE_LAB_BROKERS: "strimzi" })).toThrow(
      /FASTFENCE_LAB_BROKERS.*"strimzi"/,
    );
  });
});

describe("the lab's pipeline topics", () => {
  const layout = (brokers: number, replicas?: number) =>
    pipelineTopics(brokers, 3, replicas).map((t) => [t.replicationFactor, t.config?.["min.insync.replicas"]]);

  it("ships three replicas and min.insync.replicas 2, as knative/base/kafka/topics.yaml", () => {
    const yaml = readFileSync(join(ROOT, "knative/base/kafka/topics.yaml"), "utf8");
    const shippedReplicas = [...yaml.matchAll(/^ {2}replicas: (\d+)$/gm)].map((m) => m[1]);
    expect(shippedReplicas.length).toBeGreaterThan(0);
    expect(new Set(shippedReplicas)).toEqual(new Set(["3"]));
    expect(new Set(layout(3).map(String))).toEqual(new Set(["3,2"]));
  });

  it("with FASTFENCE_LAB_TOPIC_REPLICAS=2 on three brokers: two replicas, both needed for a write", () => {
    expect(labTopicReplicas(3, { FASTFENCE_LAB_TOPIC_REPLICAS: "2" })).toBe(2);
    expect(new Set(layout(3, 2).map(String))).toEqual(new Set(["2,2"]));
  });

  it("fits a smaller lab: one write acknowledgement is enough with fewer than three brokers", () => {
    expect(new Set(layout(2).map(String))).toEqual(new Set(["2,1"]));
    expect(new Set(layout(1).map(String))).toEqual(new Set(["1,1"]));
  });

  it("refuses a FASTFENCE_LAB_TOPIC_REPLICAS the lab cannot hold, naming it", () => {
    expect(labTopicReplicas(3, {})).toBeUndefined();
    for (const bad of ["0", "4", "two", "2.5"])
      expect(() => labTopicReplicas(3, { FASTFENCE_LAB_TOPIC_REPLICAS: bad })).toThrow(
        /FASTFENCE_LAB_TOPIC_REPLICAS must be a whole number from 1 to 3.*not "/,
      );
    expect(() => labTopicReplicas(2, { FASTFENCE_LAB_TOPIC_REPLICAS: "3" })).toThrow(/from 1 to 2/);
  });
});
