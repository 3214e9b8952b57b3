// Needs real Kafka (1 and 3 brokers): the harness's brokers stopped, killed and restarted.
// The Kafka part of the real-server test environment: a real KRaft broker that answers,
// stops, and comes back on the same port with the same data.
import { describe, expect, it } from "vitest";
import { Kafka, logLevel } from "kafkajs";
import { brokerIds, isListening, startKafka, type KafkaCluster } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";

describe("test env: Kafka broker lifecycle", () => {
  const env = withEnv(async (scope) => {
    const t0 = Date.now();
    const kafka = scope.add(await startKafka({ brokers: 1 }));
    console.log(`1 kafka broker ready in ${Date.now() - t0} ms (${JSON.stringify(kafka.timings)})`);
    return { kafka };
  });

  // The brokers take TLS + SCRAM clients only: the harness's admin user.
  const admin = (kafka: KafkaCluster) =>
    new Kafka({
      clientId: "env-test",
      brokers: kafka.bootstrap.split(","),
      ...kafka.clientSecurity("admin"),
      logLevel: logLevel.NOTHING,
      retry: { retries: 2 },
    }).admin();

  it("answers, stops, and answers again on the same port with its data", async () => {
    const { kafka } = env();
    const broker = kafka.brokers[0];
    if (!broker) throw new Error("no broker");
    const a1 = admin(kafka);
    await a1.connect();
    try {
      expect(
        await a1.createTopics({
          topics: [{ topic: "env-lifecycle", numPartitions: 3 }],
          waitForLeaders: true,
        }),
      ).toBe(true);
      expect(await a1.listTopics()).toContain("env-lifecycle");
    } finally {
      await a1.disconnect();
    }
    expect(await brokerIds(kafka.bootstrap, kafka.clientSecurity("admin"), 5000)).toEqual([broker.id]);

    await broker.stop();
    expect(broker.running).toBe(false);
    expect(isListening(broker.port)).toBe(false);
    await expect(brokerIds(kafka.bootstrap, kafka.clientSecurity("admin"), 1000)).rejects.toThrow();

    const t0 = Date.now();
    await broker.start();
    console.log(`broker restart ready in ${Date.now() - t0} ms`);
    expect(isListening(broker.port)).toBe(true);
    const a2 = admin(kafka);
    await a2.connect();
    try {
      expect(await a2.listTopics()).toContain("env-lifecycle");
      const meta = await a2.fetchTopicMetadata({ topics: ["env-lifecycle"] });
      expect(meta.topics[0]?.partitions).toHaveLength(3);
    } finally {
      await a2.disconnect();
    }
  });

  it("survives a SIGKILL of the broker (restart on the same data)", async () => {
    const { kafka } = env();
    const broker = kafka.brokers[0];
    if (!broker) throw new Error("no broker");
    // data of its own to survive the kill (the cases run in any order)
    const a0 = admin(kafka);
    await a0.connect();
    try {
      expect(
        await a0.createTopics({ topics: [{ topic: "env-sigkill", numPartitions: 1 }], waitForLeaders: true }),
      ).toBe(true);
    } finally {
      await a0.disconnect();
    }
    await broker.kill();
    expect(isListening(broker.port)).toBe(false);
    await broker.start();
    const a = admin(kafka);
    await a.connect();
    try {
      expect(await a.listTopics()).toContain("env-sigkill");
    } finally {
      await a.disconnect();
    }
  });
});

describe("test env: 3-broker KRaft cluster", () => {
  const env = withEnv(async (scope) => {
    const t0 = Date.now();
    const kafka = scope.add(await startKafka({ brokers: 3 }));
    console.log(`3 kafka brokers ready in ${Date.now() - t0} ms (${JSON.stringify(kafka.timings)})`);
    return { kafka };
  });

  // A metadata answer's broker ids; [] while no listed broker answers (kafkajs may still
  // try the dead one until the controller has fenced it).
  const ids = (bootstrap: string): Promise<number[]> =>
    brokerIds(bootstrap, env().kafka.clientSecurity("admin"), 8000).catch(() => []);

  it("drops a killed broker from the metadata within a few seconds and takes it back on restart", async () => {
    const { kafka } = env();
    expect(await ids(kafka.bootstrap)).toEqual([1, 2, 3]);
    const victim = kafka.brokers[1];
    if (!victim) throw new Error("no broker 2");
    const others = kafka.brokers
      .filter((b) => b !== victim)
      .map((b) => `127.0.0.1:${b.port}`)
      .join(",");
    await victim.kill();
    const t0 = Date.now();
    // broker.session.timeout.ms=2000: the controller fences the dead broker after ~2 s.
    for (;;) {
      if ((await ids(others)).join() === "1,3") break;
      if (Date.now() - t0 > 15_000) throw new Error("killed broker still listed after 15 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    const fencedMs = Date.now() - t0;
    console.log(`killed broker fenced (gone from metadata) after ${fencedMs} ms`);
    expect(fencedMs).toBeLessThan(8000); // 9 s session timeout + detection by default
    await victim.start();
    const t1 = Date.now();
    for (;;) {
      if ((await ids(kafka.bootstrap)).join() === "1,2,3") break;
      if (Date.now() - t1 > 30_000) throw new Error("restarted broker not back after 30 s");
      await new Promise((r) => setTimeout(r, 100));
    }
  });
});
