// An incident's target cannot be bent (finding 1): remediate-workloads releases, and fence
// powers off, only the node and boot the incident was created for (its name and labels),
// and only when the event and the node read for it name the same ones. A spec changed to
// another, healthy node (as the API server allowed before the CRD's transition rules) is
// refused with TargetMismatch: no actions, dead-lettered. Plain data, no servers.
import { describe, expect, test } from "vitest";
import * as remediate from "../../../functions/remediate-workloads/handler.ts";
import * as fence from "../../../functions/fence/handler.ts";
import * as recover from "../../../functions/recover/handler.ts";
import { targetMismatch } from "../../../core/incident-target.ts";
import { NODEFENCE_TARGET_RULES, type NodeFence, type NodeFenceStatus } from "../../../core/incident.ts";
import { crdSchemas } from "../../../core/crdschema.ts";
import { REFUSAL_CODES } from "../../../core/reasons.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import {
  BOOT,
  FENCE,
  T0,
  TRUSTED,
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
/** The incident with its spec pointed elsewhere; name and labels stay the original node's. */
const bent = (inc: NodeFence, spec: Partial<NodeFence["spec"]>): NodeFence => ({
  ...inc,
  spec: { ...inc.spec, ...spec },
});
const NAME = fenced().metadata.name;
const fencedEvt = (data: { node?: string; bootId?: string } = {}, subject = "a") =>
  event(
    EVENT_TYPES.nodeFenced,
    subject,
    {
      incident: NAME,
      node: "a",
      bootId: BOOT.a,
      powerOffConfirmedAt: at(1400),
      round: 1,
      level: 0,
      driver: "redfish",
      attempts: 1,
      ...data,
    },
    { incident: NAME },
  );

describe("targetMismatch", () => {
  test.each([
    ["the incident as created", fenced(), [], undefined],
    ["spec.nodeName bent to b", bent(fenced(), { nodeName: "b" }), [], /created for another node or boot/],
    ["spec.bootId bent", bent(fenced(), { bootId: BOOT.b }), [], /created for another node or boot/],
    [
      "node label differs from the spec",
      { ...fenced(), metadata: { ...fenced().metadata, labels: { "fastfence.io/node": "b" } } },
      [],
      /labelled fastfence.io\/node=b/,
    ],
    ["a claim naming another node", fenced(), [{ from: "x", node: "b" }], /x names node b/],
    ["a claim naming another boot", fenced(), [{ from: "x", bootId: "other" }], /x names boot other/],
    [
      "a claim naming the same node and boot",
      fenced(),
      [{ from: "x", node: "a", bootId: BOOT.a }],
      undefined,
    ],
  ] as const)("%s", (_n, inc, claims, want) => {
    const got = targetMismatch(inc, claims);
    if (want === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(want);
  });
});

describe("remediate-workloads releases only the node the incident was created for", () => {
  const cases: [string, NodeFence, ReturnType<typeof fencedEvt>, ReturnType<typeof node>][] = [
    // the finding: the event and the node read are a's (boot matches), the spec names b
    ["spec.nodeName bent to a healthy node b", bent(fenced(), { nodeName: "b" }), fencedEvt(), node("a")],
    // the node read follows the spec (a view read by spec), the name does not
    [
      "spec.nodeName and bootId bent to b's",
      bent(fenced(), { nodeName: "b", bootId: BOOT.b }),
      fencedEvt(),
      node("b"),
    ],
    ["the event names another node", fenced(), fencedEvt({ node: "b" }), node("a")],
    ["the event names another boot", fenced(), fencedEvt({ bootId: BOOT.b }), node("a")],
    ["the event's subject is another node", fenced(), fencedEvt({}, "b"), node("b")],
  ];
  test.each(cases)("%s → TargetMismatch, nothing released", (_n, inc, ev, n) => {
    const d = remediate.decide({ event: ev, view: view({ node: n, incident: inc }), now: NOW, self: FENCE });
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "TargetMismatch" });
    expect(d.actions).toEqual([]);
    expect(d.emit).toEqual([]);
  });

  test("the incident as created is released", () => {
    const d = remediate.decide({
      event: fencedEvt(),
      view: view({ node: node("a", markedFencedOff(fenced())), incident: fenced() }),
      now: NOW,
      self: FENCE,
    });
    expect(d.outcome.kind).toBe("processed");
    expect(d.actions.every((a) => "node" in a && a.node === "a")).toBe(true);
  });

  test("the resync of a bent incident releases nothing either", () => {
    const inc = bent(fenced({ timestamps: { fencedOff: at(1400) } }), { nodeName: "b" });
    const d = remediate.resync({
      event: { kind: "resync", incident: NAME, node: "b" },
      view: view({ node: node("b"), incident: inc }),
      now: NOW + 3_600_000,
      self: FENCE,
    });
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "TargetMismatch" });
    expect(d.actions).toEqual([]);
  });

  test("TargetMismatch is counted as a refused input", () => {
    expect(REFUSAL_CODES.has("TargetMismatch")).toBe(true);
  });
});

