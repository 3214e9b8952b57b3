// fence's last look before an off command (issue 18): the pure verdict on what the fencing
// replica's own probe and reads saw, the plan a round's powerOff carries, and how a round the
// look abandoned is recorded (FenceFailed with the reason; nothing powered off, nothing
// released), and recover closing the incident of a node the look found back.
import { describe, expect, test } from "vitest";
import { decide, locateResync } from "../../../functions/fence/handler.ts";
import { resync as recoverResync, resyncWants } from "../../../functions/recover/resync.pure.ts";
import {
  heartbeatState,
  lastLook,
  lookPlan,
  type LookSeen,
} from "../../../functions/fence/last-look.pure.ts";
import type { Action, LastLookPlan, NodeInfo, View } from "../../../core/decision.ts";
import {
  RELEASE_SLOT_ANNOTATION,
  type Attempt,
  type NodeFence,
  type NodeFenceStatus,
} from "../../../core/incident.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import {
  FENCE,
  TRUSTED,
  T0,
  at,
  confirmed,
  event,
  node,
  offAttempt,
  policy,
  view,
} from "../../scenarios/fixtures.ts";

const BOOT_A = confirmed("a").spec.bootId;
const plan = (extra: Partial<LastLookPlan> = {}): LastLookPlan => ({
  node: "a",
  bootId: BOOT_A,
  probe: { host: "10.0.0.1", port: 10250, timeoutMs: 250 },
  heartbeatLease: "fastfence-alive-a",
  baseline: { resourceVersion: "7", renewTime: at(-500) },
  confirmedAt: at(0),
  maxClockSkewMs: 2000,
  ...extra,
});
const dead: LookSeen = {
  probe: "missed",
  lease: { resourceVersion: "7", renewTime: at(-500) },
  node: { bootId: BOOT_A, ready: "Unknown" },
};

describe("heartbeatState: renewed since the incident began", () => {
  const cases: [string, LookSeen["lease"], Partial<LastLookPlan>, ReturnType<typeof heartbeatState>][] = [
    ["unchanged since the round started, renewed before the suspicion → silent", dead.lease, {}, "silent"],
    [
      "a new resourceVersion since the round started (own timeline) → renewed",
      { resourceVersion: "8", renewTime: at(-400) },
      {},
      "renewed",
    ],
    [
      "created since the round started → renewed",
      { resourceVersion: "9" },
      { baseline: "absent" },
      "renewed",
    ],
    [
      "no baseline (the round's view did not read the Lease) → only rule (b) applies",
      { resourceVersion: "9", renewTime: at(-500) },
      { baseline: undefined },
      "silent",
    ],
    ["absent now and then → silent", undefined, { baseline: "absent" }, "silent"],
    ["not read in time → unread, never renewed", "unread", {}, "unread"],
    [
      "renewTime after the confirmation beyond the skew bound → renewed",
      { resourceVersion: "7", renewTime: at(2001) },
      {},
      "renewed",
    ],
    [
      "renewTime after the confirmation within the skew bound → silent",
      { resourceVersion: "7", renewTime: at(2000) },
      {},
      "silent",
    ],
    [
      "no confirmation time known → only the own-timeline rule",
      { resourceVersion: "7", renewTime: at(9000) },
      { confirmedAt: "" },
      "silent",
    ],
  ];
  test.each(cases)("%s", (_n, lease, p, want) => expect(heartbeatState(plan(p), lease)).toBe(want));
});

describe("lastLook: go, or abandon before the off command", () => {
  test("probe missed, heartbeat silent → go (a failed look is still unreachable)", () => {
    expect(lastLook(plan(), dead, 0)).toEqual({ go: true, heartbeat: "silent" });
    expect(lastLook(plan(), { probe: "missed", lease: "unread", node: "unread" }, 1).go).toBe(true);
    expect(lastLook(plan({ probe: undefined }), { ...dead, probe: "none" }, 0).go).toBe(true);
  });
  test("the probe answers → NodeResponding, not back while the heartbeat is silent", () => {
    const v = lastLook(plan(), { ...dead, probe: "answered", node: { bootId: BOOT_A, ready: "True" } }, 0);
    expect(v).toMatchObject({
      go: false,
      look: { reason: "NodeResponding", probe: "answered", back: false },
    });
    if (!v.go) expect(v.message).toContain("answered its probe at 10.0.0.1:10250");
  });
  test("heartbeat renewed with the incident's boot and Ready → back", () => {
    const seen: LookSeen = {
      probe: "missed",
      lease: { resourceVersion: "8" },
      node: { bootId: BOOT_A, ready: "True" },
    };
    expect(lastLook(plan(), seen, 1)).toMatchObject({
      go: false,
      look: { reason: "NodeResponding", heartbeat: "renewed", ready: "True", bootId: BOOT_A, back: true },
    });
  });
  test("heartbeat renewed but not Ready, or the Node unread → responding, not back", () => {
    const renewed = { resourceVersion: "8" };
    for (const n of [{ bootId: BOOT_A, ready: "False" as const }, "unread" as const]) {
      expect(lastLook(plan(), { probe: "missed", lease: renewed, node: n }, 0)).toMatchObject({
        go: false,
        look: { reason: "NodeResponding", back: false },
      });
    }
  });
  test("another boot ID now → NodeRebooted, even when nothing answers (S3)", () => {
    expect(lastLook(plan(), { ...dead, node: { bootId: "new-boot", ready: "False" } }, 0)).toMatchObject({
      go: false,
      look: { reason: "NodeRebooted", back: false },
    });
  });
});

