// Watchdog fencing rules (core/watchdog.ts) as a table: when the agent pets, disarms or lets
// the watchdog fire, and when a deciding replica may count a silent node as reset by it.
import { describe, expect, test } from "vitest";
import {
  formatWatchdogReport,
  parseWatchdogReport,
  petDecision,
  watchdogVerdict,
  type PetInput,
  type QuietInput,
} from "../../../core/watchdog.ts";

const pet = (over: Partial<PetInput>): PetInput => ({
  now: 100_000,
  lastRenewedAt: 99_500,
  vouchedAt: new Map(),
  clusterSize: 3,
  renewGraceMs: 2_000,
  stopping: false,
  ...over,
});

describe("petDecision", () => {
  const rows: [string, Partial<PetInput>, { pet: boolean; disarm: boolean; reason: string }][] = [
    ["renewed within the grace → pet", {}, { pet: true, disarm: false, reason: "HeartbeatRenewed" }],
    [
      "renewed exactly at the grace's end → pet",
      { lastRenewedAt: 98_000 },
      { pet: true, disarm: false, reason: "HeartbeatRenewed" },
    ],
    [
      "not renewed for longer than the grace, no vouch → stop petting (the watchdog fires)",
      { lastRenewedAt: 97_999 },
      { pet: false, disarm: false, reason: "Isolated" },
    ],
    [
      "never renewed → stop petting",
      { lastRenewedAt: undefined },
      { pet: false, disarm: false, reason: "Isolated" },
    ],
    [
      // On 6f7efbe: pet (2 of 3 with itself): one dishonest peer kept an isolated node alive.
      "three nodes, API lost, one of two peers recorded a vouch → stop (the API, or two distinct peers)",
      { lastRenewedAt: 90_000, vouchedAt: new Map([["b", 99_000]]) },
      { pet: false, disarm: false, reason: "Isolated" },
    ],
    [
      "three nodes, API lost, both peers recorded a vouch → pet",
      {
        lastRenewedAt: 90_000,
        vouchedAt: new Map([
          ["b", 99_000],
          ["c", 99_100],
        ]),
      },
      { pet: true, disarm: false, reason: "VouchedByMajority" },
    ],
    [
      "API lost, one peer's vouch is older than the grace → stop",
      {
        lastRenewedAt: 90_000,
        vouchedAt: new Map([
          ["b", 97_000],
          ["c", 99_000],
        ]),
      },
      { pet: false, disarm: false, reason: "Isolated" },
    ],
    [
      "two nodes: the only peer vouches → stop (it would be enough alone)",
      { lastRenewedAt: undefined, clusterSize: 2, vouchedAt: new Map([["b", 99_000]]) },
      { pet: false, disarm: false, reason: "Isolated" },
    ],
    [
      "five nodes: two peers vouch (3 of 5) → pet",
      {
        lastRenewedAt: undefined,
        clusterSize: 5,
        vouchedAt: new Map([
          ["b", 99_000],
          ["c", 99_500],
        ]),
      },
      { pet: true, disarm: false, reason: "VouchedByMajority" },
    ],
    [
      "four nodes: one peer vouches (2 of 4 is no majority) → stop",
      { lastRenewedAt: undefined, clusterSize: 4, vouchedAt: new Map([["b", 99_000]]) },
      { pet: false, disarm: false, reason: "Isolated" },
    ],
    [
      "a single-node cluster has no one to vouch → stop",
      { lastRenewedAt: undefined, clusterSize: 1 },
      { pet: false, disarm: false, reason: "Isolated" },
    ],
    [
      "graceful stop → disarm, even when isolated",
      { stopping: true, lastRenewedAt: undefined },
      { pet: false, disarm: true, reason: "Disarming" },
    ],
  ];
  test.each(rows)("%s", (_name, over, want) => {
    expect(petDecision(pet(over))).toMatchObject(want);
  });
});

const ARMED = formatWatchdogReport({ armed: true, timeoutMs: 5_000, bootId: "boot-1" });
const quiet = (over: Partial<QuietInput>): QuietInput => ({
  now: 200_000,
  report: parseWatchdogReport(ARMED),
  bootId: "boot-1",
  watchSyncedSince: 100_000,
  lastRenewalSeenAt: 190_000,
  lastVouchSeenAt: undefined,
  renewGraceMs: 2_000,
  marginMs: 1_000,
  ...over,
});

describe("watchdogVerdict", () => {
  const rows: [string, Partial<QuietInput>, { reset: boolean; code?: string }][] = [
    ["quiet 10 s ≥ 2 + 5 + 1 s → reset", {}, { reset: true }],
    ["quiet exactly 8 s → reset", { lastRenewalSeenAt: 192_000 }, { reset: true }],
    ["quiet 7.999 s → not yet", { lastRenewalSeenAt: 192_001 }, { reset: false, code: "NotQuietLongEnough" }],
    [
      "a peer recorded a vouch 3 s ago → not yet (the node may still be petting)",
      { lastVouchSeenAt: 197_000 },
      { reset: false, code: "NotQuietLongEnough" },
    ],
    [
      "this replica's watch synced only 5 s ago (a restart, an API outage) → not yet",
      { watchSyncedSince: 195_000, lastRenewalSeenAt: undefined },
      { reset: false, code: "NotQuietLongEnough" },
    ],
    [
      "watch not synced → not yet",
      { watchSyncedSince: undefined },
      { reset: false, code: "NotQuietLongEnough" },
    ],
    ["no report → never", { report: parseWatchdogReport(undefined) }, { reset: false, code: "NoWatchdog" }],
    [
      "report not armed → never",
      {
        report: parseWatchdogReport(
          formatWatchdogReport({
            armed: false,
            timeoutMs: 5_000,
            bootId: "boot-1",
            reason: "no /dev/watchdog",
          }),
        ),
      },
      { reset: false, code: "NoWatchdog" },
    ],
    [
      "report of an earlier boot → never",
      {
        report: parseWatchdogReport(
          formatWatchdogReport({ armed: true, timeoutMs: 5_000, bootId: "boot-0" }),
        ),
      },
      { reset: false, code: "NoWatchdog" },
    ],
  ];
  test.each(rows)("%s", (_name, over, want) => {
    expect(watchdogVerdict(quiet(over))).toMatchObject(want);
  });
  test("the wait left is said, so the caller can come back then", () => {
    const v = watchdogVerdict(quiet({ lastRenewalSeenAt: 195_000 }));
    expect(v).toMatchObject({ reset: false, retryInMs: 3_000 });
  });
});

describe("parseWatchdogReport", () => {
  const bad: [string, string | undefined, RegExp][] = [
    ["missing", undefined, /no watchdog report/],
    ["not JSON", "armed", /not JSON/],
    ["armed not a boolean", '{"armed":"yes","timeoutMs":5000,"bootId":"b"}', /^armed/],
    ["no boot", '{"armed":true,"timeoutMs":5000}', /^bootId/],
    ["timeout too short", '{"armed":true,"timeoutMs":10,"bootId":"b"}', /^timeoutMs/],
    ["timeout not an integer", '{"armed":true,"timeoutMs":5000.5,"bootId":"b"}', /^timeoutMs/],
  ];
  test.each(bad)("%s is refused with the reason", (_n, value, reason) => {
    const r = parseWatchdogReport(value);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });
  test("round trip", () => {
    const r = { armed: true, timeoutMs: 30_000, bootId: "b" };
    expect(parseWatchdogReport(formatWatchdogReport(r))).toEqual({ ok: true, report: r });
  });
});
