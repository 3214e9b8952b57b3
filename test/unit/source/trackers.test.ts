// The observer's trackers turn raw probe results and informer snapshots into the events
// the pipeline consumes; every event they produce must pass the catalog's validation.
import { describe, expect, it } from "vitest";
import { parseEvent } from "../../../events/catalog.ts";
import { envelope, type OutgoingEvent } from "../../../events/envelope.ts";
import { ConditionTracker } from "../../../source/condition-tracker.ts";
import { ProbeTracker } from "../../../source/probe-tracker.ts";

const observer = { replica: "source-node-b", node: "node-b" };
const valid = (o: OutgoingEvent) =>
  parseEvent(envelope(o, "/fastfence/event-source/source-node-b", 1_000_000));

describe("ProbeTracker", () => {
  it("reports every miss with the streak count, and one restore", () => {
    const t = new ProbeTracker(observer);
    expect(
      t.onResult({ targetBootId: "boot-1", target: "node-a", ok: true, at: 1000, port: 10250, rttMs: 0.4 }),
    ).toBeUndefined();
    const m1 = t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: 1100, port: 10250 })!;
    const m2 = t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: 1200, port: 10250 })!;
    expect(m1.data).toMatchObject({
      result: "missed",
      consecutiveMisses: 1,
      firstMissAt: new Date(1100).toISOString(),
      lastOkAt: new Date(1000).toISOString(),
    });
    expect(m2.data).toMatchObject({ consecutiveMisses: 2, firstMissAt: new Date(1100).toISOString() });
    const r = t.onResult({
      targetBootId: "boot-1",
      target: "node-a",
      ok: true,
      at: 1300,
      port: 10250,
      rttMs: 0.3,
    })!;
    expect(r.data).toMatchObject({ result: "restored", consecutiveMisses: 0 });
    expect(
      t.onResult({ targetBootId: "boot-1", target: "node-a", ok: true, at: 1400, port: 10250 }),
    ).toBeUndefined();
    for (const e of [m1, m2, r]) expect(() => valid(e)).not.toThrow();
  });

  it("keeps streaks per target", () => {
    const t = new ProbeTracker(observer);
    t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: 1, port: 1 });
    expect(
      t.onResult({ targetBootId: "boot-1", target: "node-c", ok: false, at: 2, port: 1 })!.data,
    ).toMatchObject({
      consecutiveMisses: 1,
    });
    expect(
      t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: 3, port: 1 })!.data,
    ).toMatchObject({
      consecutiveMisses: 2,
    });
  });
});

describe("ConditionTracker", () => {
  const node = (ready: "True" | "False" | "Unknown", bootId = "boot-1") => ({
    name: "node-a",
    bootId,
    ready,
  });

  it("says nothing about a healthy node it first sees, and reports Ready changes", () => {
    const t = new ConditionTracker(observer, 40_000);
    expect(t.onNode(node("True"), 0)).toEqual([]);
    const [ev] = t.onNode(node("Unknown"), 10);
    expect(ev!.data).toMatchObject({ change: "ready", ready: "Unknown", bootId: "boot-1" });
    expect(() => valid(ev!)).not.toThrow();
    expect(t.onNode(node("Unknown"), 20)).toEqual([]);
  });

  it("reports a new boot ID (a new incarnation) as a bootId change", () => {
    const t = new ConditionTracker(observer, 40_000);
    t.onNode(node("True"), 0);
    const [ev] = t.onNode(node("True", "boot-2"), 5);
    expect(ev!.data).toMatchObject({ change: "bootId", bootId: "boot-2" });
  });

  it("reports a kubelet Lease not renewed for leaseStaleMs once", () => {
    const t = new ConditionTracker(observer, 40_000);
    t.onNode(node("True"), 0);
    t.onLease("node-a", 1_000);
    expect(t.tick(40_999)).toEqual([]);
    const [ev] = t.tick(41_000);
    expect(ev!.data).toMatchObject({ change: "lease", leaseRenewAt: new Date(1_000).toISOString() });
    expect(t.tick(50_000)).toEqual([]);
    t.onLease("node-a", 50_000);
    expect(t.tick(60_000)).toEqual([]);
  });
});

describe("ProbeTracker after a reboot", () => {
  it("holds no miss streak against a new incarnation until it has answered once", () => {
    const t = new ProbeTracker(observer);
    t.onResult({ targetBootId: "boot-1", target: "node-a", ok: true, at: 0, port: 1 });
    for (let i = 1; i <= 5; i++)
      expect(
        t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: i * 100, port: 1 }),
      ).toBeDefined();
    t.rearm("node-a"); // the informer saw a new boot ID
    expect(
      t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: 700, port: 1 }),
    ).toBeUndefined();
    expect(
      t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: 800, port: 1 }),
    ).toBeUndefined();
    expect(
      t.onResult({ targetBootId: "boot-1", target: "node-a", ok: true, at: 900, port: 1 }),
    ).toBeUndefined();
    const m = t.onResult({ targetBootId: "boot-1", target: "node-a", ok: false, at: 1000, port: 1 })!;
    expect(m.data).toMatchObject({
      result: "missed",
      consecutiveMisses: 1,
      firstMissAt: new Date(1000).toISOString(),
    });
  });
});

describe("ProbeTracker and the probe ring", () => {
  const miss = (t: ProbeTracker, at: number, boot = "boot-2") =>
    t.onResult({ targetBootId: boot, target: "node-a", ok: false, at, port: 1 });

  it("holds no streak against a node back on the ring until it has answered (fenced off, rebooted while off)", () => {
    const t = new ProbeTracker(observer);
    t.onResult({ targetBootId: "boot-1", target: "node-a", ok: true, at: 0, port: 1 });
    expect(miss(t, 100, "boot-1")).toBeDefined(); // it dies: misses count
    t.retain(["node-c"]); // fenced off: out of the ring
    t.rearm("node-a"); // the informer saw its new boot while it was off the ring
    t.retain(["node-c"]);
    t.retain(["node-a", "node-c"]); // back on the ring (taint removed), its port not yet answering
    expect(miss(t, 5_000)).toBeUndefined();
    expect(miss(t, 5_100)).toBeUndefined();
    t.onResult({ targetBootId: "boot-2", target: "node-a", ok: true, at: 5_200, port: 1 });
    expect(miss(t, 5_300)!.data).toMatchObject({ result: "missed", consecutiveMisses: 1 });
  });

  it("counts from the first probe a target this replica never probed (a restarted observer sees a dead node)", () => {
    const t = new ProbeTracker(observer);
    t.retain(["node-a"]);
    expect(miss(t, 100)!.data).toMatchObject({ result: "missed", consecutiveMisses: 1 });
  });
});
