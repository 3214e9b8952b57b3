// Needs real Kafka: TLS, SCRAM and ACLs as the broker's authorizer applies them.
// The brokers every test and the lab run refuse what the manifests do not allow (real
// Kafka, TLS + SCRAM-SHA-512, StandardAuthorizer, the KafkaUsers' ACLs): a client without
// credentials or with a wrong password is not let in; the event source cannot write
// suspicions, detect cannot read fence requests nor join another function's group, the
// audit user cannot write, no component can create topics; and the allowed paths work.
// Asserts kafkajs's error types and classes (what the sender sees), never message text.
import kafkajs, { Kafka, logLevel } from "kafkajs";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { TOPICS } from "../../events/catalog.ts";
import { decodeKafka, encodeKafka } from "../../events/codec.ts";
import { envelope } from "../../events/envelope.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import type { BusRecord } from "../../infra/bus/bus.ts";
import type { KafkaSecurity } from "../../infra/bus/kafka-security.ts";
import { pipelineTopics } from "../../app/host.ts";
import { sharedKafka } from "../../harness/env/shared-kafka.ts";
import { withEnv } from "../../harness/env/with-env.ts";

// CommonJS: Node detects only some of kafkajs's named exports.
const {
  AclOperationTypes,
  AclPermissionTypes,
  AclResourceTypes,
  KafkaJSConnectionError,
  KafkaJSGroupCoordinatorNotFound,
  KafkaJSSASLAuthenticationError,
  ResourcePatternTypes,
} = kafkajs;

const env = withEnv(async (scope) => {
  const kafka = scope.add(await sharedKafka());
  const admin = createKafkaBus({
    brokers: kafka.bootstrap,
    clientId: "acl-admin",
    security: kafka.clientSecurity("admin"),
  });
  await admin.ensureTopics(pipelineTopics(1));
  await admin.close();
  return { kafka };
});

/** Every error in a cause / aggregate chain. */
function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  const walk = (e: unknown, depth: number): void => {
    if (!e || typeof e !== "object" || depth > 8) return;
    out.push(e);
    walk((e as { cause?: unknown }).cause, depth + 1);
    for (const x of (e as { errors?: unknown[] }).errors ?? []) walk(x, depth + 1);
  };
  walk(err, 0);
  return out;
}
/** The kafkajs protocol error types (e.g. TOPIC_AUTHORIZATION_FAILED) in an error's chain. */
const kafkaTypes = (err: unknown): string[] =>
  chain(err)
    .map((e) => (e as { type?: unknown }).type)
    .filter((t): t is string => typeof t === "string");

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected a refusal");
}

function client(bootstrap: string, security: KafkaSecurity, id: string): Kafka {
  return new Kafka({
    clientId: id,
    brokers: bootstrap.split(","),
    logLevel: logLevel.NOTHING,
    connectionTimeout: 2000,
    requestTimeout: 3000,
    retry: { retries: 1, initialRetryTime: 100 },
    ...security,
  });
}