describe("fence powers off only the node the incident was created for", () => {
  const req = (subject = "a", data: { node?: string; bootId?: string } = {}) =>
    event(
      EVENT_TYPES.fenceRequested,
      subject,
      {
        incident: confirmed("a").metadata.name,
        node: "a",
        bootId: BOOT.a,
        confirmedAt: at(0),
        observers: ["b", "c"],
        ...data,
      },
      { incident: confirmed("a").metadata.name },
    );
  test.each([
    [
      "spec bent to b (node read: b, its boot)",
      bent(confirmed("a"), { nodeName: "b", bootId: BOOT.b }),
      req("b", { node: "b", bootId: BOOT.b }),
      node("b"),
    ],
    ["the event names another node than the incident", confirmed("a"), req("a", { node: "b" }), node("a")],
  ] as const)("%s → TargetMismatch, no power action", (_n, inc, ev, n) => {
    const d = fence.decide({
      event: ev,
      view: view({ node: n, incident: inc, trustedConfirmers: TRUSTED }),
      now: 1_000,
      self: FENCE,
    });
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "TargetMismatch" });
    expect(d.actions).toEqual([]);
  });
});

describe("recover ends or powers on only the incident's own node", () => {
  const released = (spec: Partial<NodeFence["spec"]> = {}) =>
    bent(
      fenced({
        phase: "Released",
        released: {
          taint: remediate.TAINT_STRING,
          podsDeleted: 0,
          volumeAttachmentsDeleted: 0,
          vmLaunchersDeleted: 0,
        },
      }),
      spec,
    );
  const releasedEvt = (node = "a") =>
    event(
      EVENT_TYPES.workloadsReleased,
      node,
      {
        incident: NAME,
        node,
        bootId: BOOT.a,
        taint: remediate.TAINT_STRING,
        podsDeleted: 0,
        volumeAttachmentsDeleted: 0,
        vmLaunchersDeleted: 0,
        powerOffConfirmedAt: at(1400),
        releasedAt: at(2000),
      },
      { incident: NAME },
    );
  const powerOn = policy({ powerOnAfterFence: true });
  test.each([
    ["spec bent to b (node and boot)", released({ nodeName: "b", bootId: BOOT.b }), releasedEvt("b")],
    ["the event names another node", released(), releasedEvt("b")],
  ] as const)("power-on: %s → TargetMismatch, nothing powered on", (_n, inc, ev) => {
    const d = recover.decide({
      event: ev,
      view: view({ node: node("b"), incident: inc, policy: powerOn }),
      now: NOW,
      self: FENCE,
    });
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "TargetMismatch" });
    expect(d.actions).toEqual([]);
  });

  test("a condition of another node does not end the incident", () => {
    const d = recover.decide({
      event: condition("b", "True", "b-new-boot", 2000, "bootId"),
      view: view({ node: node("b", { bootId: "b-new-boot" }), incident: released() }),
      now: NOW,
      self: FENCE,
    });
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "TargetMismatch" });
    expect(d.actions).toEqual([]);
  });
});

describe("the CRD refuses a change of the target", () => {
  test("spec carries the transition rules on nodeName and bootId, at the level of spec", () => {
    const spec = crdSchemas().nodeFenceSpec as { "x-kubernetes-validations"?: unknown[] };
    expect(spec["x-kubernetes-validations"]).toEqual(NODEFENCE_TARGET_RULES);
    expect(NODEFENCE_TARGET_RULES.map((r) => r.rule)).toEqual([
      "self.nodeName == oldSelf.nodeName",
      "self.bootId == oldSelf.bootId",
    ]);
  });
});
