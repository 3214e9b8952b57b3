// fence: S6 (acts only on a Confirmed incident written by a trusted confirm identity),
// S3 (stale incarnation, lease), S1 (FencedOff only with an Off read-back), retries.
import { describe, expect, test } from "vitest";
import { decide } from "../../../functions/fence/handler.ts";
import type { DecideInput, View } from "../../../core/decision.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { NodeFenceStatus } from "../../../core/incident.ts";
import type { IgnoreCode, RejectCode } from "../../../core/reasons.ts";
import {
  FENCE,
  NEW_BOOT,
  OTHER_FENCE,
  T0,
  TRUSTED,
  at,
  confirmed,
  event,
  incident,
  node,
  offAttempt,
  policy,
  view,
} from "../../scenarios/fixtures.ts";

const NOW = 1_000;
const req = (name = confirmed("a").metadata.name) =>
  event(
    EVENT_TYPES.fenceRequested,
    "a",
    {
      incident: name,
      node: "a",
      bootId: confirmed("a").spec.bootId,
      confirmedAt: at(0),
      observers: ["b", "c"],
    },
    { incident: name },
  );
const failedEvt = (round: number, final = false) => {
  const name = confirmed("a").metadata.name;
  return event(
    EVENT_TYPES.fenceFailed,
    "a",
    {
      incident: name,
      node: "a",
      bootId: confirmed("a").spec.bootId,
      round,
      reason: "still-on",
      code: "FF_BMC_STILL_ON",
      attempts: [],
      final,
    },
    { incident: name },
  );
};
const input = (v: Partial<View>, ev = req(), nowMs = NOW): DecideInput<FfEvent> => ({
  event: ev,
  view: view({ node: node("a"), trustedConfirmers: TRUSTED, ...v }),
  now: T0 + nowMs,
  self: FENCE,
});

type Expect = { fence: number } | { ignored: IgnoreCode } | { rejected: RejectCode } | { failedFinal: true };
const cases: [string, DecideInput<FfEvent>, Expect][] = [
  [
    "Confirmed by trusted confirm → lease, Fencing write, powerOff",
    input({ incident: confirmed("a") }),
    { fence: 1 },
  ],
  ["event alone, no incident in the API → nothing (S6)", input({}), { ignored: "IncidentNotFound" }],
  [
    "incident confirmedBy an untrusted identity → rejected (S6)",
    input({ incident: confirmed("a", 0, { confirmedBy: "system:serviceaccount:default:evil" }) }),
    { rejected: "UntrustedConfirmation" },
  ],
  [
    "incident Confirmed with one observer only → rejected (S2)",
    input({ incident: confirmed("a", 0, { evidence: [confirmed("a").status!.evidence[0]!] }) }),
    { rejected: "ConfirmationBelowQuorum" },
  ],
  [
    "incident Confirmed without a confirmed timestamp → rejected",
    input({ incident: confirmed("a", 0, { timestamps: { suspected: at(-100) } }) }),
    { rejected: "NoConfirmationTime" },
  ],
  [
    "incident still Suspected (event forged or early) → nothing",
    input({ incident: incident("a", { phase: "Suspected" }) }),
    { ignored: "WrongPhase" },
  ],
  [
    "stale incarnation: node rebooted since the incident → never powered off (S3)",
    input({ incident: confirmed("a"), node: node("a", { bootId: NEW_BOOT }) }),
    { ignored: "StaleIncarnation" },
  ],
  [
    "node object gone → cannot verify incarnation",
    input({ incident: confirmed("a"), node: undefined }),
    { ignored: "NodeNotFound" },
  ],
  [
    "duplicate request while another replica holds the lease → nothing",
    input({
      incident: confirmed("a", 0, { phase: "Fencing", round: 1, fencingBy: OTHER_FENCE.replica }),
      lease: { holder: OTHER_FENCE.replica, renewTime: at(NOW - 1000), durationMs: 15_000 },
    }),
    { ignored: "DrivenByOtherReplica" },
  ],
  [
    "another replica took the lease, incident still Confirmed → nothing (it drives)",
    input({
      incident: confirmed("a"),
      lease: { holder: OTHER_FENCE.replica, renewTime: at(NOW - 100), durationMs: 15_000 },
    }),
    { ignored: "DrivenByOtherReplica" },
  ],
  [
    "expired lease of another replica, incident still Confirmed → fence",
    input({
      incident: confirmed("a"),
      lease: { holder: OTHER_FENCE.replica, renewTime: at(NOW - 20_000), durationMs: 15_000 },
    }),
    { fence: 1 },
  ],
  [
    "holder died (lease expired) → take over the round",
    input({
      incident: confirmed("a", 0, { phase: "Fencing", round: 1, fencingBy: OTHER_FENCE.replica }),
      lease: { holder: OTHER_FENCE.replica, renewTime: at(NOW - 20_000), durationMs: 15_000 },
    }),
    { fence: 1 },
  ],
  [
    "duplicate request after FencedOff → nothing",
    input({ incident: confirmed("a", 0, { phase: "FencedOff" }) }),
    { ignored: "PhasePassed" },
  ],
  [
    "reordered: request after Released → nothing",
    input({ incident: confirmed("a", 0, { phase: "Released" }) }),
    { ignored: "PhasePassed" },
  ],
  [
    "fence.failed round 1 → round 2 (after the backoff)",
    input(
      { incident: confirmed("a", 0, { phase: "FenceFailed", round: 1, retryNotBefore: at(NOW + 500) }) },
      failedEvt(1),
    ),
    { fence: 2 },
  ],
  [
    "old fence.failed of round 1 while at round 2 → nothing",
    input({ incident: confirmed("a", 0, { phase: "FenceFailed", round: 2 }) }, failedEvt(1)),
    { ignored: "StaleRound" },
  ],
  [
    "final fence.failed → nothing more",
    input({ incident: confirmed("a", 0, { phase: "FenceFailed", round: 3 }) }, failedEvt(3, true)),
    { ignored: "FencingGaveUp" },
  ],
  [
    "duplicate fence.requested on FenceFailed → nothing",
    input({ incident: confirmed("a", 0, { phase: "FenceFailed", round: 1 }) }),
    { ignored: "PhasePassed" },
  ],
  [
    "no fencing levels → FenceFailed final",
    input({ incident: confirmed("a"), node: node("a", { labels: {} }) }),
    { failedFinal: true },
  ],
];

