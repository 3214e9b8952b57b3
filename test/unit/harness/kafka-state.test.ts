// How two readings of a Kafka cluster differ (harness/env/kafka-state.ts), what the
// shared cluster's reset checks against its start state: plain data in, one line per
// difference out.
import { AclOperations, AclPermissionTypes, ResourcePatternTypes, ResourceTypes } from "@platformatic/kafka";
import { describe, expect, it } from "vitest";
import { CLUSTER_DEFAULT, stateDifferences, type KafkaState } from "../../../harness/env/kafka-state.ts";

const acl = {
  resourceType: ResourceTypes.GROUP,
  resourceName: "fastfence-detect",
  resourcePatternType: ResourcePatternTypes.LITERAL,
  principal: "User:fastfence-detect",
  host: "*",
  operation: AclOperations.READ,
  permissionType: AclPermissionTypes.ALLOW,
};

const start = (): KafkaState => ({
  topics: { __consumer_offsets: { partitions: 6, internal: true, configs: { "cleanup.policy": "compact" } } },
  groups: [],
  acls: [acl],
  scram: { "fastfence-admin": { "SCRAM-SHA-512": 4096 } },
  brokerConfigs: { "1": {}, [CLUSTER_DEFAULT]: {} },
  quotas: [],
});

describe("stateDifferences", () => {
  it("finds none between equal readings", () => {
    expect(stateDifferences(start(), start())).toEqual([]);
  });

  it("names each thing a file made or changed", () => {
    const now = start();
    now.topics["t.a"] = { partitions: 3, internal: false, configs: {} };
    now.groups = ["g-a"];
    now.acls = [acl, { ...acl, resourceName: "g-b" }];
    now.scram["fastfence-intruder"] = { "SCRAM-SHA-512": 4096 };
    now.brokerConfigs["1"] = { "log.cleaner.backoff.ms": "20000" };
    now.brokerConfigs[CLUSTER_DEFAULT] = { "message.max.bytes": "2000000" };
    now.topics.__consumer_offsets!.configs["retention.ms"] = "1000";
    now.quotas = [
      { entity: [{ entityType: "user", entityName: null }], values: { producer_byte_rate: 1024 } },
    ];
    const d = stateDifferences(start(), now);
    expect(d).toHaveLength(8);
    expect(d).toContain("topic t.a (not there at start)");
    expect(d).toContain("consumer group g-a");
    expect(d).toContain('topic __consumer_offsets config retention.ms: "1000" (at start: unset)');
    expect(d).toContain('broker 1 config log.cleaner.backoff.ms: "20000" (at start: unset)');
    expect(d).toContain('cluster-wide broker config message.max.bytes: "2000000" (at start: unset)');
    expect(d).toContain('client quota user=<default>: {"producer_byte_rate":1024} (at start: unset)');
    expect(d.filter((l) => l.startsWith("ACL ") && l.includes('"g-b"'))).toHaveLength(1);
    expect(d.filter((l) => l.startsWith("SCRAM user fastfence-intruder"))).toHaveLength(1);
  });

  it("names what is gone, and ignores internal topics the broker made since", () => {
    const now = start();
    now.acls = [];
    now.scram = {};
    now.topics.__transaction_state = { partitions: 50, internal: true, configs: {} };
    now.topics.__consumer_offsets!.partitions = 7;
    const d = stateDifferences(start(), now);
    expect(d).toHaveLength(3);
    expect(d).toContain("topic __consumer_offsets has 7 partitions (at start: 6)");
    expect(d.filter((l) => l.endsWith(" is gone"))).toHaveLength(1);
    expect(d).toContain('SCRAM user fastfence-admin: unset (at start: {"SCRAM-SHA-512":4096})');
  });
});
