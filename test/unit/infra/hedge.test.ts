// PartitionHedge: which partition a publish starts on, and what it learns from sends made
// outside the hedge (ISR keepalives). Fake timers; sends are plain promises.
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { PartitionHedge } from "../../../infra/bus/hedge.ts";

const T = "fastfence.fence-requests";
const HEDGE_MS = 300;

/** A send that settles only when told to. */
function pending() {
  let ack!: () => void;
  let fail!: (e: Error) => void;
  const sent = new Promise<void>((res, rej) => {
    ack = res;
    fail = rej;
  });
  return { sent, ack, fail };
}

/** The first partitions of `count` publishes to T over 3 partitions. */
const firsts = (h: PartitionHedge, count: number) =>
  Array.from({ length: count }, () => h.firstPartition(T, 3));

beforeEach(() => void vi.useFakeTimers({ now: 1_000_000 }));
afterEach(() => void vi.useRealTimers());

describe("PartitionHedge.firstPartition", () => {
  test("round-robin over the partitions when none is known to be slow", () => {
    expect(firsts(new PartitionHedge(), 4)).toEqual([0, 1, 2, 0]);
  });
});

describe("PartitionHedge.observe: what a keepalive's answer teaches", () => {
  test("a partition whose leader does not answer within the hedge deadline is skipped by later publishes", async () => {
    const h = new PartitionHedge();
    const dead = pending();
    const acked = h.observe(T, 1, HEDGE_MS, dead.sent);
    void h.observe(T, 0, HEDGE_MS, Promise.resolve());
    void h.observe(T, 2, HEDGE_MS, Promise.resolve());
    await vi.advanceTimersByTimeAsync(HEDGE_MS);
    expect(firsts(h, 4)).toEqual([0, 2, 2, 0]);
    dead.fail(new Error("request timed out"));
    expect(await acked).toBe(false);
  });

  test("a send that fails at once (connection refused) marks its partition slow without waiting for the deadline", async () => {
    const h = new PartitionHedge();
    expect(await h.observe(T, 0, HEDGE_MS, Promise.reject(new Error("ECONNREFUSED")))).toBe(false);
    expect(firsts(h, 3)).toEqual([1, 1, 2]);
  });

  test("the mark lasts 5 s; then the partition is a first choice again", async () => {
    const h = new PartitionHedge();
    await h.observe(T, 0, HEDGE_MS, Promise.reject(new Error("ECONNREFUSED")));
    await vi.advanceTimersByTimeAsync(5001);
    expect(firsts(h, 3)).toEqual([0, 1, 2]);
  });

  test("an answer in time clears an earlier mark (the leadership moved to a live broker)", async () => {
    const h = new PartitionHedge();
    await h.observe(T, 0, HEDGE_MS, Promise.reject(new Error("ECONNREFUSED")));
    expect(await h.observe(T, 0, HEDGE_MS, Promise.resolve())).toBe(true);
    expect(firsts(h, 3)).toEqual([0, 1, 2]);
  });

  test("a late answer keeps the mark the deadline set", async () => {
    const h = new PartitionHedge();
    const slow = pending();
    const acked = h.observe(T, 2, HEDGE_MS, slow.sent);
    await vi.advanceTimersByTimeAsync(HEDGE_MS + 100);
    slow.ack();
    expect(await acked).toBe(true);
    expect(firsts(h, 3)).toEqual([0, 1, 0]);
  });

  test("never reports trouble (the keepalive that sends runs because of trouble)", async () => {
    const onTrouble = vi.fn();
    const h = new PartitionHedge(onTrouble);
    await h.observe(T, 0, HEDGE_MS, Promise.reject(new Error("ECONNREFUSED")));
    void h.observe(T, 1, HEDGE_MS, pending().sent);
    await vi.advanceTimersByTimeAsync(HEDGE_MS * 2);
    expect(onTrouble).not.toHaveBeenCalled();
  });
});

describe("PartitionHedge.sendToEvery", () => {
  test("one send per partition; counts the acknowledged ones and learns from the rest", async () => {
    const h = new PartitionHedge();
    const asked: number[] = [];
    const acked = await h.sendToEvery(T, 3, HEDGE_MS, async (p) => {
      asked.push(p);
      if (p === 1) throw new Error("ECONNREFUSED");
    });
    expect(asked).toEqual([0, 1, 2]);
    expect(acked).toBe(2);
    expect(firsts(h, 3)).toEqual([0, 2, 2]);
  });

  test("with hedging off, counts only: no partition is avoided", async () => {
    const h = new PartitionHedge();
    expect(
      await h.sendToEvery(T, 2, 0, (p) => (p === 0 ? Promise.reject(new Error("x")) : Promise.resolve())),
    ).toBe(1);
    expect(firsts(h, 3)).toEqual([0, 1, 2]);
  });
});