describe("fence.decide", () => {
  test.each(cases)("%s", (_n, inp, exp) => {
    const d = decide(inp);
    if ("ignored" in exp || "rejected" in exp) {
      const kind = "ignored" in exp ? "ignored" : "rejected";
      const code = "ignored" in exp ? exp.ignored : exp.rejected;
      expect(d.outcome).toEqual({ kind, code, reason: expect.any(String) });
      expect(d.actions).toEqual([]);
      expect(d.emit).toEqual([]);
      return;
    }
    if ("failedFinal" in exp) {
      expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
      expect(d.emit[0]).toMatchObject({ type: EVENT_TYPES.fenceFailed, data: { final: true } });
      return;
    }
    const kinds = d.actions.map((a) => a.kind);
    expect(kinds.filter((k) => k !== "waitUntil")).toEqual(["takeLease", "updateIncidentStatus", "powerOff"]);
    const upd = d.actions.find((a) => a.kind === "updateIncidentStatus")!;
    expect(upd).toMatchObject({
      expectedResourceVersion: inp.view.incident!.metadata.resourceVersion,
      status: { phase: "Fencing", round: exp.fence, fencingBy: FENCE.replica },
    });
    const power = d.actions.find((a) => a.kind === "powerOff")!;
    expect(power).toMatchObject({ node: "a", round: exp.fence, holder: FENCE.replica });
    expect(d.emit).toEqual([]); // nothing announced before the power-off result
    if (exp.fence === 2) expect(d.actions[0]).toEqual({ kind: "waitUntil", at: T0 + NOW + 500 });
  });
});

// A fence replica on the node it would fence would power itself off mid-round, and the
// round would end only when its Lease expired: it leaves every round to the replicas on the
// other nodes (its reconciler steps in later, when none has: resync.test.ts).
describe("fence.decide on the replica's own node", () => {
  const onA = { ...FENCE, node: "a" };
  const onB = { ...FENCE, node: "b" };
  test.each<[string, DecideInput<FfEvent>]>([
    ["Confirmed: round 1", input({ incident: confirmed("a") })],
    [
      "FenceFailed: the retry",
      input(
        { incident: confirmed("a", 0, { phase: "FenceFailed", round: 1, retryNotBefore: at(NOW + 500) }) },
        failedEvt(1),
      ),
    ],
    [
      "Fencing whose driver's Lease expired: the take-over",
      input({
        incident: confirmed("a", 0, { phase: "Fencing", round: 1, fencingBy: OTHER_FENCE.replica }),
        lease: { holder: OTHER_FENCE.replica, renewTime: at(NOW - 20_000), durationMs: 15_000 },
      }),
    ],
  ])("%s is left to a replica on another node", (_n, inp) => {
    const d = decide({ ...inp, self: onA });
    expect(d.outcome).toEqual({ kind: "ignored", code: "OwnNode", reason: expect.stringContaining("on a") });
    expect(d.actions).toEqual([]);
    expect(d.emit).toEqual([]);
    // the same input on another node's replica drives the round
    const other = decide({ ...inp, self: onB });
    expect(other.actions.map((a) => a.kind)).toContain("powerOff");
  });
});

