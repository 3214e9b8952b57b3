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
