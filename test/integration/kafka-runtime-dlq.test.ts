// Needs real Kafka: records dead-lettered off a real partition, each client as its principal.
// S5 on a real Kafka broker: a function hosted as a Kafka consumer sends every record it
// cannot use — bytes that are not a CloudEvent, an event whose data fails its schema —
// to fastfence.dead-letter with the reason, the issues and the original bytes, and keeps
// running. (The handler never sees them, so no API server is needed here.) On both Kafka
// clients of the bus (kafkajs and @platformatic/kafka), as their own ACL principals.
import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { testedKafkaClients } from "../../harness/env/kafka-clients.ts";
import { TOPICS } from "../../events/catalog.ts";
import { encodeKafka } from "../../events/codec.ts";
import { envelope } from "../../events/envelope.ts";
import { DeadLetterSchema } from "../../events/schemas.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { createLogger } from "../../infra/log.ts";
import { hostFunction, pipelineTopics } from "../../app/host.ts";
import { sharedKafka } from "../../harness/env/shared-kafka.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { waitFor } from "./pipeline-helpers.ts";

describe.each(testedKafkaClients())("%s bus: Kafka runtime dead-lettering", (client) => {
  const env = withEnv(async (scope) => {
    const kafka = scope.add(await sharedKafka());
    // the test's own reader/writer is the admin; detect runs as its own principal, so its
    // dead letters also prove its ACLs (knative/base/kafka/users.yaml) allow them
    const bus = createKafkaBus(
      { brokers: kafka.bootstrap, clientId: "dlq-test", security: kafka.clientSecurity("admin") },
      client,
    );
    scope.add({ stop: () => bus.close() });
    await bus.ensureTopics(pipelineTopics(1));
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "none", server: "https://127.0.0.1:1", skipTLSVerify: true }],
      users: [{ name: "none" }],
      contexts: [{ name: "none", cluster: "none", user: "none" }],
      currentContext: "none",
    });
    const fn = scope.add(
      await hostFunction({
        name: "detect",
        mode: { kafka: true },
        config: loadRuntimeConfig({ FASTFENCE_REPLICA: "detect-dlq" }),
        kubeConfig: kc,
        bus: createKafkaBus(
          { brokers: kafka.bootstrap, clientId: "detect-dlq", security: kafka.clientSecurity("detect") },
          client,
        ),
        log: createLogger("detect", { level: "silent" }),
      }),
    );
    await fn.ready;
    return { bus };
  });

  it("dead-letters malformed records with the reason and the original bytes, and keeps consuming", async () => {
    const { bus } = env();
    const garbage = Buffer.from([0xde, 0xad, 0xbe, 0xef]);
    const bad = envelope(
      {
        type: "io.fastfence.node.observed.v1",
        subject: "node-a",
        data: { target: "node-a", result: "maybe" },
      },
      "/fastfence/event-source/s1",
      Date.now(),
    );
    await bus.publish(TOPICS.observations, [{ key: "x", value: garbage, headers: {} }, encodeKafka(bad)]);
    const dead = await waitFor(
      "two dead letters",
      async () => {
        const recs = await bus.readAll([TOPICS.deadLetter], { timeoutMs: 5000 });
        return recs.length >= 2 ? recs : undefined;
      },
      30_000,
      500,
    );
    const bodies = dead.map((r) => DeadLetterSchema.parse(JSON.parse(r.value!.toString())));
    const g = bodies.find((b) => b.key === "x")!;
    expect(Buffer.from(g.originalBase64, "base64")).toEqual(garbage);
    expect(g).toMatchObject({
      code: "FF_INVALID_EVENT",
      consumer: "detect/detect-dlq",
      topic: TOPICS.observations,
    });
    expect(g.issues?.join()).toMatch(/ce_id/);
    const b = bodies.find((x) => x.key === "node-a")!;
    expect(b.issues?.join("\n")).toMatch(/data\.result/);
    expect(b.issues?.join("\n")).toMatch(/data\.observer/);
    expect(b.originalHeaders.ce_id).toBe(bad.id);
  });
});