// The power-off's attempts come back into decide as input.result (the executor's follow-up).
describe("fence.decide on a power-off result (S1)", () => {
  const fencing = (extra: Partial<NodeFenceStatus> = {}) =>
    confirmed("a", 0, { phase: "Fencing", round: 1, fencingBy: FENCE.replica, ...extra });
  const run = (attempts: ReturnType<typeof offAttempt>[], inc = fencing(), p = policy()) =>
    decide({
      event: req(),
      view: view({ incident: inc, node: node("a"), policy: p }),
      now: T0 + 2000,
      self: FENCE,
      result: { kind: "powerOff", attempts },
    });

  test("a result of another kind, or without an incident, is refused", () => {
    const counts = { podsDeleted: 0, volumeAttachmentsDeleted: 0, vmLaunchersDeleted: 0 };
    const released = decide({
      event: req(),
      view: view({ incident: fencing(), node: node("a") }),
      now: T0 + 2000,
      self: FENCE,
      result: { kind: "released", counts },
    });
    expect(released.outcome).toMatchObject({ kind: "rejected", code: "ViewMismatch" });
    expect(released.actions).toEqual([]);
    const noIncident = decide({
      event: req(),
      view: view({ node: node("a") }),
      now: T0 + 2000,
      self: FENCE,
      result: { kind: "powerOff", attempts: [offAttempt(1, 1000)] },
    });
    expect(noIncident.outcome).toMatchObject({ kind: "rejected", code: "ViewMismatch" });
  });

  const table: [string, ReturnType<typeof offAttempt>[], "FencedOff" | "FenceFailed", string?][] = [
    ["read back Off after the command → FencedOff", [offAttempt(1, 1000)], "FencedOff"],
    [
      "level 1 unreachable, level 2 (ipmi) Off → FencedOff",
      [
        offAttempt(1, 1000, {
          result: "unreachable",
          readBackState: undefined,
          readBackAt: undefined,
          commandAt: undefined,
        }),
        offAttempt(1, 1500, { level: 1, driver: "ipmi" }),
      ],
      "FencedOff",
    ],
    [
      "read back PoweringOff → FenceFailed",
      [offAttempt(1, 1000, { result: "still-on", readBackState: "PoweringOff" })],
      "FenceFailed",
      "FF_BMC_STILL_ON",
    ],
    [
      "driver claims off-confirmed but read back On → FenceFailed",
      [offAttempt(1, 1000, { readBackState: "On" })],
      "FenceFailed",
    ],
    [
      "off-confirmed without any read-back → FenceFailed",
      [offAttempt(1, 1000, { readBackState: undefined, readBackAt: undefined })],
      "FenceFailed",
    ],
    [
      "read-back older than the command → FenceFailed",
      [offAttempt(1, 1000, { readBackAt: at(900) })],
      "FenceFailed",
    ],
    [
      "BMC unreachable → FenceFailed",
      [
        offAttempt(1, 1000, {
          result: "unreachable",
          readBackState: undefined,
          errorCode: "FF_BMC_UNREACHABLE",
        }),
      ],
      "FenceFailed",
      "FF_BMC_UNREACHABLE",
    ],
    ["no attempt at all → FenceFailed", [], "FenceFailed", "FF_INTERNAL"],
  ];
  test.each(table)("%s", (_n, attempts, phase, code) => {
    const d = run(attempts);
    // a proven power-off writes the fenced-off fact on the Node first (core/fenced-off.ts), then
    // hands off the node's leaders' Leases (functions/fence/handoff.pure.ts)
    expect(d.actions.map((a) => a.kind)).toEqual(
      phase === "FencedOff"
        ? ["markFencedOff", "updateIncidentStatus", "handOffLeases", "releaseLease"]
        : ["updateIncidentStatus", "releaseLease"],
    );
    if (phase === "FencedOff") expect(d.actions[0]).toMatchObject({ kind: "markFencedOff", node: "a" });
    const upd = d.actions.find((a) => a.kind === "updateIncidentStatus") as Extract<
      (typeof d.actions)[number],
      { kind: "updateIncidentStatus" }
    >;
    expect(upd.status.phase).toBe(phase);
    expect(upd.status.attempts).toHaveLength(attempts.length);
    if (phase === "FencedOff") {
      expect(upd.status.powerOffConfirmedAt).toBeDefined();
      expect(d.emit[0]?.type).toBe(EVENT_TYPES.nodeFenced);
    } else {
      expect(upd.status.powerOffConfirmedAt).toBeUndefined();
      expect(upd.status.message).toContain("workloads stay");
      expect(d.emit[0]).toMatchObject({ type: EVENT_TYPES.fenceFailed, data: { final: false, round: 1 } });
      expect(upd.status.retryNotBefore).toBe(at(2000 + 2000));
      if (code) expect(d.emit[0]).toMatchObject({ data: { code } });
    }
  });

  test("last round failing is final (escalate to an operator)", () => {
    const d = run([offAttempt(3, 1000, { result: "still-on", readBackState: "On" })], fencing({ round: 3 }));
    expect(d.emit[0]).toMatchObject({ type: EVENT_TYPES.fenceFailed, data: { final: true } });
  });
  test("result for an incident another replica took over → not recorded", () => {
    const d = run([offAttempt(1, 1000)], fencing({ fencingBy: "fence-9" }));
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "DrivenByOtherReplica" });
  });
  test("result after the incident left Fencing → not recorded", () => {
    expect(run([offAttempt(1, 1000)], fencing({ phase: "Closed" })).outcome).toMatchObject({
      kind: "ignored",
      code: "PhasePassed",
    });
  });
});