describe("the plan a round carries", () => {
  const ev = (name: string) =>
    event(
      EVENT_TYPES.fenceRequested,
      "a",
      { incident: name, node: "a", bootId: BOOT_A, confirmedAt: at(0), observers: ["b", "c"] },
      { incident: name },
    );
  test("probe address of the node (policy port filling in), baseline Lease, confirmation, skew bound", () => {
    const inc = confirmed("a");
    const d = decide({
      event: ev(inc.metadata.name),
      view: view({
        incident: inc,
        node: node("a", { probeAddress: { host: "10.0.0.1" } }),
        heartbeat: { resourceVersion: "7", renewTime: at(-500) },
        trustedConfirmers: TRUSTED,
      }),
      now: T0 + 1000,
      self: FENCE,
    });
    const off = d.actions.find((a): a is Extract<Action, { kind: "powerOff" }> => a.kind === "powerOff")!;
    const p = policy();
    expect(off.look).toEqual({
      node: "a",
      bootId: BOOT_A,
      probe: { host: "10.0.0.1", port: p.probe.port, timeoutMs: p.probe.timeoutMs },
      heartbeatLease: "fastfence-alive-a",
      baseline: { resourceVersion: "7", renewTime: at(-500) },
      confirmedAt: at(0),
      maxClockSkewMs: p.corroboration.maxClockSkewMs,
    });
    // the annotation's port wins over the policy's
    const annotated = lookPlan(
      inc,
      inc.status!,
      node("a", { probeAddress: { host: "127.0.0.1", port: 4000 } }),
      view({}),
    );
    expect(annotated.probe).toMatchObject({ host: "127.0.0.1", port: 4000 });
    expect(lookPlan(inc, inc.status!, node("a"), view({})).probe).toBeUndefined();
    // the re-drive reads the baseline too (a round the reconciler starts looks the same)
    expect(locateResync({ kind: "resync", incident: inc.metadata.name, node: "a" }).heartbeatLease).toBe(
      true,
    );
  });

  test("an incident suspected long before (a partition the veto saw) dates the silence from its confirmation", () => {
    // suspected 60 s before confirmation, the node renewing meanwhile: not a renewal since
    const inc = confirmed("a", 0, { timestamps: { suspected: at(-60_000), confirmed: at(0) } });
    const plan = lookPlan(inc, inc.status!, node("a"), view({ heartbeat: { resourceVersion: "7" } }));
    expect(plan.confirmedAt).toBe(at(0));
    expect(heartbeatState(plan, { resourceVersion: "7", renewTime: at(-1_000) })).toBe("silent");
  });

  test("an operator's request takes the last look too: a node that answers is not powered off", () => {
    const inc = confirmed("a", 0, { reason: "OperatorRequested", evidence: [] });
    inc.spec.operatorRequest = { by: "alice", reason: "disk errors", at: at(0) };
    const d = decide({
      event: ev(inc.metadata.name),
      view: view({
        incident: inc,
        node: node("a", { probeAddress: { host: "10.0.0.1" } }),
        trustedConfirmers: TRUSTED,
      }),
      now: T0 + 1000,
      self: FENCE,
    });
    const off = d.actions.find((a): a is Extract<Action, { kind: "powerOff" }> => a.kind === "powerOff");
    expect(off).toBeDefined();
    expect(off!.look).toMatchObject({ node: "a", probe: { host: "10.0.0.1" } });
  });
});

