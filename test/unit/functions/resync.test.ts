// Level-triggered progress, the pure half: what fence, remediate-workloads and recover decide when
// the reconciler re-drives an open incident from its state in the API (no event). Each row
// is one incident state, one Lease and one moment; the expected outcome reads like the spec:
// a live Lease always wins (S3), nothing happens before the step is overdue by
// reconcile.stalledAfterMs, an interrupted round is recorded as failed, and the same
// checks as the event path guard every power action (S3 incarnation, S6, S1).
import { describe, expect, test } from "vitest";
import type { Action, DecideInput, LeaseInfo, Resync } from "../../../core/decision.ts";
import { RELEASE_SLOT_ANNOTATION, type NodeFence, type NodeFenceStatus } from "../../../core/incident.ts";
import type { IgnoreCode, RejectCode } from "../../../core/reasons.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { FenceFailed } from "../../../events/schemas.ts";
import * as fence from "../../../functions/fence/handler.ts";
import * as release from "../../../functions/remediate-workloads/handler.ts";
import * as recover from "../../../functions/recover/handler.ts";
import {
  FENCE,
  NEW_BOOT,
  OTHER_FENCE,
  T0,
  at,
  confirmed,
  incident,
  node,
  markedFencedOff,
  offAttempt,
  policy,
  view,
} from "../../scenarios/fixtures.ts";

/** reconcile.stalledAfterMs in these tests (the default). */
const STALLED = 3_000;

function resyncOf(inc: NodeFence, nowMs: number, lease?: LeaseInfo, nodeBoot?: string) {
  const r: Resync = { kind: "resync", incident: inc.metadata.name, node: inc.spec.nodeName };
  const input: DecideInput<Resync> = {
    event: r,
    view: view({
      incident: inc,
      node: node("a", { ...(nodeBoot ? { bootId: nodeBoot } : {}), ...markedFencedOff(inc) }),
      ...(lease ? { lease } : {}),
    }),
    now: T0 + nowMs,
    self: FENCE,
  };
  return input;
}

const lease = (holder: string, renewedAtMs: number, durationMs = 5_000): LeaseInfo => ({
  holder,
  renewTime: at(renewedAtMs),
  durationMs,
});

const fencing = (round: number, by = OTHER_FENCE.replica, extra: Partial<NodeFenceStatus> = {}) =>
  confirmed("a", 0, {
    phase: "Fencing",
    round,
    fencingBy: by,
    timestamps: { confirmed: at(0), fencing: at(100) },
    ...extra,
  });

const failed = (round: number, retryAtMs: number) =>
  confirmed("a", 0, {
    phase: "FenceFailed",
    round,
    retryNotBefore: at(retryAtMs),
    timestamps: { confirmed: at(0), fencing: at(100), fenceFailed: at(retryAtMs - 500) },
  });

const kinds = (actions: Action[]) => actions.map((a) => a.kind);
const statusWritten = (actions: Action[]) =>
  actions.flatMap((a) => (a.kind === "updateIncidentStatus" ? [a.status] : []))[0];

describe("fence resync: ignored until there is something to do", () => {
  test.each<[string, NodeFence, number, LeaseInfo | undefined, IgnoreCode]>([
    ["Confirmed, not overdue yet", confirmed("a", 0), STALLED - 1, undefined, "NotDue"],
    [
      "Confirmed, a live Lease of another replica",
      confirmed("a", 0),
      10_000,
      lease("fence-1", 9_000),
      "DrivenByOtherReplica",
    ],
    [
      "Fencing, a live Lease of another replica",
      fencing(1),
      10_000,
      lease("fence-1", 9_000),
      "DrivenByOtherReplica",
    ],
    [
      "Fencing, this replica's live Lease",
      fencing(1, FENCE.replica),
      10_000,
      lease(FENCE.replica, 9_000),
      "DrivenByThisReplica",
    ],
    ["FenceFailed, retry not overdue", failed(1, 2_000), 2_000 + STALLED - 1, undefined, "NotDue"],
    ["FenceFailed, last round failed", failed(3, 2_000), 60_000, undefined, "FencingGaveUp"],
    [
      "FencedOff: the release is remediate-workloads'; fence only looks after the Off (nothing seen)",
      incident("a", { phase: "FencedOff" }),
      60_000,
      undefined,
      "NotDue",
    ],
    [
      "Suspected belongs to confirm",
      incident("a", { phase: "Suspected" }),
      60_000,
      undefined,
      "NotThisStage",
    ],
  ])("%s", (_name, inc, nowMs, l, code) => {
    const d = fence.resync(resyncOf(inc, nowMs, l));
    expect(d.outcome).toMatchObject({ kind: "ignored", code });
    expect(d.actions).toEqual([]);
    expect(d.emit).toEqual([]);
  });

  test("a node that booted again is never powered off, however overdue (S3)", () => {
    const d = fence.resync(resyncOf(confirmed("a", 0), 60_000, undefined, NEW_BOOT));
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "StaleIncarnation" });
    expect(d.actions).toEqual([]);
  });
});