describe("PartitionHedge.send: where the hedged copies go", () => {
  /**
   * One hedged send over `layout`, each copy answered by `answer(partition, copies so far)`;
   * resolves with the partitions the copies went to, in order.
   */
  async function partitionsAsked(
    layout: Parameters<PartitionHedge["send"]>[1],
    answer: (partition: number, copies: number) => Promise<unknown>,
    h = new PartitionHedge(),
  ): Promise<number[]> {
    const asked: number[] = [];
    const sent = h.send(T, layout, 3, HEDGE_MS, (p) => {
      asked.push(p ?? -1);
      return answer(p ?? -1, asked.length);
    });
    await vi.advanceTimersByTimeAsync(HEDGE_MS * 2);
    await sent;
    return asked;
  }
  /** Answers at once unless the partition has a replica on `dead` (then never). */
  const deadBroker = (replicas: number[][], dead: number) => (p: number) =>
    replicas[p]?.includes(dead) ? pending().sent : Promise.resolve();

  test("three replicas on three brokers: round-robin, a new partition each hedge deadline", async () => {
    const replicas = [
      [1, 2, 3],
      [2, 3, 1],
      [3, 1, 2],
    ];
    const asked = await partitionsAsked({ partitions: 3, replicas }, (_, copies) =>
      copies < 3 ? pending().sent : Promise.resolve(),
    );
    expect(asked).toEqual([0, 1, 2]);
  });

  test("two replicas on three brokers: after a miss, the next copy avoids the brokers of the partition that missed", async () => {
    // Round-robin would try 0, 1, 2: all three hold broker 2.
    const replicas = [
      [1, 2],
      [2, 1],
      [2, 3],
      [3, 1],
    ];
    expect(await partitionsAsked({ partitions: 4, replicas }, deadBroker(replicas, 2))).toEqual([0, 2, 3]);
  });

  test("once the partitions on a frozen broker are known slow, publishes start on partitions without it", async () => {
    const replicas = [
      [1, 2],
      [2, 3],
      [3, 1],
      [1, 3],
      [2, 1],
      [3, 2],
    ];
    const h = new PartitionHedge();
    // What an ISR keepalive round teaches: every partition with a replica on broker 3 misses its deadline.
    for (let p = 0; p < 6; p++)
      void h.observe(T, p, HEDGE_MS, replicas[p]!.includes(3) ? pending().sent : Promise.resolve());
    await vi.advanceTimersByTimeAsync(HEDGE_MS);
    const starts = Array.from({ length: 6 }, () => h.firstPartition(T, 6, replicas));
    expect(new Set(starts)).toEqual(new Set([0, 4]));
  });

  test("without replica information: round-robin, skipping partitions known to be slow", async () => {
    const h = new PartitionHedge();
    await h.observe(T, 1, HEDGE_MS, Promise.reject(new Error("ECONNREFUSED")));
    const asked = await partitionsAsked(
      { partitions: 3 },
      (p) => (p === 2 ? Promise.resolve() : pending().sent),
      h,
    );
    expect(asked).toEqual([0, 2]);
  });

  test("numbers the copies, 0 for the first send and 1, 2 for the hedges (the caller sends hedges through another producer)", async () => {
    const h = new PartitionHedge();
    const copies: number[] = [];
    const sent = h.send(T, { partitions: 3 }, 3, HEDGE_MS, (_, copy) => {
      copies.push(copy);
      return copy === 2 ? Promise.resolve() : pending().sent;
    });
    await vi.advanceTimersByTimeAsync(HEDGE_MS * 2);
    await sent;
    expect(copies).toEqual([0, 1, 2]);
  });

  test("fails with FF_BUS_UNAVAILABLE once every copy failed", async () => {
    const h = new PartitionHedge();
    const sent = h.send(T, { partitions: 3 }, 3, HEDGE_MS, () =>
      Promise.reject(new Error("NOT_ENOUGH_REPLICAS")),
    );
    await expect(sent).rejects.toMatchObject({ code: "FF_BUS_UNAVAILABLE" });
  });
});