describe("a round the last look abandoned", () => {
  const fencing = (extra: Partial<NodeFenceStatus> = {}) =>
    confirmed("a", 0, { phase: "Fencing", round: 1, fencingBy: FENCE.replica, ...extra });
  const abandoned = (
    back: boolean,
    reason: "NodeResponding" | "NodeRebooted" = "NodeResponding",
  ): Attempt => ({
    ...offAttempt(1, 1000, { result: "abandoned", message: "last look: a answered" }),
    commandAt: undefined,
    readBackState: undefined,
    readBackAt: undefined,
    lastLook: { reason, probe: "answered", heartbeat: back ? "renewed" : "silent", back },
  });
  const run = (attempts: Attempt[], inc = fencing()) =>
    decide({
      event: event(
        EVENT_TYPES.fenceRequested,
        "a",
        { incident: inc.metadata.name, node: "a", bootId: BOOT_A, confirmedAt: at(0), observers: ["b", "c"] },
        { incident: inc.metadata.name },
      ),
      view: view({ incident: inc, node: node("a") }),
      now: T0 + 2000,
      self: FENCE,
      result: { kind: "powerOff", attempts },
    });
  const statusOf = (d: ReturnType<typeof run>) =>
    (
      d.actions.find((a) => a.kind === "updateIncidentStatus") as Extract<
        Action,
        { kind: "updateIncidentStatus" }
      >
    ).status;

  test("the node is back → FenceFailed NodeResponding saying recover closes it; Lease released; nothing released (S1)", () => {
    const d = run([abandoned(true)]);
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus", "releaseLease"]);
    expect(statusOf(d)).toMatchObject({ phase: "FenceFailed", reason: "NodeResponding" });
    expect(statusOf(d).message).toContain("recover closes the incident");
    expect(statusOf(d).powerOffConfirmedAt).toBeUndefined();
    expect(statusOf(d).attempts.at(-1)).toMatchObject({ result: "abandoned", lastLook: { back: true } });
  });
  test("responding but not back → FenceFailed NodeResponding, retried after the backoff (the next round looks again)", () => {
    const d = run([abandoned(false)]);
    expect(statusOf(d)).toMatchObject({
      phase: "FenceFailed",
      reason: "NodeResponding",
      retryNotBefore: at(4000),
    });
    expect(d.emit[0]).toMatchObject({
      type: EVENT_TYPES.fenceFailed,
      data: { code: "FF_NODE_RESPONDING", final: false },
    });
  });
  test("after a level that failed, the look abandoning the next level still ends the round unpowered", () => {
    const failed = offAttempt(1, 500, {
      result: "unreachable",
      commandAt: undefined,
      readBackState: undefined,
      readBackAt: undefined,
    });
    expect(statusOf(run([failed, abandoned(false, "NodeRebooted")]))).toMatchObject({
      phase: "FenceFailed",
      reason: "NodeRebooted",
    });
  });
  test("the last round abandoned is final, with the reason", () => {
    const d = run([abandoned(false)], fencing({ round: 3 }));
    expect(statusOf(d)).toMatchObject({ phase: "FenceFailed", reason: "NodeResponding" });
    expect(d.emit[0]).toMatchObject({ data: { final: true } });
  });
  test("an Off read back wins over a later abandon record (cannot happen, but S1 decides)", () => {
    expect(statusOf(run([offAttempt(1, 1000), abandoned(true)])).phase).toBe("FencedOff");
  });
});