describe("fence resync: a stalled incident is driven on", () => {
  test("Confirmed with nobody driving, overdue: round 1 starts under the Lease", () => {
    const d = fence.resync(resyncOf(confirmed("a", 0), STALLED, lease("fence-1", -10_000)));
    expect(d.outcome.kind).toBe("processed");
    expect(kinds(d.actions)).toEqual(["takeLease", "updateIncidentStatus", "powerOff"]);
    expect(statusWritten(d.actions)).toMatchObject({ phase: "Fencing", round: 1, fencingBy: FENCE.replica });
  });

  test("a replica on the incident's node waits a second stalled period, then drives round 1 itself", () => {
    const onA = (nowMs: number) => ({ ...resyncOf(confirmed("a", 0), nowMs), self: { ...FENCE, node: "a" } });
    expect(fence.resync(onA(2 * STALLED - 1)).outcome).toMatchObject({ kind: "ignored", code: "NotDue" });
    const d = fence.resync(onA(2 * STALLED));
    expect(kinds(d.actions)).toEqual(["takeLease", "updateIncidentStatus", "powerOff"]);
    // a replica on another node is due a stalled period earlier
    const onB = { ...resyncOf(confirmed("a", 0), STALLED), self: { ...FENCE, node: "b" } };
    expect(kinds(fence.resync(onB).actions)).toEqual(["takeLease", "updateIncidentStatus", "powerOff"]);
  });

  test("FenceFailed overdue past retryNotBefore: the next round starts, without waiting again", () => {
    const d = fence.resync(resyncOf(failed(1, 2_000), 2_000 + STALLED));
    expect(kinds(d.actions)).toEqual(["takeLease", "updateIncidentStatus", "powerOff"]);
    expect(statusWritten(d.actions)).toMatchObject({ phase: "Fencing", round: 2 });
  });

  test("Fencing whose driver's Lease expired: the round is recorded as interrupted, retried at once", () => {
    const d = fence.resync(resyncOf(fencing(1), 10_000, lease("fence-1", 4_000, 5_000)));
    expect(kinds(d.actions)).toEqual(["updateIncidentStatus"]);
    const st = statusWritten(d.actions)!;
    expect(st).toMatchObject({ phase: "FenceFailed", round: 1, reason: "RoundInterrupted" });
    expect(st.retryNotBefore).toBe(at(10_000));
    expect(st.message).toContain("fence-1");
    expect(d.emit.map((e) => e.type)).toEqual([EVENT_TYPES.fenceFailed]);
    expect(d.emit[0]!.data).toMatchObject({
      round: 1,
      final: false,
      code: "FF_CANCELLED",
    } satisfies Partial<FenceFailed>);
    // the retry itself comes from that fence.failed (or the next resync): no power action here
    expect(d.actions.some((a) => a.kind === "powerOff")).toBe(false);
  });

  test("an interrupted last round is final: no retry is scheduled", () => {
    const d = fence.resync(resyncOf(fencing(3), 10_000));
    const st = statusWritten(d.actions)!;
    expect(st).toMatchObject({ phase: "FenceFailed", round: 3, reason: "RoundInterrupted" });
    expect(st.retryNotBefore).toBeUndefined();
    expect(d.emit[0]!.data).toMatchObject({ final: true });
  });

  test.each<[string, Partial<NodeFenceStatus>, RejectCode]>([
    [
      "confirmed by an untrusted identity (S6)",
      { confirmedBy: "system:serviceaccount:fastfence:detect" },
      "UntrustedConfirmation",
    ],
    ["confirmed below quorum (S2)", { evidence: [] }, "ConfirmationBelowQuorum"],
  ])("an overdue Confirmed incident %s is refused like the event path would", (_n, extra, code) => {
    const d = fence.resync(resyncOf(confirmed("a", 0, extra), 60_000));
    expect(d.outcome).toMatchObject({ kind: "rejected", code });
    expect(d.actions).toEqual([]);
  });

  test("the power-off's result comes back into resync and is recorded (S1: Off read back)", () => {
    const inc = fencing(1, FENCE.replica);
    const d = fence.resync({
      ...resyncOf(inc, 10_000),
      result: { kind: "powerOff", attempts: [offAttempt(1, 9_000)] },
    });
    expect(statusWritten(d.actions)).toMatchObject({ phase: "FencedOff" });
    expect(d.emit.map((e) => e.type)).toEqual([EVENT_TYPES.nodeFenced]);
  });
});