async function listTopics(k: Kafka): Promise<string[]> {
  const admin = k.admin();
  try {
    await admin.connect();
    return await admin.listTopics();
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

const observation = (n: number) =>
  encodeKafka(
    envelope(
      {
        type: "io.fastfence.node.observed.v1",
        subject: "node-a",
        data: { target: "node-a", n },
      },
      "/fastfence/event-source/test",
      Date.now(),
    ),
  );

/** Waits until `got` holds the observation numbered `n`, or throws `what`. */
async function receivedObservation(got: readonly BusRecord[], n: number, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!got.some((r) => (decodeKafka(r).data as { n?: number }).n === n)) {
    if (Date.now() > deadline) throw new Error(what);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("Kafka authentication (TLS + SCRAM-SHA-512)", () => {
  it("a client with valid credentials connects", async () => {
    const { kafka } = env();
    expect(await listTopics(client(kafka.bootstrap, kafka.clientSecurity("audit"), "ok"))).toContain(
      TOPICS.fenceRequests,
    );
  });

  it("a client with a wrong password is refused with an authentication error", async () => {
    const { kafka } = env();
    const good = kafka.clientSecurity("fence");
    const err = await rejection(
      listTopics(
        client(kafka.bootstrap, { ...good, sasl: { ...good.sasl!, password: "not-the-password" } }, "bad-pw"),
      ),
    );
    expect(chain(err).some((e) => e instanceof KafkaJSSASLAuthenticationError)).toBe(true);
  });

  it("an unknown user is refused with an authentication error", async () => {
    const { kafka } = env();
    const good = kafka.clientSecurity("fence");
    const err = await rejection(
      listTopics(
        client(kafka.bootstrap, { ...good, sasl: { ...good.sasl!, username: "mallory" } }, "nobody"),
      ),
    );
    expect(chain(err).some((e) => e instanceof KafkaJSSASLAuthenticationError)).toBe(true);
  });

  it("a client without credentials (TLS only, or plaintext) is not let in", async () => {
    const { kafka } = env();
    const tlsOnly = await rejection(
      listTopics(client(kafka.bootstrap, { ssl: kafka.clientSecurity("audit").ssl! }, "anon")),
    );
    expect(chain(tlsOnly).some((e) => e instanceof KafkaJSConnectionError)).toBe(true);
    const plain = await rejection(listTopics(client(kafka.bootstrap, {}, "plain")));
    expect(chain(plain).some((e) => e instanceof KafkaJSConnectionError)).toBe(true);
  });
});

describe("Kafka authorization (the KafkaUsers' ACLs)", () => {
  it("the event source may not write suspicions (TOPIC_AUTHORIZATION_FAILED), but writes observations", async () => {
    const { kafka } = env();
    const bus = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-source",
      security: kafka.clientSecurity("event-source"),
    });
    try {
      const err = await rejection(bus.publish(TOPICS.suspicions, [observation(1)]));
      expect(kafkaTypes(err)).toContain("TOPIC_AUTHORIZATION_FAILED");
      await bus.publish(TOPICS.observations, [observation(2)]);
    } finally {
      await bus.close();
    }
  });

  it("detect may not read fence requests (TOPIC_AUTHORIZATION_FAILED), but reads observations in its own group", async () => {
    const { kafka } = env();
    const detect = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-detect",
      security: kafka.clientSecurity("detect"),
    });
    const source = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-source-2",
      security: kafka.clientSecurity("event-source"),
    });
    try {
      const err = await rejection(
        detect.subscribe({
          groupId: "fastfence-detect-acl-test",
          topics: [TOPICS.fenceRequests],
          fromBeginning: true,
          onRecord: async () => undefined,
        }),
      );
      expect(kafkaTypes(err)).toContain("TOPIC_AUTHORIZATION_FAILED");

      const got: BusRecord[] = [];
      const sub = await detect.subscribe({
        groupId: "fastfence-detect-acl-test",
        topics: [TOPICS.observations],
        fromBeginning: true,
        onRecord: async (r) => void got.push(r),
      });
      await sub.ready;
      await source.publish(TOPICS.observations, [observation(3)]);
      await receivedObservation(got, 3, "detect never received the observation");
      await sub.close();
    } finally {
      await Promise.all([detect.close(), source.close()]);
    }
  });

  it("detect may not join another function's consumer group (the broker denies it; the consumer finds no coordinator)", async () => {
    const { kafka } = env();
    const group = `fastfence-fence-impostor-${Date.now()}`;
    const consumer = client(kafka.bootstrap, kafka.clientSecurity("detect"), "acl-group").consumer({
      groupId: group,
      retry: { retries: 0 },
    });
    const crashed = new Promise<unknown>((resolve) =>
      consumer.on(consumer.events.CRASH, (e) => resolve((e.payload as { error: unknown }).error)),
    );
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [TOPICS.observations], fromBeginning: true });
      await consumer.run({ eachMessage: async () => undefined });
      const err = await Promise.race([
        crashed,
        new Promise((_, reject) => setTimeout(() => reject(new Error("no crash within 15 s")), 15_000)),
      ]);
      // kafkajs swallows FindCoordinator's GROUP_AUTHORIZATION_FAILED and reports that no
      // coordinator was found; the broker's authorizer log names the refusal.
      expect(chain(err).some((e) => e instanceof KafkaJSGroupCoordinatorNotFound)).toBe(true);
      const denied = readFileSync(kafka.brokers[0]!.logPath, "utf8")
        .split("\n")
        .filter((l) => l.includes("User:fastfence-detect") && l.includes("Denied") && l.includes(group));
      expect(denied.length).toBeGreaterThan(0);
    } finally {
      await consumer.disconnect().catch(() => undefined);
    }
  });

  it("a subscription whose first group join crashes (group not yet allowed) is rebuilt and joins once the ACL exists", async () => {
    // The lab once hung here: an ACL still on its way to one broker made the first join
    // crash, and the subscription never rebuilt the consumer, so it never became ready.
    const { kafka } = env();
    const group = `fastfence-late-acl-${Date.now()}`;
    const detect = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-late",
      security: kafka.clientSecurity("detect"),
    });
    const source = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-late-source",
      security: kafka.clientSecurity("event-source"),
    });
    const admin = client(kafka.bootstrap, kafka.clientSecurity("admin"), "acl-late-admin").admin();
    const groupAcl = {
      resourceType: AclResourceTypes.GROUP,
      resourceName: group,
      resourcePatternType: ResourcePatternTypes.LITERAL,
      principal: "User:fastfence-detect",
      host: "*",
      operation: AclOperationTypes.READ,
      permissionType: AclPermissionTypes.ALLOW,
    };
    try {
      await admin.connect();
      const got: BusRecord[] = [];
      const sub = await detect.subscribe({
        groupId: group,
        topics: [TOPICS.observations],
        fromBeginning: true,
        onRecord: async (r) => void got.push(r),
      });
      let ready = false;
      void sub.ready.then(() => (ready = true));
      // The broker denies the group: the first join fails (kafkajs gives up after its retries).
      await new Promise((r) => setTimeout(r, 4000));
      expect(ready).toBe(false);
      await admin.createAcls({ acl: [groupAcl] });
      await Promise.race([
        sub.ready,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error("never joined after the ACL was added")), 30_000),
        ),
      ]);
      await source.publish(TOPICS.observations, [observation(7)]);
      await receivedObservation(got, 7, "the rebuilt consumer never received the observation");
      await sub.close();
    } finally {
      await admin.deleteAcls({ filters: [groupAcl] }).catch(() => undefined);
      await admin.disconnect().catch(() => undefined);
      await Promise.all([detect.close(), source.close()]);
    }
  });

  it("audit reads every pipeline topic but may not write (TOPIC_AUTHORIZATION_FAILED); no component may create topics", async () => {
    const { kafka } = env();
    const audit = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-audit",
      security: kafka.clientSecurity("audit"),
    });
    const confirm = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-confirm",
      security: kafka.clientSecurity("confirm"),
    });
    const source = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "acl-audit-source",
      security: kafka.clientSecurity("event-source"),
    });
    try {
      // an observation of its own to read (the cases run in any order)
      await source.publish(TOPICS.observations, [observation(5)]);
      const recs = await audit.readAll([TOPICS.observations, TOPICS.deadLetter], { timeoutMs: 15_000 });
      expect(recs.some((r) => r.topic === TOPICS.observations)).toBe(true);
      const err = await rejection(audit.publish(TOPICS.observations, [observation(4)]));
      expect(kafkaTypes(err)).toContain("TOPIC_AUTHORIZATION_FAILED");
      const create = await rejection(
        confirm.ensureTopics([{ topic: "fastfence.forged", partitions: 1, replicationFactor: 1 }]),
      );
      expect(kafkaTypes(create).some((t) => t.endsWith("_AUTHORIZATION_FAILED"))).toBe(true);
    } finally {
      await Promise.all([audit.close(), confirm.close(), source.close()]);
    }
  });
});
