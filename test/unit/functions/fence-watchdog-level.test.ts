// fence's watchdog level (issue 18): when a round may try it, the verdict at each look of
// the fencing replica's own watch (wait, refuse, expired: table), the attempt it records,
// the proof check, and how decide and remediate-workloads treat it — FencedOff
// WatchdogExpired and a release only with a proof that holds; FenceFailed with the reason
// for a node without an armed watchdog; the policy's watchdog entry.
import { describe, expect, test } from "vitest";
import type { Action } from "../../../core/decision.ts";
import type { Attempt } from "../../../core/incident.ts";
import { resolvePolicy } from "../../../core/policy.ts";
import { formatWatchdogReport, type WatchdogPlan } from "../../../core/watchdog.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import { decide } from "../../../functions/fence/handler.ts";
import { releaseOf } from "../../../functions/remediate-workloads/decide.pure.ts";
import {
  watchdogAttempt,
  watchdogExpired,
  watchdogMayTry,
  watchdogStep,
  type WatchSeen,
} from "../../../functions/fence/watchdog-level.pure.ts";
import {
  FENCE,
  T0,
  TRUSTED,
  at,
  confirmed,
  event,
  node,
  offAttempt,
  policy,
  view,
} from "../../scenarios/fixtures.ts";

const BOOT = confirmed("a").spec.bootId;
const PLAN: WatchdogPlan = { level: 2, bootId: BOOT, renewGraceMs: 2000, marginMs: 1500 };
// An agent that states the policy's grace (2000 ms); a report without it counts the agents' default.
const armed = (extra: object = {}) =>
  formatWatchdogReport({ armed: true, timeoutMs: 5000, bootId: BOOT, renewGraceMs: 2000, ...extra });
const seen = (extra: Partial<WatchSeen> = {}): WatchSeen => ({
  report: armed(),
  watchSyncedSince: 0,
  lastRenewalSeenAt: 1000,
  lastVouchSeenAt: undefined,
  ...extra,
});
// need = 2000 + 5000 + 1500 = 8500 ms of quiet after the last renewal seen at 1000
const END = 60_000;

describe("watchdogMayTry: only when no BMC answered", () => {
  const r = (result: Attempt["result"]) => offAttempt(1, 0, { result });
  test.each([
    ["no BMC level (the watchdog alone)", [], true],
    ["every BMC unreachable", [r("unreachable"), r("unreachable")], true],
    ["unreachable, then timed out", [r("unreachable"), r("timeout")], true],
    ["a BMC answered still on", [r("unreachable"), r("still-on")], false],
    ["a BMC refused the credentials", [r("auth-failed")], false],
    ["a protocol error", [r("error")], false],
    ["the last look abandoned the round", [r("abandoned")], false],
  ] as const)("%s", (_n, attempts, want) => expect(watchdogMayTry(attempts)).toBe(want));
});

