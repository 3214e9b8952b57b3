// Topic resolution of the Kafka runtime (`fastfence run <fn> --kafka`): by default every
// function consumes its catalog topics and publishes to the catalog's; with
// FASTFENCE_KAFKA_TOPIC (catalogViewFor) it consumes from and publishes to that one topic,
// and dead letters keep their own topic. Its stop does not wait past stopLeaveWaitMs for a
// consumer that cannot leave its group (a frozen coordinator). An in-memory bus stands in
// for Kafka: no servers.
import { describe, expect, test } from "vitest";
import { ManualClock } from "../../../core/clock.ts";
import { BROKER_TOPIC, CATALOG, EVENT_TYPES, TOPICS } from "../../../events/catalog.ts";
import { encodeKafka } from "../../../events/codec.ts";
import { KEEPALIVE_HEADER, keepaliveRecord } from "../../../events/keepalive.ts";
import type { StageInfo } from "../../../functions/contract.ts";
import { STAGES } from "../../../functions/registry.ts";
import type { EventHandler } from "../../../infra/runtime/contract.ts";
import type { Bus, BusRecord, SubscribeOptions } from "../../../infra/bus/bus.ts";
import { loadRuntimeConfig } from "../../../infra/config.ts";
import { createLogger } from "../../../infra/log.ts";
import { createFunctionMetrics } from "../../../infra/metrics.ts";
import { catalogViewFor } from "../../../app/host.ts";
import { TROUBLE_WINDOW_MS } from "../../../infra/runtime/keepalive.ts";
import {
  consumedTopics,
  startKafkaRuntime,
  STOP_LEAVE_WAIT_MS,
} from "../../../infra/runtime/kafka-runtime.ts";
import { T0, observed } from "../../scenarios/fixtures.ts";

const SINGLE = BROKER_TOPIC;

describe("consumedTopics", () => {
  test.each(STAGES.map((f) => [f.name, f] as const))(
    "%s: the catalog's topics by default, the single topic when set",
    (_n, def) => {
      const own = [...new Set(def.subscriptions.map((s) => s.topic))];
      expect(consumedTopics(def, catalogViewFor(undefined)).sort()).toEqual(own.sort());
      expect(consumedTopics(def, catalogViewFor(SINGLE))).toEqual([SINGLE]);
    },
  );

  test("from the environment, as hostFunction resolves it (an empty value is unset)", () => {
    const detect = STAGES.find((f) => f.name === "detect")!;
    const topicsFor = (env: Record<string, string>) =>
      consumedTopics(detect, catalogViewFor(loadRuntimeConfig(env).FASTFENCE_KAFKA_TOPIC));
    expect(topicsFor({ FASTFENCE_KAFKA_TOPIC: SINGLE })).toEqual([SINGLE]);
    expect(topicsFor({ FASTFENCE_KAFKA_TOPIC: "" })).toEqual([TOPICS.observations]);
    expect(topicsFor({})).toEqual([TOPICS.observations]);
  });

  test("publishing follows the same view; dead letters keep their topic", () => {
    for (const type of Object.values(EVENT_TYPES)) {
      expect(catalogViewFor(undefined).topicOf(type)).toBe(CATALOG[type].topic);
      expect(catalogViewFor(SINGLE).topicOf(type)).toBe(SINGLE);
    }
    expect(catalogViewFor(SINGLE).deadLetterTopic).toBe(TOPICS.deadLetter);
    expect(catalogViewFor(undefined).deadLetterTopic).toBe(TOPICS.deadLetter);
  });
});

