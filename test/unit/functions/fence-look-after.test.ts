// fence's look after the power-off (issue 18): the pure rule that proves a BMC's read-back
// Off false (a heartbeat renewed after it, beyond the skew bound, with the Node still on the
// incident's boot ID), the alarm it writes (FenceFailed, reason BMCLied, the lie recorded,
// the Off proof cleared, fence.failed), and the escalation round that follows (only the levels
// that never lied, no last look, even past maxRounds).
import { describe, expect, test } from "vitest";
import { BMC_LIED_REASON } from "../../../core/bmc-lie.ts";
import { incidentConditions } from "../../../core/incident-conditions.ts";
import type { Action, HeartbeatRead, NodeInfo, Resync } from "../../../core/decision.ts";
import type { NodeFence, NodeFenceStatus } from "../../../core/incident.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import { decide, resync, resyncWants } from "../../../functions/fence/handler.ts";
import { lookAfter, watching } from "../../../functions/fence/look-after.pure.ts";
import { alarmNewLies } from "../../../infra/kube/bmc-lie-alarm.ts";
import { decide as recoverDecide } from "../../../functions/recover/decide.pure.ts";
import type { FenceFailed } from "../../../events/schemas.ts";
import {
  FENCE,
  NEW_BOOT,
  T0,
  at,
  condition,
  confirmed,
  event,
  node,
  offAttempt,
  policy,
  view,
} from "../../scenarios/fixtures.ts";

const OFF_MS = 1_000; // the read-back Off (offAttempt(1, 600) reads back at 600 + 400)
const SKEW = policy().corroboration.maxClockSkewMs; // 2000
const WINDOW = policy().lookAfter.windowMs;

function released(extra: Partial<NodeFenceStatus> = {}): NodeFence {
  const base = confirmed("a");
  return confirmed("a", 0, {
    phase: "Released",
    round: 1,
    attempts: [offAttempt(1, 600)],
    powerOffConfirmedAt: at(OFF_MS),
    timestamps: { ...base.status!.timestamps, fencing: at(500), fencedOff: at(1_050), released: at(1_200) },
    released: { taint: "t", podsDeleted: 1, volumeAttachmentsDeleted: 0, vmLaunchersDeleted: 0 },
    ...extra,
  });
}
const beat = (ms: number): HeartbeatRead => ({ resourceVersion: "9", renewTime: at(ms) });

describe("lookAfter: does the node prove the read-back Off false?", () => {
  const cases: [
    string,
    Partial<NodeFenceStatus>,
    NodeInfo | undefined,
    HeartbeatRead | "absent" | undefined,
    number,
    string,
  ][] = [
    [
      "renewed after the Off beyond the skew, same boot → lied",
      {},
      node("a"),
      beat(OFF_MS + SKEW + 1),
      5_000,
      "lied",
    ],
    [
      "FencedOff, renewed after the Off → lied",
      { phase: "FencedOff", timestamps: {} },
      node("a"),
      beat(OFF_MS + SKEW + 500),
      5_000,
      "lied",
    ],
    [
      "renewed within the skew bound → quiet (may predate the power loss)",
      {},
      node("a"),
      beat(OFF_MS + SKEW),
      5_000,
      "quiet",
    ],
    ["renewed before the Off → quiet", {}, node("a"), beat(OFF_MS - 300), 5_000, "quiet"],
    ["no heartbeat Lease → quiet", {}, node("a"), "absent", 5_000, "quiet"],
    ["heartbeat not read → quiet", {}, node("a"), undefined, 5_000, "quiet"],
    ["Node not in the API → quiet", {}, undefined, beat(OFF_MS + SKEW + 1), 5_000, "quiet"],
    [
      "the Node has a new boot ID: it really went down → over",
      {},
      node("a", { bootId: NEW_BOOT }),
      beat(OFF_MS + 9_000),
      10_000,
      "over",
    ],
    ["past the window → over", {}, node("a"), beat(OFF_MS + WINDOW + 10), OFF_MS + WINDOW + 1, "over"],
    [
      "a power-on was requested → over",
      { powerOnRequestedAt: at(1_300) },
      node("a"),
      beat(OFF_MS + SKEW + 1),
      5_000,
      "over",
    ],
    ["phase Fencing → over", { phase: "Fencing" }, node("a"), beat(OFF_MS + SKEW + 1), 5_000, "over"],
    [
      "no read-back Off recorded → over",
      { powerOffConfirmedAt: undefined },
      node("a"),
      beat(OFF_MS + SKEW + 1),
      5_000,
      "over",
    ],
  ];
  test.each(cases)("%s", (_name, extra, n, hb, now, kind) => {
    const inc = released(extra);
    const v = lookAfter({ inc, st: inc.status!, node: n, heartbeat: hb, policy: policy(), now: T0 + now });
    expect(v.kind).toBe(kind);
    if (v.kind === "lied") {
      expect(v.lie).toMatchObject({ level: 0, driver: "redfish", round: 1, readBackAt: at(OFF_MS) });
      expect(v.message).toMatch(/BMC lied/);
    }
  });

  test("the window is configurable; 0 turns the look after off", () => {
    const st = released().status!;
    expect(watching(st, policy({ lookAfter: { windowMs: 10_000 } }), T0 + OFF_MS + 10_000)).toBe(true);
    expect(watching(st, policy({ lookAfter: { windowMs: 10_000 } }), T0 + OFF_MS + 10_001)).toBe(false);
    expect(watching(st, policy({ lookAfter: { windowMs: 0 } }), T0 + OFF_MS)).toBe(false);
  });
});