describe("recover closes an incident whose node the last look found back", () => {
  const looked = (back: boolean): Attempt => ({
    ...offAttempt(1, 1000, { result: "abandoned", message: "last look: a answered" }),
    commandAt: undefined,
    readBackState: undefined,
    readBackAt: undefined,
    lastLook: { reason: "NodeResponding", probe: "answered", heartbeat: back ? "renewed" : "silent", back },
  });
  const failed = (back: boolean, reason = "NodeResponding") =>
    confirmed("a", 0, {
      phase: "FenceFailed",
      round: 1,
      reason,
      attempts: [looked(back)],
      retryNotBefore: at(3000),
    });
  const run = (inc: ReturnType<typeof failed>, n = node("a", { ready: "True" })) =>
    recoverResync({
      event: { kind: "resync", incident: inc.metadata.name, node: "a" },
      view: view({ incident: inc, node: n }),
      now: T0 + 2500,
      self: FENCE,
    });
  test("back in the look and Ready with the incident's boot now → Closed NodeResponding, nothing else", () => {
    const inc = failed(true);
    expect(resyncWants(inc)).toBe(true);
    const d = run(inc);
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect((d.actions[0] as Extract<Action, { kind: "updateIncidentStatus" }>).status).toMatchObject({
      phase: "Closed",
      reason: "NodeResponding",
    });
  });
  test("not back in the look, or not Ready now → left to fence's next round", () => {
    expect(run(failed(false)).outcome).toMatchObject({ kind: "ignored", code: "NotDue" });
    expect(run(failed(true), node("a", { ready: "Unknown" })).outcome).toMatchObject({
      kind: "ignored",
      code: "NotDue",
    });
    // the attempts (fence's own) decide, not the free-text reason
    expect(run(failed(true, "SomethingElse")).actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(resyncWants(failed(false))).toBe(true); // read: its node may be back with a new boot
  });
  test("Ready with another boot → Recovered (fence never powers off a later incarnation)", () => {
    const d = run(failed(true), node("a", { ready: "True", bootId: "other" }));
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect((d.actions[0] as Extract<Action, { kind: "updateIncidentStatus" }>).status).toMatchObject({
      phase: "Recovered",
      recoveredBootId: "other",
    });
  });
});

describe("recover closes an incident whose every round the last look abandoned, once the node is back", () => {
  // Chaos seeds 282-284: a node answering its probe while still starting (not Ready, no
  // heartbeat yet) had its three rounds abandoned within a second and none of the looks found
  // it back; its final FenceFailed kept the storm-guard slot and blocked another node's crash.
  const looked = (round: number, startMs: number): Attempt => ({
    ...offAttempt(round, startMs, { result: "abandoned", message: "last look: a answered" }),
    commandAt: undefined,
    readBackState: undefined,
    readBackAt: undefined,
    lastLook: { reason: "NodeResponding", probe: "answered", heartbeat: "silent", back: false },
  });
  const spent = (extra: Partial<NodeFenceStatus> = {}) =>
    confirmed("a", 0, {
      phase: "FenceFailed",
      round: 3,
      reason: "NodeResponding",
      attempts: [looked(1, 100), looked(2, 600), looked(3, 1100)],
      ...extra,
    });
  const SKEW = 2_000; // the default corroboration.maxClockSkewMs
  const renewed = (ms: number) => ({ resourceVersion: "9", renewTime: at(ms) });
  const run = (inc: NodeFence, opts: { n?: NodeInfo; heartbeat?: View["heartbeat"] | null } = {}) =>
    recoverResync({
      event: { kind: "resync", incident: inc.metadata.name, node: "a" },
      view: view({
        incident: inc,
        node: opts.n ?? node("a", { ready: "True" }),
        ...(opts.heartbeat === null ? {} : { heartbeat: opts.heartbeat ?? renewed(SKEW + 500) }),
      }),
      now: T0 + 10_000,
      self: FENCE,
    });
  const phaseOf = (d: ReturnType<typeof run>) =>
    (d.actions[0] as Extract<Action, { kind: "updateIncidentStatus" }> | undefined)?.status;

  test("Ready with the incident's boot, heartbeat renewed after the confirmation → Closed NodeResponding, nothing else", () => {
    const d = run(spent());
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(phaseOf(d)).toMatchObject({ phase: "Closed", reason: "NodeResponding" });
    expect(phaseOf(d)!.message).toContain("each of its 3 rounds was abandoned before any off command");
  });

  test("not back by recover's own read → NotDue: not Ready, no Lease, or renewed only before the confirmation (within the skew bound)", () => {
    for (const d of [
      run(spent(), { n: node("a", { ready: "Unknown" }) }),
      run(spent(), { heartbeat: null }),
      run(spent(), { heartbeat: "absent" }),
      run(spent(), { heartbeat: renewed(SKEW) }), // not later than confirmed + skew
      run(spent(), { heartbeat: renewed(-5_000) }), // the dead node's last renewal
    ])
      expect(d.outcome).toMatchObject({ kind: "ignored", code: "NotDue" });
  });

  test("a round that sent an off command, or released workloads → never closed this way (S1: an operator decides)", () => {
    const timedOut = { ...offAttempt(1, 100), result: "timeout" as const };
    expect(run(spent({ attempts: [timedOut, looked(2, 600), looked(3, 1100)] })).outcome).toMatchObject({
      kind: "ignored",
      code: "NotDue",
    });
    const released = { taint: at(900), podsDeleted: 1, volumeAttachmentsDeleted: 0, vmLaunchersDeleted: 0 };
    expect(run(spent({ released })).actions).toEqual([]);
  });

  test("not back, with an operator's release-slot request → the slot is released (the request is not lost)", () => {
    const inc = spent();
    inc.metadata.annotations = { [RELEASE_SLOT_ANNOTATION]: "node-a is being repaired" };
    const d = run(inc, { n: node("a", { ready: "Unknown" }) });
    expect(phaseOf(d)).toMatchObject({ phase: "Closed", reason: "SlotReleased" });
  });
});