/** A Bus that records subscriptions and publishes; `deliver` hands a record to the consumer. */
class MemoryBus implements Bus {
  /** What the subscription's close() returns (a frozen coordinator: never settles). */
  leave: () => Promise<void> = async () => undefined;
  subscribed: string[] = [];
  published: { topic: string; types: string[] }[] = [];
  /** The topics preparePublishing was asked for, per call; `prepareFails` makes it reject. */
  prepared: string[][] = [];
  prepareFails = false;
  async preparePublishing(topics: readonly string[]): Promise<void> {
    this.prepared.push([...topics]);
    if (this.prepareFails) throw new Error("no broker answers");
  }
  /** Topics of publishToEveryPartition calls (keepalives), in order. */
  everyPartition: { topic: string; headers: Record<string, string> }[] = [];
  private onRecord?: SubscribeOptions["onRecord"];
  async publish(topic: string, records: readonly { headers: Record<string, string> }[]): Promise<void> {
    this.published.push({ topic, types: records.map((r) => r.headers.ce_type ?? "") });
  }
  async publishToEveryPartition(topic: string, record: { headers: Record<string, string> }): Promise<number> {
    this.everyPartition.push({ topic, headers: record.headers });
    return 3;
  }
  private readonly trouble = new Set<() => void>();
  get troubleListeners(): number {
    return this.trouble.size;
  }
  onBrokerTrouble(listener: () => void): () => void {
    this.trouble.add(listener);
    return () => void this.trouble.delete(listener);
  }
  reportTrouble(): void {
    for (const l of this.trouble) l();
  }
  async subscribe(opts: SubscribeOptions) {
    this.subscribed.push(...opts.topics);
    this.onRecord = opts.onRecord;
    return { ready: Promise.resolve(), close: () => this.leave() };
  }
  async readAll(): Promise<BusRecord[]> {
    return [];
  }
  async ensureTopics(): Promise<void> {}
  async close(): Promise<void> {}
  deliver(rec: BusRecord): Promise<void> {
    return this.onRecord!(rec);
  }
}

/** A function consuming node.observed and emitting node.suspected, without adapters. */
const relay: StageInfo = {
  name: "relay",
  description: "test double",
  subscriptions: [{ topic: TOPICS.observations, types: [EVENT_TYPES.nodeObserved] }],
  emits: [EVENT_TYPES.nodeSuspected],
  critical: false,
};
const relayHandler: EventHandler = async () => ({
  outcome: { kind: "processed" },
  emit: [{ type: EVENT_TYPES.nodeSuspected, subject: "a", data: {} }],
});

/** The relay on `bus`, its clock `clock`, consuming and publishing through `topic`'s catalog view. */
const startRelay = (bus: MemoryBus, clock: ManualClock, topic?: string, keepaliveMs = 0) =>
  startKafkaRuntime({
    def: relay,
    handler: relayHandler,
    bus,
    catalog: catalogViewFor(topic),
    clock,
    log: createLogger("relay", { level: "silent" }),
    metrics: createFunctionMetrics({ defaultMetrics: false }),
    config: { groupMode: "each-replica", replica: "relay-0", keepaliveMs },
  });

async function run(topic: string | undefined, bus = new MemoryBus()) {
  const rt = await startRelay(bus, new ManualClock(T0 + 1000), topic);
  const ev = observed("b", "a", 3, 1000);
  await bus.deliver({
    ...encodeKafka(ev),
    topic: bus.subscribed[0]!,
    partition: 0,
    offset: "0",
    timestamp: 0,
  });
  await rt.stop();
  return bus;
}

describe("Kafka runtime with and without FASTFENCE_KAFKA_TOPIC", () => {
  test("unset: consumes the subscription's catalog topic, publishes to the catalog topic", async () => {
    const bus = await run(undefined);
    expect(bus.subscribed).toEqual([TOPICS.observations]);
    expect(bus.published).toEqual([{ topic: TOPICS.suspicions, types: [EVENT_TYPES.nodeSuspected] }]);
  });

  test("set: consumes from and publishes to the single topic", async () => {
    const bus = await run(SINGLE);
    expect(bus.subscribed).toEqual([SINGLE]);
    expect(bus.published).toEqual([{ topic: SINGLE, types: [EVENT_TYPES.nodeSuspected] }]);
  });
});

describe("Kafka runtime start: publishing prepared before the first event", () => {
  test("the topics of the types it emits and the dead-letter topic, once, before the start returns", async () => {
    const bus = new MemoryBus();
    const rt = await startRelay(bus, new ManualClock(T0 + 1000));
    expect(bus.prepared).toEqual([[TOPICS.suspicions, TOPICS.deadLetter]]);
    await rt.stop();
    expect(bus.prepared).toHaveLength(1);
  });

  test("with FASTFENCE_KAFKA_TOPIC: that topic and the dead-letter topic", async () => {
    const bus = await run(SINGLE);
    expect(bus.prepared).toEqual([[SINGLE, TOPICS.deadLetter]]);
  });

  test("a failed preparation does not stop the start: the first event is still published", async () => {
    const failing = new MemoryBus();
    failing.prepareFails = true;
    const bus = await run(undefined, failing);
    expect(bus.prepared).toHaveLength(1);
    expect(bus.published).toEqual([{ topic: TOPICS.suspicions, types: [EVENT_TYPES.nodeSuspected] }]);
  });
});

