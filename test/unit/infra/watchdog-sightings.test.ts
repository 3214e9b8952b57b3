// The fencing replica's own watch of the heartbeat Leases for the watchdog level
// (infra/fence/watchdog-sightings.ts), on its monotonic clock: the initial list is no
// renewal, a later change is; a peer's changed vouch counter is a vouch; a watch that broke
// or went quiet is not synced, and its synced time restarts when it is live again.
import { describe, expect, test } from "vitest";
import { VOUCH_ANNOTATION, WATCHDOG_ANNOTATION } from "../../../core/watchdog.ts";
import { WatchdogSightings } from "../../../infra/fence/watchdog-sightings.ts";

const A = "fastfence-alive-node-a";
const B = "fastfence-alive-node-b";
const report = '{"armed":true,"timeoutMs":5000,"bootId":"b"}';

function listed(): WatchdogSightings {
  const s = new WatchdogSightings(3000);
  s.onLease(A, "1", { [WATCHDOG_ANNOTATION]: report }, 100);
  s.onLease(B, "1", { [VOUCH_ANNOTATION]: '{"node-a":3}' }, 100);
  s.setListed(true, 200);
  return s;
}

describe("WatchdogSightings", () => {
  test("the initial list: the report, synced since the list, no renewal, no vouch", () => {
    expect(listed().seen("node-a", 300)).toEqual({
      report,
      watchSyncedSince: 200,
      lastRenewalSeenAt: undefined,
      lastVouchSeenAt: undefined,
    });
  });
  test("a new resourceVersion of the node's Lease is a renewal seen now; the same one is not", () => {
    const s = listed();
    s.onLease(A, "1", { [WATCHDOG_ANNOTATION]: report }, 500);
    expect(s.seen("node-a", 600).lastRenewalSeenAt).toBeUndefined();
    s.onLease(A, "2", { [WATCHDOG_ANNOTATION]: report }, 700);
    expect(s.seen("node-a", 800).lastRenewalSeenAt).toBe(700);
    s.onLease(B, "2", { [VOUCH_ANNOTATION]: '{"node-a":3}' }, 900);
    expect(s.seen("node-a", 950).lastRenewalSeenAt).toBe(700); // another node's renewal
  });
  test("a peer's changed (or new) counter for the node is a vouch seen now", () => {
    const s = listed();
    s.onLease(B, "2", { [VOUCH_ANNOTATION]: '{"node-a":3}' }, 500);
    expect(s.seen("node-a", 600).lastVouchSeenAt).toBeUndefined();
    s.onLease(B, "3", { [VOUCH_ANNOTATION]: '{"node-a":4}' }, 700);
    expect(s.seen("node-a", 800).lastVouchSeenAt).toBe(700);
    s.onLease(B, "4", { [VOUCH_ANNOTATION]: '{"node-a":4,"node-c":1}' }, 900);
    expect(s.seen("node-c", 950).lastVouchSeenAt).toBe(900);
    s.onLease(B, "5", { [VOUCH_ANNOTATION]: "garbage" }, 1000);
    expect(s.seen("node-a", 1100).lastVouchSeenAt).toBe(700);
  });
  test("a Lease created while watching is a renewal; a deleted one takes its report with it", () => {
    const s = listed();
    s.onLease("fastfence-alive-node-c", "9", undefined, 400);
    expect(s.seen("node-c", 500).lastRenewalSeenAt).toBe(400);
    s.onDelete(A);
    expect(s.seen("node-a", 500).report).toBeUndefined();
  });
  test("a broken watch is not synced until it has listed again, then synced from then", () => {
    const s = listed();
    s.setListed(false, 1000);
    expect(s.seen("node-a", 1100).watchSyncedSince).toBeUndefined();
    s.setListed(true, 2000);
    expect(s.seen("node-a", 2100).watchSyncedSince).toBe(2000);
  });
  test("a watch quiet for longer than staleMs is not synced; when events resume it is synced from then", () => {
    const s = listed();
    expect(s.seen("node-a", 3200).watchSyncedSince).toBe(200);
    expect(s.seen("node-a", 3201).watchSyncedSince).toBeUndefined();
    s.onLease(B, "2", undefined, 9000);
    expect(s.seen("node-a", 9100).watchSyncedSince).toBe(9000);
  });
  test("other Leases in the namespace are ignored", () => {
    const s = listed();
    s.onLease("fastfence-fence-node-a", "5", { [WATCHDOG_ANNOTATION]: "x" }, 500);
    expect(s.seen("node-a", 600)).toMatchObject({ report, lastRenewalSeenAt: undefined });
  });
});