const resyncOf = (inc: NodeFence, now: number, hb: HeartbeatRead | "absent", p = policy()) => {
  const r: Resync = { kind: "resync", incident: inc.metadata.name, node: inc.spec.nodeName };
  return {
    event: r,
    view: view({ incident: inc, node: node("a"), heartbeat: hb, policy: p }),
    now: T0 + now,
    self: FENCE,
  };
};
const statusWrite = (actions: Action[]) =>
  actions.find((a) => a.kind === "updateIncidentStatus") as Extract<Action, { kind: "updateIncidentStatus" }>;

describe("fence resync: the alarm and the escalation", () => {
  test("a lie moves Released to FenceFailed BMCLied, clears the Off proof and asks for the next round now", () => {
    const d = resync(resyncOf(released(), 6_000, beat(5_000)));
    expect(d.outcome.kind).toBe("processed");
    const st = statusWrite(d.actions).status;
    expect(st.phase).toBe("FenceFailed");
    expect(st.reason).toBe(BMC_LIED_REASON);
    expect(st.powerOffConfirmedAt).toBeUndefined();
    expect(st.bmcLied).toEqual([
      {
        level: 0,
        driver: "redfish",
        round: 1,
        readBackAt: at(OFF_MS),
        renewTime: at(5_000),
        seenAt: at(6_000),
      },
    ]);
    expect(st.retryNotBefore).toBe(at(6_000));
    // the condition a dashboard or `kubectl wait` sees
    const fenced = incidentConditions(st, at(6_000)).find((c) => c.type === "Fenced")!;
    expect(fenced).toMatchObject({ status: "False", reason: BMC_LIED_REASON });
    expect(st.timestamps.released).toBe(at(1_200)); // history stays
    expect(d.actions.some((a) => a.kind === "powerOff")).toBe(false); // the round is decide's, under the Lease
    expect(d.emit).toHaveLength(1);
    expect(d.emit[0]!.type).toBe(EVENT_TYPES.fenceFailed);
    expect((d.emit[0]!.data as FenceFailed).final).toBe(false);
  });

  test("nothing seen: ignored", () => {
    expect(resync(resyncOf(released(), 6_000, beat(OFF_MS - 100))).outcome.kind).toBe("ignored");
  });

  test("no level left that never lied: final FenceFailed with the reason (an operator must act)", () => {
    const one = policy({
      fencing: {
        nodes: [{ nodeSelector: { names: ["a"] }, levels: [policy().fencing.nodes[0]!.levels[0]!] }],
      },
    });
    const d = resync(resyncOf(released(), 6_000, beat(5_000), one));
    const st = statusWrite(d.actions).status;
    expect(st.phase).toBe("FenceFailed");
    expect(st.reason).toBe(BMC_LIED_REASON);
    expect(st.retryNotBefore).toBeUndefined();
    expect(st.message).toMatch(/operator/);
    expect((d.emit[0]!.data as FenceFailed).final).toBe(true);
  });

  test("the escalation round skips the lying level, takes no last look, and runs even past maxRounds", () => {
    const lied = resync(resyncOf(released({ round: 3 }), 6_000, beat(5_000)));
    const st = statusWrite(lied.actions).status;
    const inc: NodeFence = { ...released(), status: st };
    inc.metadata = { ...inc.metadata, resourceVersion: "500" };
    const ev = event(EVENT_TYPES.fenceFailed, "a", lied.emit[0]!.data as FenceFailed, {
      incident: inc.metadata.name,
    });
    const d = decide({
      event: ev,
      view: view({ incident: inc, node: node("a"), heartbeat: beat(5_500) }),
      now: T0 + 6_100,
      self: FENCE,
    });
    expect(d.outcome.kind).toBe("processed");
    const off = d.actions.find((a) => a.kind === "powerOff") as Extract<Action, { kind: "powerOff" }>;
    expect(off).toBeDefined();
    expect(off.skipLevels).toEqual([0]);
    expect(off.look).toBeUndefined();
    expect(off.round).toBe(4);
  });

  test("a second lie, by the last level, leaves nothing: final", () => {
    const first = statusWrite(resync(resyncOf(released(), 6_000, beat(5_000))).actions).status;
    const again = released({
      round: 2,
      bmcLied: first.bmcLied!,
      attempts: [offAttempt(1, 600), offAttempt(2, 7_000, { level: 1, driver: "ipmi" })],
      powerOffConfirmedAt: at(7_400),
    });
    const d = resync(resyncOf(again, 12_000, beat(10_000)));
    const st = statusWrite(d.actions).status;
    expect(st.bmcLied!.map((l) => l.level)).toEqual([0, 1]);
    expect(st.retryNotBefore).toBeUndefined();
  });
});

