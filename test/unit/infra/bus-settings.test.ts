// The bus's shared settings: the defaults both Kafka clients run with, and the partition
// count cache their hedged publishers share.
import { describe, expect, it } from "vitest";
import { busSettings, kafkaClientFrom } from "../../../infra/bus/kafka-config.ts";
import { TopicLayouts } from "../../../infra/bus/hedge.ts";
import { InvalidInputError } from "../../../core/errors.ts";

describe("busSettings", () => {
  it("applies the documented defaults", () => {
    expect(busSettings({ brokers: "b:9092", clientId: "c", security: {} })).toEqual({
      brokers: "b:9092",
      clientId: "c",
      sessionTimeoutMs: 6000,
      heartbeatIntervalMs: 2000,
      requestTimeoutMs: 1000,
      connectionTimeoutMs: 1000,
      metadataMaxAgeMs: 1000,
      hedgeAfterMs: 300,
      acks: "all",
    });
  });

  it("keeps every given value, and derives the heartbeat from the session (at least 100 ms)", () => {
    const s = busSettings({
      brokers: "b",
      clientId: "c",
      security: {},
      sessionTimeoutMs: 240,
      requestTimeoutMs: 5,
      connectionTimeoutMs: 6,
      metadataMaxAgeMs: 7,
      hedgeAfterMs: 0,
      acks: "leader",
    });
    expect(s).toMatchObject({
      sessionTimeoutMs: 240,
      heartbeatIntervalMs: 100,
      requestTimeoutMs: 5,
      connectionTimeoutMs: 6,
      metadataMaxAgeMs: 7,
      hedgeAfterMs: 0,
      acks: "leader",
    });
    expect(
      busSettings({ brokers: "b", clientId: "c", security: {}, heartbeatIntervalMs: 9 }).heartbeatIntervalMs,
    ).toBe(9);
  });

  it("refuses an unknown client by name", () => {
    expect(kafkaClientFrom(undefined)).toBe("kafkajs");
    expect(kafkaClientFrom("platformatic")).toBe("platformatic");
    expect(() => kafkaClientFrom("librdkafka")).toThrow(InvalidInputError);
    expect(() => kafkaClientFrom("librdkafka")).toThrow(/librdkafka/);
  });
});

describe("TopicLayouts", () => {
  it("reads a topic once and caches it", async () => {
    const asked: string[] = [];
    const c = new TopicLayouts((t: string) => {
      asked.push(t);
      return Promise.resolve({ partitions: 3 });
    });
    expect((await Promise.all([c.of("a"), c.of("a"), c.of("b")])).map((l) => l.partitions)).toEqual([
      3, 3, 3,
    ]);
    expect(asked).toEqual(["a", "b"]);
  });

  it("counts a failed read as 1 (no hedging) and reads again next time", async () => {
    let calls = 0;
    const c = new TopicLayouts(() =>
      ++calls === 1 ? Promise.reject(new Error("down")) : Promise.resolve({ partitions: 6 }),
    );
    expect((await c.of("a")).partitions).toBe(1);
    expect((await c.of("a")).partitions).toBe(6);
    expect((await c.of("a")).partitions).toBe(6);
    expect(calls).toBe(2);
  });

  it("prepare reads every topic not known yet, so a publish after it reads nothing", async () => {
    const asked: string[] = [];
    const c = new TopicLayouts((t: string) => {
      asked.push(t);
      return Promise.resolve({ partitions: 3 });
    });
    await c.of("a");
    await c.prepare(["a", "b", "c"]);
    expect(asked).toEqual(["a", "b", "c"]);
    expect((await c.of("c")).partitions).toBe(3);
    expect(asked).toHaveLength(3);
  });

  it("prepare rejects naming the topic it could not read, which is read again later", async () => {
    let calls = 0;
    const c = new TopicLayouts(() =>
      ++calls === 1 ? Promise.reject(new Error("down")) : Promise.resolve({ partitions: 6 }),
    );
    await expect(c.prepare(["a"])).rejects.toThrow(/partitions of a/);
    expect((await c.of("a")).partitions).toBe(6);
  });

  it("never counts fewer than one partition", async () => {
    expect((await new TopicLayouts(() => Promise.resolve({ partitions: 0 })).of("a")).partitions).toBe(1);
  });
});