describe("Kafka runtime stop", () => {
  const start = (bus: MemoryBus, clock: ManualClock) => startRelay(bus, clock);

  test("a consumer that cannot leave its group: stop returns after the wait, not never", async () => {
    const bus = new MemoryBus();
    bus.leave = () => new Promise<void>(() => undefined); // the coordinator never answers
    const clock = new ManualClock(T0);
    const rt = await start(bus, clock);
    let stopped = false;
    const stopping = rt.stop().then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    clock.advance(STOP_LEAVE_WAIT_MS - 1);
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    clock.advance(1);
    await stopping;
    expect(stopped).toBe(true);
  });

  test("a consumer that leaves: stop returns at once", async () => {
    const bus = new MemoryBus();
    const rt = await start(bus, new ManualClock(T0));
    await rt.stop(); // the manual clock never moves: only the leave can end it
  });
});

describe("ISR keepalives (events/keepalive.ts)", () => {
  const tick = () => new Promise((r) => setImmediate(r));
  /** The relay with a 1 s keepalive, on a fresh bus and a manual clock at T0. */
  const startWithKeepalive = async () => {
    const bus = new MemoryBus();
    const clock = new ManualClock(T0);
    return { bus, clock, rt: await startRelay(bus, clock, undefined, 1000) };
  };

  test("a keepalive record is skipped unread: no handler, no event, no dead letter", async () => {
    const bus = new MemoryBus();
    const rt = await startRelay(bus, new ManualClock(T0));
    await bus.deliver({
      ...keepaliveRecord("/fastfence/detect/detect-0"),
      topic: TOPICS.observations,
      partition: 1,
      offset: "7",
      timestamp: 0,
    });
    await rt.stop();
    expect(bus.published).toEqual([]);
  });

  test("with keepaliveMs, nothing while no broker is in trouble", async () => {
    const { bus, clock, rt } = await startWithKeepalive();
    clock.advance(60_000);
    await tick();
    await rt.stop();
    expect(bus.everyPartition).toEqual([]);
  });

  test("after a broker-trouble report: every interval one keepalive per output topic, until the window after the last report ends", async () => {
    const { bus, clock, rt } = await startWithKeepalive();
    await tick();
    bus.reportTrouble();
    await tick();
    expect(bus.everyPartition).toEqual([
      { topic: TOPICS.suspicions, headers: { [KEEPALIVE_HEADER]: "/fastfence/relay/relay-0" } },
    ]);
    for (let i = 0; i < 10; i++) {
      clock.advance(1000);
      await tick();
    }
    expect(bus.everyPartition).toHaveLength(11);
    bus.reportTrouble(); // still in trouble at +10 s: the window starts again
    for (let i = 0; i < 25; i++) {
      clock.advance(1000);
      await tick();
    }
    // +10 s .. +30 s: a round every second, then none (the window is TROUBLE_WINDOW_MS)
    expect(bus.everyPartition).toHaveLength(11 + TROUBLE_WINDOW_MS / 1000);
    bus.reportTrouble(); // a new report wakes it up again
    await tick();
    expect(bus.everyPartition).toHaveLength(12 + TROUBLE_WINDOW_MS / 1000);
    await rt.stop();
    clock.advance(5000);
    await tick();
    expect(bus.everyPartition).toHaveLength(12 + TROUBLE_WINDOW_MS / 1000);
    expect(bus.troubleListeners).toBe(0); // the stop unsubscribed it
  });

  test("off by default: no keepalive at all", async () => {
    const bus = new MemoryBus();
    const clock = new ManualClock(T0);
    const rt = await startRelay(bus, clock);
    clock.advance(10_000);
    await tick();
    await rt.stop();
    expect(bus.everyPartition).toEqual([]);
  });
});
