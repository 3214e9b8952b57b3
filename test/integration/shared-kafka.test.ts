// Needs real Kafka: the run's shared broker, its topics, groups, ACLs and configs reset.
// The run's shared Kafka cluster (harness/env/shared-kafka.ts) and its reset between test
// files: after a file made topics with records, a consumer group with committed offsets,
// an ACL, a SCRAM user, broker configs and a client quota, reset() returns the cluster
// to exactly its start state; the same topic created right after is empty and the same
// group starts with no offsets; a start user whose credentials were deleted logs in
// again. Reset on an untouched cluster changes nothing and is fast; a consumer still
// running makes it fail with a typed error naming its group.
import { Kafka, logLevel, type Admin } from "kafkajs";
import kafkajs from "kafkajs";
import { ConfigResourceTypes, IncrementalAlterConfigOperationTypes } from "@platformatic/kafka";
import { describe, expect, it } from "vitest";
import type { BusRecord } from "../../infra/bus/bus.ts";
import { createKafkaBus, type KafkaBus } from "../../infra/bus/kafka-bus.ts";
import { openKafkaAdmin } from "../../harness/env/kafka-admin.ts";
import { KafkaGroupsBusyError, resetKafka } from "../../harness/env/kafka-reset.ts";
import { CLUSTER_DEFAULT, readKafkaState, stateDifferences } from "../../harness/env/kafka-state.ts";
import { sharedKafka, type SharedKafka } from "../../harness/env/shared-kafka.ts";
import { withEnv } from "../../harness/env/with-env.ts";

// CommonJS: Node detects only some of kafkajs's named exports.
const {
  AclOperationTypes,
  AclPermissionTypes,
  AclResourceTypes,
  KafkaJSSASLAuthenticationError,
  ResourcePatternTypes,
} = kafkajs;

const env = withEnv(async (scope) => ({ kafka: scope.add(await sharedKafka()) }));

const TOPIC = "t.shared-reset";
const OTHER = "t.shared-reset-other";
const GROUP = "g-shared-reset";

const bus = (kafka: SharedKafka, clientId: string): KafkaBus =>
  createKafkaBus({ brokers: kafka.bootstrap, clientId, security: kafka.clientSecurity("admin") });

function kafkajsAdmin(kafka: SharedKafka): Admin {
  return new Kafka({
    clientId: "shared-reset-admin",
    brokers: kafka.bootstrap.split(","),
    logLevel: logLevel.NOTHING,
    ...kafka.clientSecurity("admin"),
  }).admin();
}

const record = (n: number) => ({ key: `k${n}`, value: Buffer.from(`record ${n}`), headers: {} });

/** Subscribes GROUP to TOPIC from the beginning; `got` fills as records arrive (offsets committed). */
async function consume(b: KafkaBus, got: BusRecord[]) {
  const sub = await b.subscribe({
    groupId: GROUP,
    topics: [TOPIC],
    fromBeginning: true,
    onRecord: async (r) => void got.push(r),
  });
  await sub.ready;
  return sub;
}