describe("remediate-workloads resync", () => {
  const fencedOff = (proof = true) =>
    confirmed("a", 0, {
      phase: "FencedOff",
      round: 1,
      attempts: proof ? [offAttempt(1, 100)] : [],
      ...(proof ? { powerOffConfirmedAt: at(500) } : {}),
      timestamps: { confirmed: at(0), fencing: at(100), fencedOff: at(500) },
    });
  const inputAt = (inc: NodeFence, nowMs: number) => resyncOf(inc, nowMs);

  test("FencedOff, not overdue: the node.fenced event still has it", () => {
    expect(release.resync(inputAt(fencedOff(), 500 + STALLED - 1)).outcome).toMatchObject({ code: "NotDue" });
  });

  test("FencedOff, overdue: the workloads are released as for node.fenced", () => {
    const d = release.resync(inputAt(fencedOff(), 500 + STALLED));
    expect(kinds(d.actions)).toEqual([
      "setTaint",
      "deleteVmLaunchers",
      "deletePods",
      "deleteVolumeAttachments",
    ]);
  });

  test("FencedOff without a recorded Off read-back releases nothing (S1)", () => {
    const d = release.resync(inputAt(fencedOff(false), 60_000));
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "PowerOffUnproven" });
    expect(d.actions).toEqual([]);
  });

  test.each(["Fencing", "Released"] as const)("%s is not remediate-workloads' to re-drive", (phase) => {
    const d = release.resync(inputAt(incident("a", { phase }), 60_000));
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "NotThisStage" });
  });

  test("the stages declare what they re-drive, and the phases do not overlap", () => {
    // fence also looks after a read-back Off (FencedOff, Released: look-after.pure.ts), writing
    // only FenceFailed; the release of a FencedOff incident is remediate-workloads' alone.
    expect(fence.stage.resyncPhases).toEqual([
      "Confirmed",
      "Fencing",
      "FenceFailed",
      "FencedOff",
      "Released",
    ]);
    expect(release.stage.resyncPhases).toEqual(["FencedOff"]);
    expect(policy().reconcile).toEqual({ intervalMs: 5_000, stalledAfterMs: STALLED });
  });
});

describe("recover resync: an operator's release of a final FenceFailed incident", () => {
  const finalFailed = (annotation?: string, round = 3, retryAtMs?: number) => {
    const inc = confirmed("a", 0, {
      phase: "FenceFailed",
      round,
      ...(retryAtMs !== undefined ? { retryNotBefore: at(retryAtMs) } : {}),
      timestamps: { confirmed: at(0), fencing: at(100), fenceFailed: at(500) },
    });
    if (annotation !== undefined) inc.metadata.annotations = { [RELEASE_SLOT_ANNOTATION]: annotation };
    return inc;
  };

  test("final and released by an operator: Closed with reason SlotReleased, nothing else done (S1)", () => {
    const d = recover.resync(resyncOf(finalFailed("BMC replaced; node off by hand"), 60_000));
    expect(kinds(d.actions)).toEqual(["updateIncidentStatus"]);
    const st = statusWritten(d.actions)!;
    expect(st).toMatchObject({ phase: "Closed", reason: "SlotReleased" });
    expect(st.message).toContain("BMC replaced; node off by hand");
    expect(st.message).toContain("workloads stay");
  });

  test.each<[string, NodeFence]>([
    ["no release requested", finalFailed()],
    ["requested, but a round is still due", finalFailed("now", 1, 30_000)],
  ])("%s: nothing happens", (_n, inc) => {
    const d = recover.resync(resyncOf(inc, 60_000));
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "NotDue" });
    expect(d.actions).toEqual([]);
  });

  test("a round without a retry time (no fencing levels) is final too", () => {
    const d = recover.resync(resyncOf(finalFailed("no BMC for this node", 1), 60_000));
    expect(statusWritten(d.actions)).toMatchObject({ phase: "Closed", reason: "SlotReleased" });
  });

  test("only FenceFailed, observed Confirmed and fenced (FencedOff, Released) incidents are recover's to re-drive", () => {
    expect(recover.stage.resyncPhases).toEqual(["FenceFailed", "Confirmed", "FencedOff", "Released"]);
    const d = recover.resync(resyncOf(fencing(1), 60_000));
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "NotThisStage" });
  });
});
