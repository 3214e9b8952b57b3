// remediate-workloads (S1: only after a confirmed power-off) and recover (new boot ID),
// including duplicates and reordering, as tables of named cases.
import { describe, expect, test } from "vitest";
import * as remediate from "../../../functions/remediate-workloads/handler.ts";
import * as recover from "../../../functions/recover/handler.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import { OUT_OF_SERVICE_TAINT } from "../../../core/decision.ts";
import type { NodeFenceStatus } from "../../../core/incident.ts";
import { REJECT_CODES, type IgnoreCode, type RejectCode } from "../../../core/reasons.ts";
import {
  BOOT,
  FENCE,
  NEW_BOOT,
  T0,
  at,
  condition,
  confirmed,
  event,
  node,
  markedFencedOff,
  offAttempt,
  policy,
  view,
} from "../../scenarios/fixtures.ts";

const NOW = T0 + 3000;
const fenced = (extra: Partial<NodeFenceStatus> = {}) =>
  confirmed("a", 0, {
    phase: "FencedOff",
    round: 1,
    attempts: [offAttempt(1, 1000)],
    powerOffConfirmedAt: at(1400),
    ...extra,
  });
const name = fenced().metadata.name;
const fencedEvt = event(
  EVENT_TYPES.nodeFenced,
  "a",
  {
    incident: name,
    node: "a",
    bootId: BOOT.a,
    powerOffConfirmedAt: at(1400),
    round: 1,
    level: 0,
    driver: "redfish",
    attempts: 1,
  },
  { incident: name },
);
const releasedEvt = event(
  EVENT_TYPES.workloadsReleased,
  "a",
  {
    incident: name,
    node: "a",
    bootId: BOOT.a,
    taint: remediate.TAINT_STRING,
    podsDeleted: 3,
    volumeAttachmentsDeleted: 1,
    vmLaunchersDeleted: 1,
    powerOffConfirmedAt: at(1400),
    releasedAt: at(2000),
  },
  { incident: name },
);

describe("remediate-workloads.decide", () => {
  const cases: [
    string,
    Partial<Parameters<typeof remediate.decide>[0]["view"]>,
    IgnoreCode | RejectCode | "release",
  ][] = [
    [
      "FencedOff with Off read-back → taint, VM launchers, pods, VolumeAttachments",
      { incident: fenced(), node: node("a", markedFencedOff(fenced())) },
      "release",
    ],
    [
      "FencedOff, but the node carries no fenced-off fact → waits (the taint would be refused)",
      { incident: fenced() },
      "FencedOffNotMarked",
    ],
    [
      "FencedOff, the node's fact names another incident → waits",
      { incident: fenced(), node: node("a", { fencedOff: `nf-other/${BOOT.a}` }) },
      "FencedOffNotMarked",
    ],
    [
      "Fencing (power-off not yet confirmed) → workloads stay",
      { incident: fenced({ phase: "Fencing" }) },
      "WrongPhase",
    ],
    ["FenceFailed → workloads stay", { incident: fenced({ phase: "FenceFailed" }) }, "WrongPhase"],
    [
      "FencedOff but no Off read-back recorded → rejected",
      { incident: fenced({ attempts: [offAttempt(1, 1000, { readBackState: "PoweringOff" })] }) },
      "PowerOffUnproven",
    ],
    [
      "FencedOff without powerOffConfirmedAt → rejected",
      { incident: fenced({ powerOffConfirmedAt: undefined }) },
      "PowerOffUnproven",
    ],
    ["event alone, no incident → nothing", {}, "IncidentNotFound"],
    ["duplicate after Released → nothing", { incident: fenced({ phase: "Released" }) }, "PhasePassed"],
    ["reordered after Recovered → nothing", { incident: fenced({ phase: "Recovered" }) }, "PhasePassed"],
  ];
  test.each(cases)("%s", (_n, v, exp) => {
    const d = remediate.decide({
      event: fencedEvt,
      view: view({ node: node("a"), ...v }),
      now: NOW,
      self: FENCE,
    });
    if (exp === "release") {
      expect(d.outcome.kind).toBe("processed");
      expect(d.actions).toEqual([
        { kind: "setTaint", node: "a", taint: OUT_OF_SERVICE_TAINT },
        { kind: "deleteVmLaunchers", node: "a" },
        { kind: "deletePods", node: "a", gracePeriodSeconds: 0 },
        { kind: "deleteVolumeAttachments", node: "a" },
      ]);
      expect(d.emit).toEqual([]);
    } else {
      expect(d.actions).toEqual([]);
      const kind = Object.hasOwn(REJECT_CODES, exp) ? "rejected" : "ignored";
      expect(d.outcome).toEqual({ kind, code: exp, reason: expect.any(String) });
    }
  });

  test("onReleased records counts (Released) and emits workloads.released", () => {
    const inc = fenced();
    const d = remediate.onReleased({
      incident: inc,
      counts: { podsDeleted: 3, volumeAttachmentsDeleted: 1, vmLaunchersDeleted: 1 },
      policy: policy(),
      now: NOW,
      self: FENCE,
    });
    expect(d.actions).toEqual([
      expect.objectContaining({
        kind: "updateIncidentStatus",
        expectedResourceVersion: inc.metadata.resourceVersion,
        status: expect.objectContaining({
          phase: "Released",
          released: {
            taint: "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
            podsDeleted: 3,
            volumeAttachmentsDeleted: 1,
            vmLaunchersDeleted: 1,
          },
        }),
      }),
    ]);
    expect(d.emit[0]).toMatchObject({
      type: EVENT_TYPES.workloadsReleased,
      ffincident: inc.metadata.name,
      data: { podsDeleted: 3 },
    });
  });
});