async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("the shared Kafka cluster's reset", () => {
  it("on an untouched cluster changes nothing, quickly", async () => {
    const { kafka } = env();
    await kafka.reset(); // what a test before may have left
    const r = await kafka.reset();
    console.log(`reset of an untouched cluster: ${r.ms} ms`);
    expect(r.changed).toEqual([]);
    expect(r.ms).toBeLessThan(2000);
  });

  it("returns a used cluster to its start state; the same topic and group then start empty", async () => {
    const { kafka } = env();
    await kafka.reset(); // what a test before may have left
    const b = bus(kafka, "shared-reset");
    const admin = kafkajsAdmin(kafka);
    const raw = openKafkaAdmin(kafka.bootstrap, kafka.clientSecurity("admin"));
    try {
      // What a file does: topics with records, a group with committed offsets, an ACL ...
      await b.ensureTopics([
        { topic: TOPIC, partitions: 3, replicationFactor: 1, config: { "retention.ms": "3600000" } },
        { topic: OTHER, partitions: 1, replicationFactor: 1 },
      ]);
      await b.publish(TOPIC, [record(1), record(2), record(3)]);
      await b.publish(OTHER, [record(4)]);
      const got: BusRecord[] = [];
      const sub = await consume(b, got);
      await until("3 records consumed", () => got.length >= 3);
      await until("the group's offsets committed", async () => {
        const [t] = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] });
        return t!.partitions.reduce((s, p) => s + Math.max(0, Number(p.offset)), 0) === 3;
      });
      await sub.close();
      await admin.connect();
      await admin.createAcls({
        acl: [
          {
            resourceType: AclResourceTypes.TOPIC,
            resourceName: "t.shared-",
            resourcePatternType: ResourcePatternTypes.PREFIXED,
            principal: "User:fastfence-audit",
            host: "*",
            operation: AclOperationTypes.WRITE,
            permissionType: AclPermissionTypes.ALLOW,
          },
        ],
      });
      // ... and what no file does yet, but could: a user, broker configs, a quota.
      await raw.alterScram([], { "fastfence-intruder": "intruder-password" });
      const backoff = (value: string) => [
        { name: "log.cleaner.backoff.ms", configOperation: IncrementalAlterConfigOperationTypes.SET, value },
      ];
      await raw.alterConfigs([
        {
          resourceType: ConfigResourceTypes.BROKER,
          resourceName: String(kafka.brokers[0]!.id),
          configs: backoff("20000"),
        },
        {
          resourceType: ConfigResourceTypes.BROKER,
          resourceName: CLUSTER_DEFAULT,
          configs: backoff("25000"),
        },
      ]);
      await raw.admin.alterClientQuotas({
        entries: [
          {
            entities: [{ entityType: "user", entityName: "fastfence-audit" }],
            ops: [{ key: "producer_byte_rate", value: 1024, remove: false }],
          },
        ],
      });
      // Quotas, like ACLs and configs, reach the broker's view through its metadata log.
      const differences = async () =>
        stateDifferences(kafka.start, await readKafkaState(raw, Object.keys(kafka.start.topics)));
      await until("the quota visible", async () => (await differences()).length === 8);
      const used = await differences();
      console.log(`before the reset:\n  ${used.join("\n  ")}`);
      expect(used).toEqual(
        expect.arrayContaining([
          `topic ${TOPIC} (not there at start)`,
          `topic ${OTHER} (not there at start)`,
          `consumer group ${GROUP}`,
          `broker ${kafka.brokers[0]!.id} config log.cleaner.backoff.ms: "20000" (at start: unset)`,
          `cluster-wide broker config log.cleaner.backoff.ms: "25000" (at start: unset)`,
          `client quota user=fastfence-audit: {"producer_byte_rate":1024} (at start: unset)`,
        ]),
      );
      expect(used.filter((l) => l.startsWith("ACL "))).toHaveLength(1);
      expect(used.filter((l) => l.startsWith("SCRAM user fastfence-intruder:"))).toHaveLength(1);

      const r = await kafka.reset();
      console.log(`reset of a used cluster: ${r.ms} ms`);
      expect(r.changed).toEqual(used);
      const after = await readKafkaState(raw, "all");
      expect(stateDifferences(kafka.start, after)).toEqual([]);
      expect(after).toEqual(kafka.start);

      // The same names at once: an empty topic, a group without offsets.
      await b.ensureTopics([{ topic: TOPIC, partitions: 3, replicationFactor: 1 }]);
      expect(await b.readAll([TOPIC], { timeoutMs: 5000 })).toEqual([]);
      const [offsets] = await admin.fetchOffsets({ groupId: GROUP, topics: [TOPIC] });
      expect(offsets!.partitions.map((p) => p.offset)).toEqual(["-1", "-1", "-1"]);
      const again: BusRecord[] = [];
      const sub2 = await consume(b, again);
      await b.publish(TOPIC, [record(5)]);
      await until("the new record", () => again.length >= 1);
      await new Promise((r) => setTimeout(r, 500));
      expect(again.map((x) => x.key)).toEqual(["k5"]);
      await sub2.close();
    } finally {
      await admin.disconnect().catch(() => undefined);
      await raw.close().catch(() => undefined);
      await b.close();
    }
  });

  it("gives a start user whose credentials a file deleted its password back", async () => {
    const { kafka } = env();
    await kafka.reset(); // what a test before may have left
    const raw = openKafkaAdmin(kafka.bootstrap, kafka.clientSecurity("admin"));
    const audit = () =>
      new Kafka({
        clientId: "shared-reset-audit",
        brokers: kafka.bootstrap.split(","),
        logLevel: logLevel.NOTHING,
        retry: { retries: 0 },
        ...kafka.clientSecurity("audit"),
      }).admin();
    const logsIn = async () => {
      const a = audit();
      try {
        await a.connect();
        await a.listTopics();
        return true;
      } catch (err) {
        if (err instanceof KafkaJSSASLAuthenticationError) return false;
        throw err;
      } finally {
        await a.disconnect().catch(() => undefined);
      }
    };
    try {
      await raw.alterScram([{ user: "fastfence-audit", mechanism: "SCRAM-SHA-512" }], {});
      await until("audit refused", async () => !(await logsIn()));
    } finally {
      await raw.close().catch(() => undefined);
    }
    expect((await kafka.reset()).changed).toEqual([
      'SCRAM user fastfence-audit: unset (at start: {"SCRAM-SHA-512":4096})',
    ]);
    expect(await logsIn()).toBe(true);
  });

  it("fails with a KafkaGroupsBusyError (a KafkaResetError) naming a group whose consumer still runs", async () => {
    const { kafka } = env();
    const b = bus(kafka, "shared-reset-leak");
    try {
      await b.ensureTopics([{ topic: TOPIC, partitions: 1, replicationFactor: 1 }]);
      const sub = await consume(b, []);
      const target = {
        bootstrap: kafka.bootstrap,
        admin: kafka.clientSecurity("admin"),
        passwords: {},
        start: kafka.start,
      };
      const err = await resetKafka(target, 3000).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KafkaGroupsBusyError);
      expect((err as KafkaGroupsBusyError).groups).toEqual([GROUP]);
      await sub.close();
      expect((await kafka.reset()).changed.length).toBeGreaterThan(0);
    } finally {
      await b.close();
    }
  });
});