describe("recover after a lie", () => {
  test("a node back with a new boot ID after BMCLied: Recovered, and the out-of-service taint removed", () => {
    const st = statusWrite(resync(resyncOf(released(), 6_000, beat(5_000))).actions).status;
    const inc: NodeFence = { ...released(), status: st };
    const d = recoverDecide({
      event: condition("a", "True", NEW_BOOT, 60_000),
      view: view({ incident: inc, node: node("a", { bootId: NEW_BOOT }) }),
      now: T0 + 60_000,
      self: FENCE,
    });
    expect(d.actions.map((a) => a.kind)).toEqual(["removeTaint", "updateIncidentStatus"]);
    expect(statusWrite(d.actions).status.phase).toBe("Recovered");
  });
});

describe("fence resyncWants: a fenced incident only while the look after watches it", () => {
  test.each([
    ["Released inside the window", released(), 5_000, true],
    ["Released past the window", released(), OFF_MS + WINDOW + 1, false],
    ["Confirmed (fence's to drive)", confirmed("a"), 10 * WINDOW, true],
  ] as const)("%s", (_n, inc, now, want) => {
    expect(resyncWants(inc, T0 + now, policy())).toBe(want);
  });
});

// A node released by the watchdog rule that shows signs of life afterwards: its watchdog did
// not reset it (or fence's sums were wrong). The same look after, the same alarm, loud.
describe("the look after re-checks a watchdog release", () => {
  const WD_LEVEL = 2; // after the two BMC levels of the fixture's entry
  const wdPolicy = () => {
    const p = policy();
    return {
      ...p,
      fencing: {
        ...p.fencing,
        nodes: [{ ...p.fencing.nodes[0]!, watchdog: { renewGraceMs: 2_000, marginMs: 1_500 } }],
      },
    };
  };
  const byWatchdog = (): NodeFence =>
    released({
      reason: "WatchdogExpired",
      attempts: [
        offAttempt(1, 100, { result: "unreachable", readBackState: undefined, readBackAt: undefined }),
        offAttempt(1, 200, {
          level: 1,
          driver: "ipmi",
          result: "timeout",
          readBackState: undefined,
          readBackAt: undefined,
        }),
        {
          round: 1,
          level: WD_LEVEL,
          driver: "watchdog",
          by: FENCE.replica,
          startedAt: at(300),
          finishedAt: at(OFF_MS),
          result: "watchdog-expired",
          watchdog: { timeoutMs: 5_000, renewGraceMs: 2_000, marginMs: 1_500, quietMs: 8_600, bootId: "x" },
        },
      ],
    });

  test("a heartbeat renewed with the incident's boot after a watchdog release: alarm, proof withdrawn, escalation", () => {
    const d = resync(resyncOf(byWatchdog(), 6_000, beat(5_000), wdPolicy()));
    expect(d.outcome.kind).toBe("processed");
    const st = statusWrite(d.actions).status;
    expect(st.phase).toBe("FenceFailed");
    expect(st.reason).toBe("WatchdogDidNotReset");
    expect(st.powerOffConfirmedAt).toBeUndefined();
    expect(st.message).toMatch(/watchdog/);
    expect(st.bmcLied).toEqual([
      {
        level: WD_LEVEL,
        driver: "watchdog",
        round: 1,
        readBackAt: at(OFF_MS),
        renewTime: at(5_000),
        seenAt: at(6_000),
      },
    ]);
    // the condition: Fenced False with the alarm's reason
    const fenced = incidentConditions(st, at(6_000)).find((c) => c.type === "Fenced")!;
    expect(fenced).toMatchObject({ status: "False", reason: "WatchdogDidNotReset" });
    expect(d.emit[0]!.type).toBe(EVENT_TYPES.fenceFailed);
    expect((d.emit[0]!.data as FenceFailed).final).toBe(false); // the BMC levels never lied

    // the metric and the error log line (the Event's reason is the status reason)
    const counted: Record<string, string>[] = [];
    const lines: string[] = [];
    const logger = {
      error: (_o: object, msg: string) => lines.push(msg),
      child: () => logger,
    } as unknown as Parameters<typeof alarmNewLies>[2]["log"];
    alarmNewLies(
      byWatchdog().status,
      { ...byWatchdog(), status: st },
      {
        metrics: { bmcLied: { inc: (l: Record<string, string>) => counted.push(l) } } as never,
        log: logger,
      },
    );
    expect(counted).toEqual([{ level: String(WD_LEVEL + 1), driver: "watchdog" }]);
    expect(lines.join("\n")).toMatch(/watchdog/);

    // the next round: the BMC levels only, never the watchdog level again, no last look
    const inc: NodeFence = { ...byWatchdog(), status: st };
    inc.metadata = { ...inc.metadata, resourceVersion: "500" };
    const next = decide({
      event: event(EVENT_TYPES.fenceFailed, "a", d.emit[0]!.data as FenceFailed, {
        incident: inc.metadata.name,
      }),
      view: view({ incident: inc, node: node("a"), heartbeat: beat(5_500), policy: wdPolicy() }),
      now: T0 + 6_100,
      self: FENCE,
    });
    const off = next.actions.find((a) => a.kind === "powerOff") as Extract<Action, { kind: "powerOff" }>;
    expect(off).toBeDefined();
    expect(off.watchdog).toBeUndefined();
    expect(off.look).toBeUndefined();
  });

  test("a renewal within the skew bound, or a Node with a new boot: no alarm", () => {
    expect(resync(resyncOf(byWatchdog(), 6_000, beat(OFF_MS + SKEW), wdPolicy())).outcome.kind).toBe(
      "ignored",
    );
    const inc = byWatchdog();
    const v = lookAfter({
      inc,
      st: inc.status!,
      node: node("a", { bootId: NEW_BOOT }),
      heartbeat: beat(5_000),
      policy: wdPolicy(),
      now: T0 + 6_000,
    });
    expect(v.kind).toBe("over");
  });
});