describe("recover.decide", () => {
  type Exp = { phase: "Recovered" | "Closed"; taint: boolean } | { ignored: IgnoreCode } | { powerOn: true };
  const cases: [string, Parameters<typeof recover.decide>[0], Exp][] = [
    [
      "Released, node Ready with a new boot → taint removed, Recovered",
      {
        event: condition("a", "True", NEW_BOOT, 3000),
        view: view({ incident: fenced({ phase: "Released" }), node: node("a", { bootId: NEW_BOOT }) }),
        now: NOW,
        self: FENCE,
      },
      { phase: "Recovered", taint: true },
    ],
    [
      "FencedOff, node back → taint removed, Recovered",
      {
        event: condition("a", "True", NEW_BOOT, 3000),
        view: view({ incident: fenced(), node: node("a", { bootId: NEW_BOOT }) }),
        now: NOW,
        self: FENCE,
      },
      { phase: "Recovered", taint: true },
    ],
    [
      "Suspected, node rebooted on its own → Closed",
      {
        event: condition("a", "True", NEW_BOOT, 3000),
        view: view({
          incident: confirmed("a", 0, { phase: "Suspected" }),
          node: node("a", { bootId: NEW_BOOT }),
        }),
        now: NOW,
        self: FENCE,
      },
      { phase: "Closed", taint: false },
    ],
    [
      "Confirmed, node rebooted before fencing → Closed",
      {
        event: condition("a", "True", NEW_BOOT, 3000),
        view: view({ incident: confirmed("a"), node: node("a", { bootId: NEW_BOOT }) }),
        now: NOW,
        self: FENCE,
      },
      { phase: "Closed", taint: false },
    ],
    [
      "Ready with the incident's own boot (lagging Ready of a dead node) → nothing",
      {
        event: condition("a", "True", BOOT.a, 3000),
        view: view({ incident: fenced({ phase: "Released" }), node: node("a") }),
        now: NOW,
        self: FENCE,
      },
      { ignored: "NotARecovery" },
    ],
    [
      "NotReady → nothing",
      {
        event: condition("a", "False", NEW_BOOT, 3000),
        view: view({ incident: fenced(), node: node("a", { bootId: NEW_BOOT }) }),
        now: NOW,
        self: FENCE,
      },
      { ignored: "NodeNotReady" },
    ],
    [
      "condition from an older boot (reordered) → nothing",
      {
        event: condition("a", "True", "11111111-old", 3000),
        view: view({ incident: fenced(), node: node("a", { bootId: NEW_BOOT }) }),
        now: NOW,
        self: FENCE,
      },
      { ignored: "StaleIncarnation" },
    ],
    [
      "duplicate after Recovered → nothing",
      {
        event: condition("a", "True", NEW_BOOT, 3000),
        view: view({ incident: fenced({ phase: "Recovered" }), node: node("a", { bootId: NEW_BOOT }) }),
        now: NOW,
        self: FENCE,
      },
      { ignored: "PhasePassed" },
    ],
    [
      "during Fencing → wait for the result",
      {
        event: condition("a", "True", NEW_BOOT, 3000),
        view: view({ incident: fenced({ phase: "Fencing" }), node: node("a", { bootId: NEW_BOOT }) }),
        now: NOW,
        self: FENCE,
      },
      { ignored: "FencingInProgress" },
    ],
    [
      "released + powerOnAfterFence → claim, then power on",
      {
        event: releasedEvt,
        view: view({
          incident: fenced({ phase: "Released" }),
          node: node("a"),
          policy: policy({ powerOnAfterFence: true }),
        }),
        now: NOW,
        self: FENCE,
      },
      { powerOn: true },
    ],
    [
      "released, powerOnAfterFence off → node stays off",
      {
        event: releasedEvt,
        view: view({ incident: fenced({ phase: "Released" }), node: node("a") }),
        now: NOW,
        self: FENCE,
      },
      { ignored: "PowerOnDisabled" },
    ],
    [
      "duplicate released after power-on was claimed → nothing",
      {
        event: releasedEvt,
        view: view({
          incident: fenced({ phase: "Released", powerOnRequestedAt: at(2500) }),
          node: node("a"),
          policy: policy({ powerOnAfterFence: true }),
        }),
        now: NOW,
        self: FENCE,
      },
      { ignored: "PowerOnRequested" },
    ],
  ];
  test.each(cases)("%s", (_n, inp, exp) => {
    const d = recover.decide(inp);
    if ("ignored" in exp) {
      expect(d.outcome).toEqual({ kind: "ignored", code: exp.ignored, reason: expect.any(String) });
      expect(d.actions).toEqual([]);
      return;
    }
    if ("powerOn" in exp) {
      expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus", "powerOn"]);
      expect(d.actions[0]).toMatchObject({
        status: { phase: "Released", powerOnRequestedAt: new Date(NOW).toISOString() },
      });
      return;
    }
    const kinds = d.actions.map((a) => a.kind);
    expect(kinds).toEqual(exp.taint ? ["removeTaint", "updateIncidentStatus"] : ["updateIncidentStatus"]);
    expect(d.actions.at(-1)).toMatchObject({
      expectedResourceVersion: inp.view.incident!.metadata.resourceVersion,
      status: { phase: exp.phase, recoveredBootId: NEW_BOOT },
    });
    expect(d.emit[0]).toMatchObject({
      type: EVENT_TYPES.nodeRecovered,
      data: { phase: exp.phase, taintRemoved: exp.taint, previousBootId: BOOT.a },
    });
  });
});