describe("watchdogStep: the verdict at one look (monotonic ms)", () => {
  const cases: [string, Partial<WatchSeen>, number, string, RegExp][] = [
    ["quiet 8499 ms of 8500 → wait", {}, 9499, "wait", /quiet for 8499 ms of 8500/],
    ["quiet exactly 8500 ms → expired", {}, 9500, "expired", /reset by its watchdog/],
    ["a vouch seen later restarts the quiet", { lastVouchSeenAt: 5000 }, 9500, "wait", /quiet for 4500/],
    ["synced only since 4000: quiet counts from then", { watchSyncedSince: 4000 }, 9500, "wait", /5500 ms/],
    ["watch not synced → wait (poll)", { watchSyncedSince: undefined }, 20_000, "wait", /not synced/],
    ["no report → refused", { report: undefined }, 20_000, "refused", /no watchdog report/],
    [
      "not armed → refused",
      { report: armed({ armed: false, reason: "no device" }) },
      20_000,
      "refused",
      /no device/,
    ],
    ["report of another boot → refused", { report: armed({ bootId: "old" }) }, 20_000, "refused", /boot old/],
    ["malformed report → refused", { report: "{" }, 20_000, "refused", /not JSON/],
    ["report's longer grace counts", { report: armed({ renewGraceMs: 4000 }) }, 9500, "wait", /grace 4000/],
    [
      "the policy's longer grace counts",
      { report: armed({ renewGraceMs: 1000 }) },
      9500,
      "expired",
      /grace 2000/,
    ],
    [
      "a report that states no grace: the agents' default 5000 counts",
      { report: formatWatchdogReport({ armed: true, timeoutMs: 5000, bootId: BOOT }) },
      9500,
      "wait",
      /of 11500 ms \(grace 5000/,
    ],
  ];
  test.each(cases)("%s", (_n, s, now, kind, msg) => {
    const step = watchdogStep(PLAN, seen(s), now, END);
    expect(step.kind).toBe(kind);
    expect(step.message).toMatch(msg);
  });
  test("the wait is bounded: at most 1 s per look, and never past the round's end", () => {
    expect(watchdogStep(PLAN, seen(), 2000, END)).toMatchObject({ kind: "wait", ms: 1000 });
    expect(watchdogStep(PLAN, seen(), 9400, END)).toMatchObject({ kind: "wait", ms: 100 });
    expect(watchdogStep(PLAN, seen(), 2000, 5000)).toMatchObject({
      kind: "outOfTime",
      code: "FF_WATCHDOG_NOT_EXPIRED",
      retryInMs: 7500,
    });
  });
  test("the proof records the report, the grace, the margin and the quiet time", () => {
    expect(watchdogStep(PLAN, seen(), 10_000.7, END)).toMatchObject({
      kind: "expired",
      proof: { timeoutMs: 5000, renewGraceMs: 2000, marginMs: 1500, quietMs: 9000, bootId: BOOT },
    });
  });
});

const base = { round: 1, by: FENCE.replica, startedAt: at(1000) };
const expiredAttempt = (quietMs = 9000): Attempt => ({
  ...base,
  level: 2,
  driver: "watchdog",
  finishedAt: at(9000),
  result: "watchdog-expired",
  watchdog: { timeoutMs: 5000, renewGraceMs: 2000, marginMs: 1500, quietMs, bootId: BOOT },
});

describe("watchdogAttempt and the proof check", () => {
  test("expired → a watchdog-expired attempt that watchdogExpired accepts", () => {
    const step = watchdogStep(PLAN, seen(), 9500, END);
    if (step.kind === "wait") throw new Error("expected a final step");
    const a = watchdogAttempt(base, 2, step, at(9000));
    expect(a).toMatchObject({ level: 2, driver: "watchdog", result: "watchdog-expired" });
    expect(watchdogExpired([a])).toBe(a);
  });
  test("refused → an error attempt with FF_WATCHDOG_NOT_ARMED; out of time → timeout", () => {
    expect(
      watchdogAttempt(base, 0, { kind: "refused", code: "FF_WATCHDOG_NOT_ARMED", message: "m" }, at(1)),
    ).toMatchObject({ result: "error", errorCode: "FF_WATCHDOG_NOT_ARMED", driver: "watchdog" });
    expect(
      watchdogAttempt(
        base,
        0,
        { kind: "outOfTime", code: "FF_WATCHDOG_NOT_EXPIRED", retryInMs: 5, message: "m" },
        at(1),
      ),
    ).toMatchObject({ result: "timeout", errorCode: "FF_WATCHDOG_NOT_EXPIRED" });
  });
  test.each([
    ["a quiet time short of grace + timeout + margin", expiredAttempt(8499)],
    ["no proof", { ...expiredAttempt(), watchdog: undefined }],
    ["a BMC driver claiming it", { ...expiredAttempt(), driver: "redfish" as const }],
    ["a zero timeout", { ...expiredAttempt(), watchdog: { ...expiredAttempt().watchdog!, timeoutMs: 0 } }],
  ])("no proof: %s", (_n, a) => expect(watchdogExpired([a])).toBeUndefined());
});

const wdPolicy = (watchdog: object | null = { marginMs: 1500 }, levels?: unknown[]) =>
  policy({
    fencing: {
      nodes: [
        {
          nodeSelector: { names: ["a"] },
          levels: (levels ?? [
            { driver: "ipmi", address: "ipmi://127.0.0.1:623", credentialsSecret: "bmc" },
          ]) as never,
          ...(watchdog ? { watchdog } : {}),
        },
      ],
    },
  });

describe("decide: the round carries the watchdog level; its result", () => {
  const ev = (name: string) =>
    event(
      EVENT_TYPES.fenceRequested,
      "a",
      { incident: name, node: "a", bootId: BOOT, confirmedAt: at(0), observers: ["b", "c"] },
      { incident: name },
    );
  const powerOff = (p = wdPolicy()) => {
    const inc = confirmed("a");
    const d = decide({
      event: ev(inc.metadata.name),
      view: view({ incident: inc, node: node("a"), policy: p, trustedConfirmers: TRUSTED }),
      now: T0 + 1000,
      self: FENCE,
    });
    return d.actions.find((a): a is Extract<Action, { kind: "powerOff" }> => a.kind === "powerOff");
  };
  test("after the BMC levels: the plan with the policy's margin and grace, the incident's boot", () => {
    expect(powerOff()?.watchdog).toEqual({ level: 1, bootId: BOOT, renewGraceMs: 2000, marginMs: 1500 });
    expect(powerOff(wdPolicy(null))?.watchdog).toBeUndefined();
  });
  test("alone (no BMC level): level 0", () => {
    const off = powerOff(wdPolicy({}, []));
    expect(off?.levels).toEqual([]);
    expect(off?.watchdog).toMatchObject({ level: 0, marginMs: 2000 });
  });

  const fencing = () => confirmed("a", 0, { phase: "Fencing", round: 1, fencingBy: FENCE.replica });
  const result = (attempts: Attempt[], round = 1) => {
    const inc = confirmed("a", 0, { phase: "Fencing", round, fencingBy: FENCE.replica });
    const d = decide({
      event: ev(inc.metadata.name),
      view: view({ incident: inc, node: node("a"), policy: wdPolicy() }),
      now: T0 + 9000,
      self: FENCE,
      result: { kind: "powerOff", attempts },
    });
    const st = (
      d.actions.find((a) => a.kind === "updateIncidentStatus") as Extract<
        Action,
        { kind: "updateIncidentStatus" }
      >
    ).status;
    return { d, st };
  };
  const unreachable = offAttempt(1, 0, {
    result: "unreachable",
    commandAt: undefined,
    readBackState: undefined,
    readBackAt: undefined,
  });
  test("BMC unreachable, watchdog expired → FencedOff WatchdogExpired with the proof; node.fenced driver watchdog", () => {
    const { d, st } = result([unreachable, expiredAttempt()]);
    expect(st).toMatchObject({
      phase: "FencedOff",
      reason: "WatchdogExpired",
      powerOffConfirmedAt: at(9000),
    });
    expect(st.message).toMatch(/quiet 9000 ms ≥ grace 2000 \+ timeout 5000 \+ margin 1500/);
    expect(d.emit[0]).toMatchObject({ type: EVENT_TYPES.nodeFenced, data: { driver: "watchdog", level: 2 } });
    // and remediate-workloads releases on that proof
    const inc = { ...fencing(), status: st };
    expect(releaseOf(inc, view({ incident: inc })).outcome.kind).toBe("processed");
  });
  test("watchdog not armed → FenceFailed PowerOffNotConfirmed saying so; nothing released", () => {
    const refused = watchdogAttempt(
      base,
      1,
      {
        kind: "refused",
        code: "FF_WATCHDOG_NOT_ARMED",
        message: "never fenced by its watchdog: watchdog not armed",
      },
      at(2000),
    );
    const { d, st } = result([unreachable, refused], 3);
    expect(st).toMatchObject({ phase: "FenceFailed", reason: "PowerOffNotConfirmed" });
    expect(st.message).toMatch(/watchdog level 1: error.*not armed.*workloads stay \(S1\); giving up/);
    expect(d.emit[0]).toMatchObject({ data: { code: "FF_WATCHDOG_NOT_ARMED", final: true } });
  });
  test("a proof that does not hold is no proof: FenceFailed, and remediate refuses a FencedOff without one", () => {
    const { st } = result([unreachable, expiredAttempt(8000)]);
    expect(st.phase).toBe("FenceFailed");
    const forged = {
      ...fencing(),
      status: { ...st, phase: "FencedOff" as const, powerOffConfirmedAt: at(9000) },
    };
    expect(releaseOf(forged, view({ incident: forged })).outcome).toMatchObject({
      kind: "rejected",
      code: "PowerOffUnproven",
    });
  });
});

describe("policy: the watchdog level", () => {
  test("defaults: margin 2000 ms, grace 2000 ms; alone allowed", () => {
    const p = resolvePolicy({
      fencing: { nodes: [{ nodeSelector: { names: ["a"] }, levels: [], watchdog: {} }] },
    });
    expect(p.fencing.nodes[0]!.watchdog).toEqual({ marginMs: 2000, renewGraceMs: 2000 });
  });
  test("an entry with neither BMC levels nor the watchdog is refused", () => {
    expect(() =>
      resolvePolicy({ fencing: { nodes: [{ nodeSelector: { names: ["a"] }, levels: [] }] } }),
    ).toThrow(/at least one BMC level or the watchdog level/);
  });
});
