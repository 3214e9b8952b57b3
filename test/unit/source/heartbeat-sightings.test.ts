// The observer's own-clock record of heartbeat renewals (source/heartbeat-sightings.ts)
// and its signed observations (source/observer-key.ts + probe tracker): what the heartbeat
// veto and the origin checks read. Plain data, no API server.
import { describe, expect, test } from "vitest";
import { HeartbeatSightings } from "../../../source/heartbeat-sightings.ts";
import { ObserverKey } from "../../../source/observer-key.ts";
import { ProbeTracker } from "../../../source/probe-tracker.ts";
import { verifyClaim } from "../../../core/evidence-proof.ts";
import { claimOfObservation } from "../../../events/observation-claim.ts";
import type { NodeObserved } from "../../../events/schemas.ts";

describe("HeartbeatSightings", () => {
  test("the initial list is no renewal; a new resourceVersion is, at the observer's own time", () => {
    const s = new HeartbeatSightings(1000);
    s.onLease("fastfence-alive-a", "10", 100);
    s.setListed(true, 100);
    expect(s.seenAt("a")).toBeUndefined();
    s.onLease("fastfence-alive-a", "11", 350);
    expect(s.seenAt("a")).toBe(350);
  });
  test("the same resourceVersion again (a relist after a watch error) is not a renewal", () => {
    const s = new HeartbeatSightings(1000);
    s.onLease("fastfence-alive-a", "10", 100);
    s.onLease("fastfence-alive-a", "11", 200);
    s.onLease("fastfence-alive-a", "11", 900);
    expect(s.seenAt("a")).toBe(200);
  });
  test("synced: listed and some Lease event within staleMs; an error or silence unsyncs", () => {
    const s = new HeartbeatSightings(1000);
    expect(s.synced(0)).toBe(false); // not listed yet
    s.setListed(true, 0);
    expect(s.synced(500)).toBe(true);
    expect(s.synced(1001)).toBe(false); // a stalled watch: not even our own renewals arrive
    s.onLease("fastfence-alive-b", "5", 1200);
    expect(s.synced(1300)).toBe(true);
    s.setListed(false, 1400);
    expect(s.synced(1400)).toBe(false);
  });
  test("a deleted Lease forgets its sighting", () => {
    const s = new HeartbeatSightings(1000);
    s.onLease("fastfence-alive-a", "1", 0);
    s.onLease("fastfence-alive-a", "2", 10);
    s.onDelete("fastfence-alive-a");
    expect(s.seenAt("a")).toBeUndefined();
  });
});

describe("HeartbeatSightings.renewedBy (dating a renewal for the in-flight case)", () => {
  // The node's clock runs 5000 ms behind the observer's; deliveries take 20-60 ms.
  const OFFSET = 5000;
  const feed = (s: HeartbeatSightings, rv: number, writtenAt: number, lag: number) =>
    s.onLease("fastfence-alive-a", String(rv), writtenAt + lag, writtenAt - OFFSET);

  test("renewTime plus the smallest recent lag: never before the real write, whatever the clock offset", () => {
    const s = new HeartbeatSightings(1000, 125);
    s.onLease("fastfence-alive-a", "1", 0, -OFFSET); // the list: not dated
    expect(s.renewedBy("a")).toBeUndefined();
    feed(s, 2, 250, 40);
    feed(s, 3, 500, 20);
    feed(s, 4, 750, 60);
    expect(s.seenAt("a")).toBe(810);
    // written at 750 (observer's clock); dated to 750 + the smallest lag (20)
    expect(s.renewedBy("a")).toBe(770);
    expect(s.renewedBy("a")!).toBeGreaterThanOrEqual(750);
  });

  test("the first dated renewal is dated when seen (its own lag is the smallest known)", () => {
    const s = new HeartbeatSightings(1000, 125);
    s.onLease("fastfence-alive-a", "1", 0, -OFFSET);
    feed(s, 2, 250, 90);
    expect(s.renewedBy("a")).toBe(340);
  });

  test("a delivery much slower than usual (or the node's clock stepped back) gets no date", () => {
    const s = new HeartbeatSightings(1000, 125);
    s.onLease("fastfence-alive-a", "1", 0, -OFFSET);
    feed(s, 2, 250, 20);
    feed(s, 3, 500, 300); // 280 ms slower than the fastest: more than the 125 ms cap
    expect(s.seenAt("a")).toBe(800);
    expect(s.renewedBy("a")).toBeUndefined();
  });

  test("a change that did not move renewTime forward (another write) is not dated", () => {
    const s = new HeartbeatSightings(1000, 125);
    s.onLease("fastfence-alive-a", "1", 0, -OFFSET);
    feed(s, 2, 250, 20);
    s.onLease("fastfence-alive-a", "3", 400, 250 - OFFSET); // same renewTime, new resourceVersion
    expect(s.seenAt("a")).toBe(400);
    expect(s.renewedBy("a")).toBeUndefined();
  });

  test("cap 0 (the default) dates nothing that arrived later than the fastest delivery", () => {
    const s = new HeartbeatSightings(1000);
    s.onLease("fastfence-alive-a", "1", 0, -OFFSET);
    feed(s, 2, 250, 20);
    feed(s, 3, 500, 30);
    expect(s.renewedBy("a")).toBeUndefined();
  });
});

describe("signed observations", () => {
  test("a miss carries the sighting and the sync state; the signature verifies with the published key", () => {
    const key = new ObserverKey();
    const t = new ProbeTracker({ replica: "event-source-b-1", node: "b" });
    const base = {
      target: "a",
      targetBootId: "boot-1",
      ok: false,
      port: 10250,
      heartbeatSynced: true,
    } as const;
    t.onResult({ ...base, at: 1000, heartbeatSeenAt: 900 });
    const ev = t.onResult({ ...base, at: 1200, heartbeatSeenAt: 900 })!;
    const d = key.signObservation(ev.data);
    expect(d).toMatchObject({
      heartbeatSeenAt: new Date(900).toISOString(),
      heartbeatSynced: true,
      firstMissAt: new Date(1000).toISOString(),
      proof: { keyId: key.keyId },
    });
    expect(verifyClaim(claimOfObservation(d), d.proof!, [key.annotation])).toBe("ok");
    const forged: NodeObserved = { ...d, heartbeatSeenAt: new Date(100).toISOString() };
    expect(verifyClaim(claimOfObservation(forged), d.proof!, [key.annotation])).toBe("BadSignature");
  });
  test("re-signing replaces an existing proof", () => {
    const k1 = new ObserverKey();
    const k2 = new ObserverKey();
    const t = new ProbeTracker({ replica: "r", node: "b" });
    const ev = t.onResult({ targetBootId: "boot-1", target: "a", ok: false, port: 1, at: 5 })!;
    const d = k2.signObservation(k1.signObservation(ev.data));
    expect(d.proof?.keyId).toBe(k2.keyId);
  });
});
