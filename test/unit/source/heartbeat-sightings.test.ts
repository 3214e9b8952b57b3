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

describe("signed observations", () => {
  test("a miss carries the sighting and the sync state; the signature verifies with the published key", () => {
    const key = new ObserverKey();
    const t = new ProbeTracker({ replica: "event-source-b-1", node: "b" });
    const base = { target: "a", ok: false, port: 10250, heartbeatSynced: true } as const;
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
    const ev = t.onResult({ target: "a", ok: false, port: 1, at: 5 })!;
    const d = k2.signObservation(k1.signObservation(ev.data));
    expect(d.proof?.keyId).toBe(k2.keyId);
  });
});
