// S5 on the @platformatic/kafka bus: records are handed over in partition order, and an
// offset is committed only after its handler resolved (onRecord) or after its batch's
// outcomes and every earlier batch's of that partition were recorded (onBatch), even when a
// later batch settles first; a failing handler commits nothing from itself on and reports
// the failure (the subscription then rebuilds its consumer from the committed offsets).
// A plain EventEmitter stands in for the consumer stream (no broker).
import { EventEmitter } from "node:events";
import type { Message } from "@platformatic/kafka";
import { describe, expect, it } from "vitest";
import type { BusRecord } from "../../../infra/bus/bus.ts";
import { pump, type RecordStream } from "../../../infra/bus/platformatic-subscribe.ts";
import { kafkaClientFrom } from "../../../infra/bus/kafka-config.ts";
import { FastfenceError } from "../../../core/errors.ts";

class FakeStream extends EventEmitter implements RecordStream {
  paused = false;
  pause() {
    this.paused = true;
  }
  resume() {
    this.paused = false;
  }
  isPaused() {
    return this.paused;
  }
}

function message(partition: number, offset: number, committed: string[]): Message {
  return {
    topic: "t",
    partition,
    offset: BigInt(offset),
    timestamp: 0n,
    key: Buffer.from("k"),
    value: Buffer.from("v"),
    headers: new Map(),
    headerEntries: [[Buffer.from("ce_id"), Buffer.from(`id-${offset}`)]],
    leaderEpoch: 0,
    metadata: {},
    commit: () => {
      committed.push(`${partition}/${offset}`);
      return Promise.resolve();
    },
    toJSON: () => ({}) as never,
  } as unknown as Message;
}

const tick = () => new Promise((r) => setTimeout(r, 5));

describe("platformatic bus: pump", () => {
  it("commits a record only after its handler resolved, in order", async () => {
    const stream = new FakeStream();
    const committed: string[] = [];
    const seen: BusRecord[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const p = pump(stream, {
      groupId: "g",
      topics: ["t"],
      onRecord: async (r) => {
        seen.push(r);
        if (r.offset === "0") await gate;
      },
    });
    stream.emit("data", message(0, 0, committed));
    stream.emit("data", message(0, 1, committed));
    await tick();
    expect(seen.map((r) => r.offset)).toEqual(["0"]);
    expect(committed).toEqual([]);
    release();
    await tick();
    expect(seen.map((r) => [r.offset, r.headers["ce_id"]])).toEqual([
      ["0", "id-0"],
      ["1", "id-1"],
    ]);
    expect(committed).toEqual(["0/0", "0/1"]);
    await p.stop();
  });

  it("commits a batch only after it and every earlier batch of its partition settled", async () => {
    const stream = new FakeStream();
    const committed: string[] = [];
    const settles: (() => void)[] = [];
    const p = pump(stream, {
      groupId: "g",
      topics: ["t"],
      onRecord: async () => undefined,
      onBatch: async () => ({ settled: new Promise<void>((r) => settles.push(r)) }),
    });
    stream.emit("data", message(0, 0, committed));
    await tick();
    stream.emit("data", message(0, 1, committed));
    await tick();
    expect(settles).toHaveLength(2);
    settles[1]!(); // the later batch settles first: nothing may be committed yet
    await tick();
    expect(committed).toEqual([]);
    settles[0]!();
    await tick();
    expect(committed).toEqual(["0/0", "0/1"]);
    await p.stop();
  });

  it("a failing handler commits nothing from itself on and reports the failure", async () => {
    const stream = new FakeStream();
    const committed: string[] = [];
    const p = pump(stream, {
      groupId: "g",
      topics: ["t"],
      onRecord: async (r) => {
        if (r.offset === "1") throw new Error("API down");
      },
    });
    for (let i = 0; i < 3; i++) stream.emit("data", message(0, i, committed));
    const err = await p.failed;
    expect((err as Error).message).toBe("API down");
    await p.stop();
    expect(committed).toEqual(["0/0"]);
  });
});

describe("FASTFENCE_KAFKA_CLIENT", () => {
  it("defaults to kafkajs and accepts platformatic", () => {
    expect(kafkaClientFrom(undefined)).toBe("kafkajs");
    expect(kafkaClientFrom("")).toBe("kafkajs");
    expect(kafkaClientFrom("platformatic")).toBe("platformatic");
  });

  it("refuses any other value with FF_INVALID_CONFIG naming the setting", () => {
    try {
      kafkaClientFrom("rdkafka");
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(FastfenceError);
      expect((err as FastfenceError).code).toBe("FF_INVALID_CONFIG");
      expect(JSON.stringify(err)).toMatch(/FASTFENCE_KAFKA_CLIENT/);
    }
  });
});
