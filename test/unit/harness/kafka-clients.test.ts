// Which Kafka clients the bus contract tests run on: plain settings in, clients out.
import { describe, expect, it } from "vitest";
import { otherKafkaClients, testedKafkaClients } from "../../../harness/env/kafka-clients.ts";
import { KAFKA_CLIENTS } from "../../../infra/bus/kafka-bus.ts";

describe("testedKafkaClients", () => {
  it("is the default client alone when nothing is set (make test)", () => {
    expect(testedKafkaClients({})).toEqual(["kafkajs"]);
    expect(testedKafkaClients({ FASTFENCE_TEST_KAFKA_CLIENTS: "" })).toEqual(["kafkajs"]);
  });
  it("takes all, or a list", () => {
    expect(testedKafkaClients({ FASTFENCE_TEST_KAFKA_CLIENTS: "all" })).toEqual([...KAFKA_CLIENTS]);
    expect(testedKafkaClients({ FASTFENCE_TEST_KAFKA_CLIENTS: "platformatic" })).toEqual(["platformatic"]);
  });
  it("refuses an unknown client, naming it", () => {
    expect(() => testedKafkaClients({ FASTFENCE_TEST_KAFKA_CLIENTS: "rdkafka" })).toThrow(/rdkafka/);
  });
  it("make test and make test-kafka-clients together run every client once", () => {
    expect([...testedKafkaClients({}), ...otherKafkaClients()].sort()).toEqual([...KAFKA_CLIENTS].sort());
  });
});
