// The real stage executor (infra/runtime/stage-executor.ts) over in-memory adapters with
// the real adapters' guards (test/scenarios/memory-adapters.ts): it reads the view a stage
// asks for, runs the actions in order, emits only after every action (follow-ups included)
// succeeded, feeds power-off attempts and release counts to the follow-up decisions, and on
// a lost guarded write re-reads and decides again at most MAX_REDECIDE times. Races are
// staged deterministically: another replica's whole delivery (or another writer's change)
// runs in a hook between this replica's read and its write. Assertions are on the API state
// left behind, the adapter calls in order and the emitted events. No servers, no timers
// beyond a few milliseconds.
import { describe, expect, test } from "vitest";
import { FastfenceError } from "../../../core/errors.ts";
import {
  fenceLeaseName,
  OUT_OF_SERVICE_TAINT,
  outgoing,
  processed,
  type DecideInput,
  type Self,
  type Decision,
} from "../../../core/decision.ts";
import { incidentName, statusOf, transition, type Attempt, type NodeFence } from "../../../core/incident.ts";
import { ROUND_RECORD_MARGIN_MS, roundDeadline, type FencingPolicySpec } from "../../../core/policy.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import type { NodeSuspected } from "../../../events/schemas.ts";
import type { PureStage } from "../../../functions/contract.ts";
import * as confirm from "../../../functions/confirm/handler.ts";
import * as detect from "../../../functions/detect/handler.ts";
import * as fence from "../../../functions/fence/handler.ts";
import * as recover from "../../../functions/recover/handler.ts";
import * as remediate from "../../../functions/remediate-workloads/handler.ts";
import { KubeApiError } from "../../../infra/kube/client.ts";
import {
  MAX_REDECIDE,
  stageHandler as executorHandler,
  stageRunner,
} from "../../../infra/runtime/stage-executor.ts";
import {
  BOOT,
  CLUSTER3,
  CONFIRM,
  FENCE,
  NEW_BOOT,
  OTHER_FENCE,
  T0,
  TRUSTED,
  at,
  condition,
  confirmed,
  event,
  evidence,
  incident,
  node,
  keyOf,
  observed,
  offAttempt,
  policy,
  suspected,
} from "../../scenarios/fixtures.ts";
import {
  MemoryCluster,
  MemoryPower,
  conflict,
  handlerContext,
  memoryAdapters,
  TestClock,
  type Op,
} from "../../scenarios/memory-adapters.ts";

const NAME = incidentName("a", BOOT.a);
const LEASE = fenceLeaseName("a");
const NOW = T0 + 1000;
/** Just past the fencing Lease the fence stage takes (the policy's timeouts.leaseDurationMs). */
const PAST_LEASE = policy().timeouts.leaseDurationMs + 1000;
const TAINT = `+${OUT_OF_SERVICE_TAINT.key}`;
const UNTAINT = `-${OUT_OF_SERVICE_TAINT.key}`;

function world(opts: { policy?: FencingPolicySpec } = {}) {
  const clock = new TestClock(NOW);
  const c = new MemoryCluster({ policy: opts.policy ?? policy(), nodes: CLUSTER3(), now: () => clock.now() });
  // every node's event source has published its key on its heartbeat Lease
  for (const n of ["a", "b", "c"]) c.publishObserver(n, keyOf(n).annotation, NOW);
  const power = new MemoryPower(c, clock);
  const ad = memoryAdapters(c, { power });
  const abort = new AbortController();
  const ctx = handlerContext(clock, abort.signal);
  return { c, clock, power, ad, abort, ctx };
}
type World = ReturnType<typeof world>;

// The stages wired as app/host.ts wires them (discovery off).
const WORLD = { trustedConfirmers: TRUSTED };
const stageHandler = (stage: PureStage, ad: World["ad"], self: Self) =>
  executorHandler(stage, ad, self, WORLD);
const fenceHandler = (w: World, self = FENCE) => stageHandler(fence.stage, w.ad, self);
const confirmHandler = (w: World) => stageHandler(confirm.stage, w.ad, CONFIRM);
const remediateHandler = (w: World, self = FENCE) => stageHandler(remediate.stage, w.ad, self);
const recoverHandler = (w: World) => stageHandler(recover.stage, w.ad, FENCE);

const fenceRequest = () =>
  event(
    EVENT_TYPES.fenceRequested,
    "a",
    { incident: NAME, node: "a", bootId: BOOT.a, confirmedAt: at(0), observers: ["b", "c"] },
    { incident: NAME },
  );
const fenceFailedEvent = (round: number) =>
  event(
    EVENT_TYPES.fenceFailed,
    "a",
    {
      incident: NAME,
      node: "a",
      bootId: BOOT.a,
      round,
      reason: "still-on",
      code: "FF_BMC_STILL_ON",
      attempts: [],
      final: false,
    },
    { incident: NAME },
  );
const nodeFencedEvent = () =>
  event(
    EVENT_TYPES.nodeFenced,
    "a",
    {
      incident: NAME,
      node: "a",
      bootId: BOOT.a,
      powerOffConfirmedAt: at(400),
      round: 1,
      level: 0,
      driver: "redfish",
      attempts: 1,
    },
    { incident: NAME },
  );

/** A Suspected incident with b's probe evidence: a suspicion from c makes the quorum. */
const suspectedByB = () =>
  incident("a", {
    phase: "Suspected",
    timestamps: { suspected: at(900) },
    evidence: [evidence("b", "a", 900)],
  });
const fencedOff = (): NodeFence =>
  confirmed("a", 0, {
    phase: "FencedOff",
    round: 1,
    fencingBy: FENCE.replica,
    attempts: [offAttempt(1, 0)],
    powerOffConfirmedAt: at(400),
  });

/** Adapter calls that change something, in order; the BMC session warm-up (fire and forget) left out. */
const writes = (w: World) => w.c.effects().filter((e) => !e.startsWith("power.prepare"));
const types = (emit: readonly { type: string }[]) => emit.map((e) => e.type);
const tick = () => new Promise((r) => setTimeout(r, 0));
const serverError = (what: string) =>
  new KubeApiError(500, what, { message: "etcdserver: timeout" }, undefined);

describe("reads the view the stage asks for", () => {
  test("a screened-out observation reads only the policy", async () => {
    const w = world();
    const h = stageHandler(detect.stage, w.ad, CONFIRM);
    const r = await h(observed("b", "a", 1, 1000), w.ctx);
    expect(r).toEqual({ outcome: expect.objectContaining({ kind: "ignored" }), emit: [] });
    expect(w.c.journal.map((e) => e.op)).toEqual(["policy.get"]);
  });

  test.each([
    {
      name: "below quorum: open incidents are not listed",
      seed: false,
      from: "b",
      lists: 0,
      phase: "Suspected",
    },
    {
      name: "quorum: the guards list open incidents once",
      seed: true,
      from: "c",
      lists: 1,
      phase: "Confirmed",
    },
  ])("confirm, $name", async ({ seed, from, lists, phase }) => {
    const w = world();
    if (seed) w.c.seedIncident(suspectedByB());
    await confirmHandler(w)(suspected(from, "a", 1000), w.ctx);
    expect(w.c.count("nodes.list")).toBe(1); // always, once: the ring check of the evidence
    expect(w.c.count("incidents.listOpen")).toBe(lists);
    expect(w.c.count("kube.listLeases")).toBe(1); // the observers' keys and heartbeats
    // the kubelet Lease, and with the cluster lists the admission ledger
    expect(w.c.count("kube.readLease")).toBe(1 + lists);
    expect(w.c.incident(NAME)?.status?.phase).toBe(phase);
  });
});

describe("copies of one suspicion (every detect replica forwards the same evidence)", () => {
  const copy = (e: FfEvent, change: Partial<FfEvent> = {}): FfEvent => ({
    ...e,
    id: `${e.id}-copy`,
    source: "/fastfence/detect/replica-1",
    ...change,
  });

  test("a copy of a suspicion this replica already wrote is answered without reading the view", async () => {
    const w = world();
    const h = confirmHandler(w);
    const s = suspected("b", "a", 1000);
    expect((await h(s, w.ctx)).outcome.kind).toBe("processed");
    const before = w.c.journal.length;
    const r = await h(copy(s), w.ctx);
    expect(r.outcome).toMatchObject({ kind: "ignored", code: "DuplicateEvidence" });
    expect(w.c.journal.slice(before).map((e) => e.op)).toEqual(["policy.get"]);
  });

  test("a copy with another signature is decided in full, and refused", async () => {
    const w = world();
    const h = confirmHandler(w);
    const s = suspected("b", "a", 1000);
    await h(s, w.ctx);
    const d = s.data as NodeSuspected;
    const forged = copy(s, {
      data: {
        ...d,
        evidence: {
          ...d.evidence,
          proof: { ...d.evidence.proof!, sig: Buffer.alloc(64).toString("base64") },
        },
      },
    });
    expect((await h(forged, w.ctx)).outcome).toMatchObject({ kind: "rejected", code: "BadSignature" });
  });

  test("a copy dated in the future is decided in full, and refused", async () => {
    const w = world();
    const h = confirmHandler(w);
    const s = suspected("b", "a", 1000);
    await h(s, w.ctx);
    const future = copy(s, { time: at(1000 + 60_000) });
    expect((await h(future, w.ctx)).outcome).toMatchObject({ kind: "rejected", code: "FutureTimestamp" });
  });

  test("a copy after the evidence window is decided in full", async () => {
    const w = world();
    const h = confirmHandler(w);
    const s = suspected("b", "a", 1000);
    await h(s, w.ctx);
    w.clock.advance(policy().corroboration.evidenceWindowMs + 1);
    const before = w.c.journal.length;
    const r = await h(copy(s), w.ctx);
    expect(r.outcome).not.toMatchObject({
      code: "DuplicateEvidence",
      reason: expect.stringContaining("this replica"),
    });
    expect(w.c.journal.length - before).toBeGreaterThan(1);
  });
});

describe("the admission ledger: two confirm replicas confirming two nodes at once (S4)", () => {
  // One slot (maxConcurrentFenced 1, storm guard only): a and b each have one observer's
  // evidence; c's suspicions of a and of b each complete a quorum.
  const oneSlot = () =>
    world({
      policy: policy({
        controlPlane: { protectEtcdQuorum: false },
        stormGuard: { maxConcurrentFenced: 1, maxFraction: 1 },
      }),
    });
  const seed = (w: World) => {
    w.c.seedIncident(suspectedByB());
    w.c.seedIncident(
      incident("b", {
        phase: "Suspected",
        timestamps: { suspected: at(900) },
        evidence: [evidence("a", "b", 900)],
      }),
    );
  };
  const confirmAs = (w: World, replica: string) => stageHandler(confirm.stage, w.ad, { ...CONFIRM, replica });
  const B_NAME = incidentName("b", BOOT.b);
  const phase = (w: World, name: string) => w.c.incident(name)?.status?.phase;
  const ofA = () => suspected("c", "a", 1000);
  const ofB = () => suspected("c", "b", 1000);
  /**
   * `outer` decides `first`; just before its first call of `op`, `inner`'s whole delivery
   * of `second` runs. Both results.
   */
  const interleaved = async (
    w: World,
    op: Op,
    outer: string,
    first: FfEvent,
    inner: string,
    second: FfEvent,
  ) => {
    let innerOut: Awaited<ReturnType<ReturnType<typeof confirmAs>>> | undefined;
    w.c.before(op, async () => {
      innerOut = await confirmAs(w, inner)(second, w.ctx);
    });
    const outerOut = await confirmAs(w, outer)(first, w.ctx);
    return { outer: outerOut, inner: innerOut! };
  };

  test("the second decides after the first's admission: it sees the slot taken and blocks", async () => {
    const w = oneSlot();
    seed(w);
    // confirm-1's whole delivery (b) runs after confirm-0 read its view (a), before its ledger write.
    const r = await interleaved(w, "kube.writeLease", "confirm-0", ofA(), "confirm-1", ofB());
    expect(types(r.inner.emit)).toEqual([EVENT_TYPES.fenceRequested]);
    expect(phase(w, B_NAME)).toBe("Confirmed");
    expect(types(r.outer.emit)).toEqual([EVENT_TYPES.incidentBlocked]);
    expect(phase(w, NAME)).toBe("Blocked");
    expect(w.c.incident(NAME)?.status?.reason).toBe("StormGuard");
    expect(writes(w).filter((e) => e.startsWith("kube.writeLease"))).toEqual([
      "kube.writeLease create fastfence-admissions",
      "kube.writeLease create fastfence-admissions ✗409", // confirm-0 decided on the empty ledger
    ]);
  });

  test("the first took its slot but its Confirmed write has not landed: the second counts the slot and blocks", async () => {
    const w = oneSlot();
    seed(w);
    // confirm-0's whole delivery (a) runs after confirm-1 wrote the ledger (b), before its Confirmed write.
    const r = await interleaved(w, "incidents.writeStatus", "confirm-1", ofB(), "confirm-0", ofA());
    expect(types(r.outer.emit)).toEqual([EVENT_TYPES.fenceRequested]);
    expect(phase(w, B_NAME)).toBe("Confirmed");
    expect(types(r.inner.emit)).toEqual([EVENT_TYPES.incidentBlocked]);
    expect(phase(w, NAME)).toBe("Blocked");
  });

  test("both decide on the same ledger at the same moment: one write wins, the other re-decides and blocks", async () => {
    const w = oneSlot();
    seed(w);
    const [ra, rb] = await Promise.all([
      confirmAs(w, "confirm-0")(ofA(), w.ctx),
      confirmAs(w, "confirm-1")(ofB(), w.ctx),
    ]);
    const emitted = [...types(ra.emit), ...types(rb.emit)].sort();
    expect(emitted).toEqual([EVENT_TYPES.fenceRequested, EVENT_TYPES.incidentBlocked].sort());
    expect([phase(w, NAME), phase(w, B_NAME)].sort()).toEqual(["Blocked", "Confirmed"]);
  });

  test("the etcd-quorum rule on its own (3 control-plane nodes, storm guard wide open): one Confirmed, one Blocked", async () => {
    const w = world({ policy: policy({ stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 } }) });
    seed(w);
    const r = await interleaved(w, "incidents.writeStatus", "confirm-1", ofB(), "confirm-0", ofA());
    expect(types(r.outer.emit)).toEqual([EVENT_TYPES.fenceRequested]);
    expect(types(r.inner.emit)).toEqual([EVENT_TYPES.incidentBlocked]);
    expect(w.c.incident(NAME)?.status?.reason).toBe("ControlPlaneQuorum");
  });

  test("a slot whose incident closed is free again after the evidence window: the next confirmation drops it", async () => {
    const w = oneSlot();
    seed(w);
    await confirmAs(w, "confirm-1")(ofB(), w.ctx);
    w.c.externalWrite(B_NAME, (st) => ({ ...st, phase: "Closed" }));
    const later = 1000 + policy().corroboration.evidenceWindowMs + 1;
    w.clock.advance(later - 1000);
    w.c.externalWrite(NAME, (st) => ({ ...st, evidence: [evidence("b", "a", later - 100)] }));
    const r = await confirmAs(w, "confirm-0")(suspected("c", "a", later), w.ctx);
    expect(types(r.emit)).toEqual([EVENT_TYPES.fenceRequested]);
    expect(
      Object.keys(JSON.parse(w.c.leases.get("fastfence-admissions")!.annotations!["fastfence.io/admitted"]!)),
    ).toEqual([NAME]);
  });
});

describe("stale view: a guarded write that loses re-reads and decides again", () => {
  test.each([
    {
      name: "another confirm replica confirmed first: ours is a duplicate",
      seed: true,
      op: "incidents.writeStatus" as Op,
      other: (c: MemoryCluster) =>
        void c.externalWrite(NAME, (st) =>
          transition({ ...st, evidence: [...st.evidence, evidence("c", "a", 950)] }, "Confirmed", at(950), {
            confirmedBy: CONFIRM.identity,
          }),
        ),
      outcome: "ignored",
      emitted: [],
      phases: ["Suspected", "Confirmed"],
      calls: [
        "kube.writeLease create fastfence-admissions",
        "incidents.writeStatus a-aaaaaaaa Confirmed ✗409",
      ],
    },
    {
      name: "another replica refreshed the evidence meanwhile: we confirm on its version",
      seed: true,
      op: "incidents.writeStatus" as Op,
      other: (c: MemoryCluster) => void c.externalWrite(NAME, (st) => ({ ...st, message: "refreshed" })),
      outcome: "processed",
      emitted: [EVENT_TYPES.fenceRequested],
      phases: ["Suspected", "Suspected", "Confirmed"],
      calls: [
        "kube.writeLease create fastfence-admissions",
        "incidents.writeStatus a-aaaaaaaa Confirmed ✗409",
        "kube.writeLease replace fastfence-admissions", // its own slot, taken again on the re-read
        "incidents.writeStatus a-aaaaaaaa Confirmed",
      ],
    },
    {
      name: "two replicas race to create the incident (AlreadyExists): the loser adds its evidence",
      seed: false,
      op: "incidents.create" as Op,
      other: (c: MemoryCluster) => void c.seedIncident(suspectedByB()),
      outcome: "processed",
      emitted: [EVENT_TYPES.fenceRequested],
      phases: ["Suspected", "Confirmed"],
      calls: [
        "incidents.create a-aaaaaaaa Suspected ✗409",
        "kube.writeLease create fastfence-admissions",
        "incidents.writeStatus a-aaaaaaaa Confirmed",
      ],
    },
  ])("$name", async ({ seed, op, other, outcome, emitted, phases, calls }) => {
    const w = world();
    if (seed) w.c.seedIncident(suspectedByB());
    w.c.before(op, () => other(w.c));
    const r = await confirmHandler(w)(suspected("c", "a", 1000), w.ctx);
    expect(r.outcome.kind).toBe(outcome);
    expect(types(r.emit)).toEqual(emitted);
    expect(writes(w)).toEqual(calls);
    expect(w.c.phases(NAME)).toEqual(phases);
    // once for the copies check (sameAs), then the view was read twice
    expect(w.c.count("policy.get")).toBe(3);
    const final = statusOf(w.c.incident(NAME)!);
    expect(final.evidence.map((e) => e.observerNode).sort()).toEqual(["b", "c"]);
  });

  test.each([
    { losses: 1, outcome: "processed" },
    { losses: MAX_REDECIDE - 1, outcome: "processed" },
    { losses: MAX_REDECIDE, outcome: "ignored" },
    { losses: MAX_REDECIDE + 3, outcome: "ignored" },
  ])("bounded: $losses lost writes in a row → $outcome", async ({ losses, outcome }) => {
    expect(MAX_REDECIDE).toBeGreaterThan(1);
    const w = world();
    w.c.seedIncident(suspectedByB());
    // Another writer moves the resourceVersion on just before each of our next `losses` writes.
    w.c.before("incidents.writeStatus", () => void w.c.externalWrite(NAME, (st) => st), losses);
    const r = await confirmHandler(w)(suspected("c", "a", 1000), w.ctx);
    const rounds = Math.min(losses + 1, MAX_REDECIDE);
    expect(r.outcome.kind).toBe(outcome);
    expect(w.c.count("incidents.get")).toBe(rounds);
    expect(w.c.count("incidents.writeStatus", "failed")).toBe(Math.min(losses, MAX_REDECIDE));
    if (outcome === "processed") {
      expect(types(r.emit)).toEqual([EVENT_TYPES.fenceRequested]);
      expect(w.c.count("incidents.writeStatus", "ok")).toBe(1);
      expect(w.c.incident(NAME)?.status?.phase).toBe("Confirmed");
    } else {
      expect(r.outcome).toMatchObject({ kind: "ignored", code: "LostRaces" });
      expect(r.emit).toEqual([]);
      expect(w.c.count("incidents.writeStatus", "ok")).toBe(0);
      expect(w.c.incident(NAME)?.status?.phase).toBe("Suspected");
    }
  });

  test("a Lease taken by another replica between read and acquire: no Fencing write, no power-off", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    w.c.before("leases.acquire", () => w.c.externalLease(LEASE, OTHER_FENCE.replica, NOW));
    const r = await fenceHandler(w)(fenceRequest(), w.ctx);
    expect(r).toEqual({ outcome: expect.objectContaining({ kind: "ignored" }), emit: [] });
    expect(writes(w)).toEqual([`leases.acquire ${LEASE} fence-0`]);
    // re-read: the second view shows the holder (each view also reads the heartbeat Lease: 2 × 2)
    expect(w.c.count("kube.readLease")).toBe(4);
    expect(w.c.incident(NAME)?.status?.phase).toBe("Confirmed");
    expect(w.c.leases.get(LEASE)?.holder).toBe(OTHER_FENCE.replica);
    expect(w.c.power.get("a")).toBe("On");
  });

  test.each([
    { name: "500 from the API server", err: serverError("write status of nodefence a-aaaaaaaa") },
    {
      name: "404: the incident was deleted",
      err: new KubeApiError(404, "write status of nodefence", { message: "not found" }, undefined),
    },
    {
      name: "no API server answered",
      err: new FastfenceError("FF_KUBE_UNAVAILABLE", "no API server answered", { retriable: true }),
    },
  ])("not a stale view ($name): the error goes to the runtime, no re-decide", async ({ err }) => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    w.c.failNext("incidents.writeStatus", err);
    await expect(fenceHandler(w)(fenceRequest(), w.ctx)).rejects.toBe(err);
    expect(w.c.count("policy.get")).toBe(1);
    expect(w.c.count("power.powerOff")).toBe(0);
    expect(w.c.incident(NAME)?.status?.phase).toBe("Confirmed");
  });
});

describe("a lost race: another writer already made the transition", () => {
  test("two fence replicas on one request: one power-off, one node.fenced", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    let other: Awaited<ReturnType<ReturnType<typeof fenceHandler>>> | undefined;
    // fence-1's whole delivery runs after fence-0 read the view and before it takes the Lease.
    w.c.before("leases.acquire", async () => {
      other = await fenceHandler(w, OTHER_FENCE)(fenceRequest(), w.ctx);
    });
    const r = await fenceHandler(w, FENCE)(fenceRequest(), w.ctx);
    expect(other?.outcome.kind).toBe("processed");
    expect(types(other?.emit ?? [])).toEqual([EVENT_TYPES.nodeFenced]);
    expect(r).toEqual({ outcome: expect.objectContaining({ kind: "ignored" }), emit: [] });
    expect(writes(w)).toEqual([
      `leases.acquire ${LEASE} fence-1`,
      "incidents.writeStatus a-aaaaaaaa Fencing",
      "power.powerOff a round 1 by fence-1",
      `nodes.setFencedOff a ${NAME}/${BOOT.a}`,
      "incidents.writeStatus a-aaaaaaaa FencedOff",
      `leases.release ${LEASE} fence-1`,
      `leases.acquire ${LEASE} fence-0`, // free again: fence-1 released it
      "incidents.writeStatus a-aaaaaaaa Fencing ✗409",
    ]);
    expect(w.c.phases(NAME)).toEqual(["Confirmed", "Fencing", "FencedOff"]);
    expect(statusOf(w.c.incident(NAME)!).fencingBy).toBe(OTHER_FENCE.replica);
  });

  test("a takeover during a slow power-off: the old driver's result loses and is not retried", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    let other: Awaited<ReturnType<ReturnType<typeof fenceHandler>>> | undefined;
    w.power.offScript = async (a) => {
      if (a.holder === FENCE.replica) {
        // fence-0's BMC hangs past its Lease (the policy's leaseDurationMs); fence-1 takes
        // the round over and finishes it.
        w.clock.advance(PAST_LEASE);
        other = await fenceHandler(w, OTHER_FENCE)(fenceRequest(), w.ctx);
        return [
          offAttempt(1, PAST_LEASE, { result: "timeout", readBackState: undefined, readBackAt: undefined }),
        ];
      }
      return [offAttempt(1, PAST_LEASE + 100, { by: a.holder })];
    };
    const r = await fenceHandler(w, FENCE)(fenceRequest(), w.ctx);
    expect(r).toEqual({ outcome: expect.objectContaining({ kind: "ignored" }), emit: [] });
    expect(types(other?.emit ?? [])).toEqual([EVENT_TYPES.nodeFenced]);
    expect(w.c.count("power.powerOff")).toBe(2); // fence-0's hung one and fence-1's; no third
    expect(w.c.phases(NAME)).toEqual(["Confirmed", "Fencing", "Fencing", "FencedOff"]);
    expect(writes(w).slice(-2)).toEqual([
      "power.powerOff a round 1 by fence-0",
      "incidents.writeStatus a-aaaaaaaa FenceFailed ✗409",
    ]);
    expect(statusOf(w.c.incident(NAME)!).fencingBy).toBe(OTHER_FENCE.replica);
  });

  test("two remediate replicas on one node.fenced: one Released write, one event, the winner's counts", async () => {
    const w = world();
    w.c.seedIncident(fencedOff());
    w.c.pods = [
      { namespace: "default", name: "p1", node: "a" },
      { namespace: "default", name: "p2", node: "a" },
    ];
    let other: Awaited<ReturnType<ReturnType<typeof remediateHandler>>> | undefined;
    w.c.before("nodes.setTaint", async () => {
      other = await remediateHandler(w, OTHER_FENCE)(nodeFencedEvent(), w.ctx);
    });
    const r = await remediateHandler(w, FENCE)(nodeFencedEvent(), w.ctx);
    expect(r).toEqual({ outcome: expect.objectContaining({ kind: "ignored" }), emit: [] });
    expect(types(other?.emit ?? [])).toEqual([EVENT_TYPES.workloadsReleased]);
    expect(w.c.phases(NAME)).toEqual(["FencedOff", "Released"]);
    expect(w.c.count("incidents.writeStatus", "failed")).toBe(1);
    expect(statusOf(w.c.incident(NAME)!).released?.podsDeleted).toBe(2);
    expect(w.c.taints("a")).toEqual(["node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"]);
  });

  test.each([
    {
      name: "confirm: a suspicion after Confirmed",
      seed: () => confirmed("a"),
      run: (w: World) => confirmHandler(w)(suspected("c", "a", 1000), w.ctx),
    },
    {
      name: "fence: a request after FencedOff",
      seed: fencedOff,
      run: (w: World) => fenceHandler(w)(fenceRequest(), w.ctx),
    },
    {
      name: "remediate: node.fenced after Released",
      seed: () => ({ ...fencedOff(), status: { ...fencedOff().status!, phase: "Released" as const } }),
      run: (w: World) => remediateHandler(w)(nodeFencedEvent(), w.ctx),
    },
    {
      name: "recover: Ready with the new boot after Recovered",
      seed: () => ({ ...fencedOff(), status: { ...fencedOff().status!, phase: "Recovered" as const } }),
      run: (w: World) => {
        w.c.setNode(node("a", { bootId: NEW_BOOT }));
        return recoverHandler(w)(condition("a", "True", NEW_BOOT, 1000), w.ctx);
      },
    },
  ])("a late duplicate changes nothing ($name)", async ({ seed, run }) => {
    const w = world();
    w.c.seedIncident(seed());
    const before = w.c.incident(NAME);
    const r = await run(w);
    expect(r).toEqual({ outcome: expect.objectContaining({ kind: "ignored" }), emit: [] });
    expect(w.c.effects()).toEqual([]);
    expect(w.c.incident(NAME)).toEqual(before);
  });
});

describe("actions run in order; events only after every action succeeded", () => {
  const E1 = outgoing("io.fastfence.test.one.v1", "a", NAME, { n: 1 });
  const E2 = outgoing("io.fastfence.test.two.v1", "a", NAME, { n: 2 });
  /** A stage that returns what the test says; an action's result is noted with no further action. */
  const scripted = (
    decide: (i: DecideInput<FfEvent>) => Decision,
    onResult: (i: DecideInput<FfEvent>) => Decision = () => processed("result noted", []),
  ): PureStage => ({
    name: "scripted",
    description: "a stage that returns what the test says",
    subscriptions: [],
    emits: [],
    critical: false,
    locate: (e) => ({ node: e.subject, incident: NAME, cluster: false }),
    decide: (i) => (i.result ? onResult(i) : decide(i)),
  });
  /** One action of every kind but powerOff (below), with two events. */
  const everyKind = scripted((i) => {
    const inc = i.view.incident!;
    const taint = { ...OUT_OF_SERVICE_TAINT };
    return processed(
      "every kind",
      [
        { kind: "takeLease", leaseName: LEASE, node: "a", holder: FENCE.replica, durationMs: 15_000 },
        {
          kind: "updateIncidentStatus",
          name: NAME,
          expectedResourceVersion: inc.metadata.resourceVersion!,
          status: { ...statusOf(inc), message: "scripted" },
        },
        { kind: "setTaint", node: "a", taint },
        { kind: "deletePods", node: "a", gracePeriodSeconds: 0 },
        { kind: "deleteVolumeAttachments", node: "a" },
        { kind: "deleteVmLaunchers", node: "a" },
        { kind: "waitUntil", at: i.now + 500 },
        { kind: "powerOn", node: "a", incident: NAME, levels: [] },
        { kind: "removeTaint", node: "a", taint },
        { kind: "releaseLease", leaseName: LEASE, node: "a", holder: FENCE.replica },
      ],
      [E1, E2],
    );
  });
  const IN_ORDER = [
    `leases.acquire ${LEASE} fence-0`,
    "incidents.writeStatus a-aaaaaaaa Confirmed",
    `nodes.setTaint a ${TAINT}`,
    "nodes.forceDeletePods a except VM launchers", // deleteVmLaunchers' own: each pod counted once
    "nodes.deleteVolumeAttachments a",
    "nodes.deleteVmLaunchers a",
    "clock.sleep 500",
    "power.powerOn a",
    `nodes.setTaint a ${UNTAINT}`,
    `leases.release ${LEASE} fence-0`,
  ];
  const setup = () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    w.clock.onSleep = (ms) => void w.c.journal.push({ op: "clock.sleep", detail: String(ms) });
    return w;
  };

  test("every action in the order decided, then both events in order", async () => {
    const w = setup();
    const r = await stageHandler(everyKind, w.ad, FENCE)(fenceRequest(), w.ctx);
    expect(writes(w)).toEqual(IN_ORDER);
    expect(r).toEqual({ outcome: { kind: "processed", detail: "every kind" }, emit: [E1, E2] });
    expect(w.clock.now()).toBe(NOW + 500);
  });

  test("without the VM release beside it, the pod delete takes the launcher pods too", async () => {
    const w = setup();
    const podsOnly = scripted(() =>
      processed("pods only", [{ kind: "deletePods", node: "a", gracePeriodSeconds: 0 }], []),
    );
    await stageHandler(podsOnly, w.ad, FENCE)(fenceRequest(), w.ctx);
    expect(writes(w)).toContain("nodes.forceDeletePods a");
  });

  test("the release deletes run concurrently and all finish before the next action", async () => {
    const w = setup();
    w.c.before("nodes.forceDeletePods", () => new Promise((resolve) => setTimeout(resolve, 10)));
    await stageHandler(everyKind, w.ad, FENCE)(fenceRequest(), w.ctx);
    expect(writes(w).slice(3, 7)).toEqual([
      "nodes.deleteVolumeAttachments a",
      "nodes.deleteVmLaunchers a",
      "nodes.forceDeletePods a except VM launchers", // started first, finished last: the others did not wait for it
      "clock.sleep 500",
    ]);
  });

  // A failing action stops the list: nothing after it runs, nothing is emitted (the
  // handler throws; the runtime retries or dead-letters). The three release deletes are
  // already in flight together when one of them fails.
  test.each([
    { op: "leases.acquire" as Op, match: "", done: 1, failed: 0 },
    { op: "incidents.writeStatus" as Op, match: "", done: 2, failed: 1 },
    { op: "nodes.setTaint" as Op, match: TAINT, done: 3, failed: 2 },
    { op: "nodes.forceDeletePods" as Op, match: "", done: 6, failed: 3 },
    { op: "nodes.deleteVmLaunchers" as Op, match: "", done: 6, failed: 5 },
    { op: "power.powerOn" as Op, match: "", done: 8, failed: 7 },
    { op: "nodes.setTaint" as Op, match: UNTAINT, done: 9, failed: 8 },
  ])("$op $match fails → stops there, emits nothing", async ({ op, match, done, failed }) => {
    const w = setup();
    const err = serverError(op);
    w.c.before(
      op,
      (detail) => {
        if (detail.endsWith(match)) throw err;
      },
      Number.POSITIVE_INFINITY,
    );
    await expect(stageHandler(everyKind, w.ad, FENCE)(fenceRequest(), w.ctx)).rejects.toBe(err);
    await tick();
    const expected = IN_ORDER.slice(0, done).map((e, i) => (i === failed ? `${e} ✗500` : e));
    expect(writes(w)).toEqual(expected);
  });

  test("releasing the Lease is best effort: its failure is logged, the events still go out", async () => {
    const w = setup();
    w.c.failNext("leases.release", serverError("release lease"));
    const r = await stageHandler(everyKind, w.ad, FENCE)(fenceRequest(), w.ctx);
    expect(r.emit).toEqual([E1, E2]);
    expect(writes(w).at(-1)).toBe(`leases.release ${LEASE} fence-0 ✗500`);
  });

  test("releasing the Lease is not awaited: the events go out while the release still hangs", async () => {
    const w = setup();
    let unblock = () => {};
    w.c.before("leases.release", () => new Promise<void>((resolve) => (unblock = resolve)));
    const r = await stageHandler(everyKind, w.ad, FENCE)(fenceRequest(), w.ctx);
    expect(r.emit).toEqual([E1, E2]);
    expect(writes(w)).toEqual(IN_ORDER.slice(0, -1)); // the release has not settled yet
    unblock();
    await tick();
    expect(writes(w)).toEqual(IN_ORDER);
  });

  /** Fencing write, power-off (E1), and a follow-up that writes and emits E2. */
  const firstDecision = (i: DecideInput<FfEvent>): Decision => {
    const inc = i.view.incident!;
    return processed(
      "power",
      [
        {
          kind: "updateIncidentStatus",
          name: NAME,
          expectedResourceVersion: inc.metadata.resourceVersion!,
          status: transition(statusOf(inc), "Fencing", at(1000), { round: 1, fencingBy: FENCE.replica }),
        },
        {
          kind: "powerOff",
          node: "a",
          incident: NAME,
          round: 1,
          holder: FENCE.replica,
          levels: [],
          timeoutMs: 1000,
        },
      ],
      [E1],
    );
  };
  const withPowerOff = (seen: { rv?: string; attempts?: Attempt[] }) =>
    scripted(firstDecision, ({ view, result }) => {
      const inc = view.incident!;
      if (result?.kind !== "powerOff") throw new Error(`unexpected result ${result?.kind}`);
      seen.rv = inc.metadata.resourceVersion;
      seen.attempts = result.attempts;
      return processed(
        "recorded",
        [
          {
            kind: "updateIncidentStatus",
            name: NAME,
            expectedResourceVersion: inc.metadata.resourceVersion!,
            status: { ...statusOf(inc), attempts: result.attempts },
          },
        ],
        [E2],
      );
    });

  test("a follow-up decides on the incident as just written; its events follow the decision's", async () => {
    const w = setup();
    const seen: { rv?: string; attempts?: Attempt[] } = {};
    const attempts = [offAttempt(1, 1000)];
    w.power.offScript = () => attempts;
    let writtenRv: string | undefined;
    w.c.before("power.powerOff", () => void (writtenRv = w.c.incident(NAME)?.metadata.resourceVersion));
    const r = await stageHandler(withPowerOff(seen), w.ad, FENCE)(fenceRequest(), w.ctx);
    expect(seen.rv).toBe(writtenRv);
    expect(seen.attempts).toEqual(attempts);
    expect(r.emit).toEqual([E1, E2]);
    expect(statusOf(w.c.incident(NAME)!).attempts).toEqual(attempts);
  });

  test("a follow-up write that fails withholds every event, the first decision's too", async () => {
    const w = setup();
    const err = serverError("write status");
    w.c.before("power.powerOff", () => w.c.failNext("incidents.writeStatus", err));
    await expect(stageHandler(withPowerOff({}), w.ad, FENCE)(fenceRequest(), w.ctx)).rejects.toBe(err);
    expect(w.c.incident(NAME)?.status?.phase).toBe("Fencing");
  });
});

describe("follow-ups: power-off attempts and release counts are fed back", () => {
  const noReadBack = { readBackState: undefined, readBackAt: undefined };
  test.each([
    {
      name: "read back Off at level 0",
      attempts: [offAttempt(1, 1000)],
      phase: "FencedOff",
      event: EVENT_TYPES.nodeFenced,
      data: { level: 0, driver: "redfish", attempts: 1, powerOffConfirmedAt: at(1400) },
    },
    {
      name: "level 0 unreachable, level 1 read back Off",
      attempts: [
        offAttempt(1, 1000, { result: "unreachable", ...noReadBack }),
        offAttempt(1, 1500, { level: 1, driver: "ipmi" }),
      ],
      phase: "FencedOff",
      event: EVENT_TYPES.nodeFenced,
      data: { level: 1, driver: "ipmi", attempts: 2, powerOffConfirmedAt: at(1900) },
    },
    {
      name: "still on",
      attempts: [offAttempt(1, 1000, { result: "still-on", readBackState: "On" })],
      phase: "FenceFailed",
      event: EVENT_TYPES.fenceFailed,
      data: { round: 1, final: false },
    },
    {
      name: "Off claimed but read back before the command (S1)",
      attempts: [offAttempt(1, 1000, { readBackAt: at(1000) })],
      phase: "FenceFailed",
      event: EVENT_TYPES.fenceFailed,
      data: { round: 1, final: false },
    },
    {
      name: "no attempt at all",
      attempts: [],
      phase: "FenceFailed",
      event: EVENT_TYPES.fenceFailed,
      data: {},
    },
  ])("power-off: $name → $phase", async ({ attempts, phase, event: type, data }) => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    w.power.offScript = () => attempts;
    const r = await fenceHandler(w)(fenceRequest(), w.ctx);
    expect(r.outcome.kind).toBe("processed");
    expect(types(r.emit)).toEqual([type]);
    expect(r.emit[0]?.data).toMatchObject(data);
    expect(writes(w)).toEqual([
      `leases.acquire ${LEASE} fence-0`,
      "incidents.writeStatus a-aaaaaaaa Fencing",
      "power.powerOff a round 1 by fence-0",
      ...(phase === "FencedOff" ? [`nodes.setFencedOff a ${NAME}/${BOOT.a}`] : []),
      `incidents.writeStatus a-aaaaaaaa ${phase}`,
      `leases.release ${LEASE} fence-0`,
    ]);
    expect(w.c.count("power.prepare")).toBe(1);
    const st = statusOf(w.c.incident(NAME)!);
    expect(st.phase).toBe(phase);
    expect(st.attempts).toEqual(attempts);
    expect(w.c.leases.get(LEASE)?.holder).toBe("");
  });

  const remediation = (r: Partial<FencingPolicySpec["remediation"]>) =>
    policy({ remediation: { ...policy().remediation, ...r } });
  test.each([
    { name: "defaults", policy: policy(), counts: [2, 1, 1], left: [1, 1, 0] },
    { name: "pods kept", policy: remediation({ deletePods: false }), counts: [0, 1, 1], left: [3, 1, 0] },
    {
      name: "only pods",
      policy: remediation({ deleteVolumeAttachments: false, deleteVirtualMachineInstances: false }),
      counts: [2, 0, 0],
      left: [1, 2, 1],
    },
    {
      name: "taint only",
      policy: remediation({
        deletePods: false,
        deleteVolumeAttachments: false,
        deleteVirtualMachineInstances: false,
      }),
      counts: [0, 0, 0],
      left: [3, 2, 1],
    },
  ])("release counts ($name) reach the Released status and event", async ({ policy: p, counts, left }) => {
    const w = world({ policy: p });
    w.c.seedIncident(fencedOff());
    w.c.pods = [
      { namespace: "default", name: "p1", node: "a" },
      { namespace: "db", name: "p2", node: "a" },
      { namespace: "default", name: "p3", node: "b" },
    ];
    w.c.volumeAttachments = [
      { namespace: "", name: "va-a", node: "a" },
      { namespace: "", name: "va-b", node: "b" },
    ];
    w.c.vmLaunchers = [{ namespace: "vms", name: "vm1", node: "a" }];
    const r = await remediateHandler(w)(nodeFencedEvent(), w.ctx);
    const [podsDeleted, volumeAttachmentsDeleted, vmLaunchersDeleted] = counts;
    expect(types(r.emit)).toEqual([EVENT_TYPES.workloadsReleased]);
    expect(r.emit[0]?.data).toMatchObject({ podsDeleted, volumeAttachmentsDeleted, vmLaunchersDeleted });
    expect(statusOf(w.c.incident(NAME)!)).toMatchObject({
      phase: "Released",
      released: { podsDeleted, volumeAttachmentsDeleted, vmLaunchersDeleted },
    });
    expect([w.c.pods.length, w.c.volumeAttachments.length, w.c.vmLaunchers.length]).toEqual(left);
    expect(writes(w)[0]).toBe(`nodes.setTaint a ${TAINT}`);
    expect(writes(w).at(-1)).toBe("incidents.writeStatus a-aaaaaaaa Released");
  });

  test.each([
    { name: "released", fail: false },
    { name: "failing", fail: true },
  ])("BMC holds are cleared just before a terminal write ($name)", async ({ fail }) => {
    const w = world();
    w.c.seedIncident({ ...fencedOff(), status: { ...fencedOff().status!, phase: "Released" } });
    w.c.nodes.get("a")!.taints = [{ ...OUT_OF_SERVICE_TAINT }];
    w.c.setNode(node("a", { bootId: NEW_BOOT }));
    w.power.holds.set(NAME, ["openshift-machine-api/host-a"]);
    const err = serverError("release holds");
    if (fail) w.c.failNext("power.releaseHolds", err);
    const run = recoverHandler(w)(condition("a", "True", NEW_BOOT, 1000), w.ctx);
    if (fail) {
      await expect(run).rejects.toBe(err);
      expect(w.c.incident(NAME)?.status?.phase).toBe("Released");
    } else {
      expect(types((await run).emit)).toEqual([EVENT_TYPES.nodeRecovered]);
      expect(w.c.incident(NAME)?.status?.phase).toBe("Recovered");
    }
    expect(writes(w)).toEqual([
      `nodes.setTaint a ${UNTAINT}`,
      `power.releaseHolds a-aaaaaaaa${fail ? " ✗500" : ""}`,
      ...(fail ? [] : ["incidents.writeStatus a-aaaaaaaa Recovered"]),
    ]);
  });
});

describe("the handler deadline: an aborted signal stops before the next action", () => {
  const deadline = () => new FastfenceError("FF_INTERNAL", "handler exceeded 200 ms", { retriable: true });

  test.each([
    {
      name: "aborted before the first action: nothing written (only the BMC warm-up started)",
      arm: (w: World, stop: () => void) => stop(),
      effects: ["power.prepare a"],
      phase: "Confirmed",
      holder: undefined,
      power: "On",
    },
    {
      name: "aborted while the Lease is taken: held, but no Fencing write",
      arm: (w: World, stop: () => void) => w.c.before("leases.acquire", stop),
      effects: ["power.prepare a", `leases.acquire ${LEASE} fence-0`],
      phase: "Confirmed",
      holder: FENCE.replica,
      power: "On",
    },
  ])("$name", async ({ arm, effects, phase, holder, power }) => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    const reason = deadline();
    arm(w, () => w.abort.abort(reason));
    await expect(fenceHandler(w)(fenceRequest(), w.ctx)).rejects.toBe(reason);
    await tick();
    expect(w.c.effects()).toEqual(effects);
    expect(w.c.incident(NAME)?.status?.phase).toBe(phase);
    expect(w.c.leases.get(LEASE)?.holder).toBe(holder);
    expect(w.c.power.get("a")).toBe(power);
  });

  test("aborted during the power-off: the round's result is still recorded, on a deadline of its own", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    w.power.offScript = (a) => {
      w.abort.abort(deadline());
      return [offAttempt(a.round, 1000)]; // the BMC did read back Off
    };
    // Called directly here; under the dispatcher the deadline has already answered, and
    // the events of this late decision are left to the resync of the next stage.
    await fenceHandler(w)(fenceRequest(), w.ctx);
    await tick();
    expect(w.c.effects()).toEqual([
      "power.prepare a",
      `leases.acquire ${LEASE} fence-0`,
      "incidents.writeStatus a-aaaaaaaa Fencing",
      "power.powerOff a round 1 by fence-0",
      `nodes.setFencedOff a ${NAME}/${BOOT.a}`,
      "incidents.writeStatus a-aaaaaaaa FencedOff",
      `leases.release ${LEASE} fence-0`,
    ]);
    expect(w.c.incident(NAME)?.status?.phase).toBe("FencedOff");
    expect(w.c.power.get("a")).toBe("Off");
  });

  test("a BMC that hangs past the deadline: the round ends recorded as a timeout, and its retry finishes", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    w.power.offScript = (a, signal) => {
      const hung = new Promise<Attempt[]>((resolve) =>
        signal.addEventListener("abort", () =>
          resolve([
            {
              round: a.round,
              level: 0,
              driver: "redfish",
              by: a.holder,
              startedAt: at(1_000),
              finishedAt: at(11_000),
              result: "timeout",
              errorCode: "FF_BMC_TIMEOUT",
            },
          ]),
        ),
      );
      w.abort.abort(deadline());
      return hung;
    };
    await fenceHandler(w)(fenceRequest(), w.ctx);
    expect(w.c.incident(NAME)?.status).toMatchObject({ phase: "FenceFailed", round: 1 });
    expect(statusOf(w.c.incident(NAME)!).attempts.map((x) => x.result)).toEqual(["timeout"]);
    w.power.offScript = (a) => [offAttempt(a.round, 3_000, { by: a.holder })];
    const r = await fenceHandler(w, OTHER_FENCE)(fenceFailedEvent(1), handlerContext(w.clock));
    expect(types(r.emit)).toEqual([EVENT_TYPES.nodeFenced]);
    expect(w.c.phases(NAME)).toEqual(["Confirmed", "Fencing", "FenceFailed", "Fencing", "FencedOff"]);
  });

  test.each([
    { name: "not aborted: the wait passes, then the round runs", abort: false },
    { name: "aborted during the wait: no Lease, no write", abort: true },
  ])("a retry backoff (waitUntil), $name", async ({ abort }) => {
    const w = world();
    w.c.seedIncident(
      confirmed("a", 0, {
        phase: "FenceFailed",
        round: 1,
        retryNotBefore: at(3000),
        attempts: [offAttempt(1, 0, { result: "still-on", readBackState: "On" })],
      }),
    );
    const reason = deadline();
    w.clock.onSleep = () => void (abort && w.abort.abort(reason));
    const run = fenceHandler(w)(fenceFailedEvent(1), w.ctx);
    if (abort) {
      await expect(run).rejects.toBe(reason);
      expect(writes(w)).toEqual([]);
      expect(w.c.incident(NAME)?.status?.phase).toBe("FenceFailed");
    } else {
      expect(types((await run).emit)).toEqual([EVENT_TYPES.nodeFenced]);
      expect(writes(w).slice(0, 2)).toEqual([
        `leases.acquire ${LEASE} fence-0`,
        "incidents.writeStatus a-aaaaaaaa Fencing",
      ]);
      expect(statusOf(w.c.incident(NAME)!).round).toBe(2);
    }
    expect(w.clock.sleeps).toEqual([2000]);
  });

  test("a power-off round moves the deadline to its own (start + powerOffTimeoutMs + margin), under the Lease", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    const extended: number[] = [];
    w.power.offScript = (a) => {
      expect(extended).toEqual([roundDeadline(NOW, a.timeoutMs)]); // before the BMC is touched
      // the fencing Lease held meanwhile lasts the policy's leaseDurationMs, beyond that deadline
      expect(w.c.leases.get(LEASE)?.durationSeconds).toBe(policy().timeouts.leaseDurationMs / 1000);
      return [offAttempt(a.round, 1000)];
    };
    const r = await fenceHandler(w)(fenceRequest(), handlerContext(w.clock, w.abort.signal, extended));
    expect(types(r.emit)).toEqual([EVENT_TYPES.nodeFenced]);
    expect(extended).toEqual([NOW + policy().timeouts.powerOffTimeoutMs + ROUND_RECORD_MARGIN_MS]);
  });
});

describe("the guards of the in-memory adapters (the tests above rely on them)", () => {
  test("a status write on a stale resourceVersion is a KubeApiError 409; AlreadyExists too", async () => {
    const w = world();
    const inc = w.c.seedIncident(suspectedByB());
    w.c.externalWrite(NAME, (st) => st);
    await expect(
      w.ad.incidents.writeStatus(NAME, inc.metadata.resourceVersion!, inc.status!),
    ).rejects.toMatchObject({ status: 409, code: "FF_KUBE_CONFLICT" });
    await expect(w.ad.incidents.create(suspectedByB())).rejects.toMatchObject({ status: 409 });
    await expect(w.ad.incidents.writeStatus("nope", "1", inc.status!)).rejects.toMatchObject({ status: 404 });
    expect(conflict("x")).toBeInstanceOf(KubeApiError);
  });

  test("a Lease another holder renewed within its duration is not acquired; an expired one is", async () => {
    const w = world();
    w.c.externalLease(LEASE, OTHER_FENCE.replica, NOW);
    expect(await w.ad.leases.acquire(LEASE, FENCE.replica, NOW + 14_999)).toMatchObject({ acquired: false });
    expect(await w.ad.leases.acquire(LEASE, FENCE.replica, NOW + 15_001)).toMatchObject({ acquired: true });
  });
});

describe("resync: an open incident re-driven without an event", () => {
  /** Re-drives a Fencing incident whose round has no driver any more: marks it FenceFailed. */
  const reDriving: PureStage = {
    name: "re-driving",
    description: "test stage with a resync",
    subscriptions: [],
    emits: [],
    critical: false,
    locate: (e) => ({ node: e.subject, incident: NAME, cluster: false }),
    decide: () => processed("events are not this test's subject", []),
    locateResync: (r) => ({ node: r.node, incident: r.incident, cluster: false }),
    resync: ({ view, now }) => {
      const inc = view.incident;
      if (!inc) return processed("nothing to re-drive", []);
      return processed(
        "round ended without a result",
        [
          {
            kind: "updateIncidentStatus",
            name: inc.metadata.name,
            expectedResourceVersion: inc.metadata.resourceVersion!,
            status: transition(statusOf(inc), "FenceFailed", new Date(now).toISOString(), {
              reason: "RoundAbandoned",
              message: "re-driven",
            }),
          },
        ],
        [outgoing(EVENT_TYPES.fenceFailed, inc.spec.nodeName, inc.metadata.name, { resynced: true })],
      );
    },
  };

  test("decides on the fresh view and executes like an event", async () => {
    const w = world();
    const inc = confirmed("a");
    w.c.seedIncident({ ...inc, status: transition(statusOf(inc), "Fencing", at(500), { round: 1 }) });
    const runner = stageRunner(reDriving, w.ad, FENCE, WORLD);
    const r = await runner.resync({ kind: "resync", incident: NAME, node: "a" }, w.ctx);
    expect(r.outcome).toEqual({ kind: "processed", detail: "round ended without a result" });
    expect(types(r.emit)).toEqual([EVENT_TYPES.fenceFailed]);
    expect(w.c.incident(NAME)?.status?.phase).toBe("FenceFailed");
  });

  test("a stale view is re-read and decided again, as for an event", async () => {
    const w = world();
    const inc = confirmed("a");
    w.c.seedIncident({ ...inc, status: transition(statusOf(inc), "Fencing", at(500), { round: 1 }) });
    // Another writer bumps the resourceVersion between the read and the write once.
    w.c.before("incidents.writeStatus", () => {
      const cur = w.c.incident(NAME)!;
      w.c.seedIncident({ ...cur, status: { ...statusOf(cur), message: "touched" } });
    });
    const r = await stageRunner(reDriving, w.ad, FENCE, WORLD).resync(
      { kind: "resync", incident: NAME, node: "a" },
      w.ctx,
    );
    expect(r.outcome.kind).toBe("processed");
    expect(w.c.incident(NAME)?.status?.phase).toBe("FenceFailed");
  });

  test("a stage without locateResync ignores resyncs and reads nothing", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    const r = await stageRunner(detect.stage, w.ad, CONFIRM, WORLD).resync(
      { kind: "resync", incident: NAME, node: "a" },
      w.ctx,
    );
    expect(r).toMatchObject({ outcome: { kind: "ignored", code: "UnhandledInput" }, emit: [] });
    expect(w.c.journal).toEqual([]);
  });
});

describe("fence and remediate-workloads re-drive stalled incidents (resync)", () => {
  const RESYNC = { kind: "resync", incident: NAME, node: "a" } as const;
  const fencingBy = (replica: string, round = 1) => {
    const inc = confirmed("a");
    return { ...inc, status: transition(statusOf(inc), "Fencing", at(500), { round, fencingBy: replica }) };
  };

  test("a driver that died mid-round: once its Lease expired, its round is recorded and another replica finishes", async () => {
    const w = world();
    w.c.seedIncident(fencingBy(OTHER_FENCE.replica));
    w.c.externalLease(LEASE, OTHER_FENCE.replica, NOW, 5);
    const runner = stageRunner(fence.stage, w.ad, FENCE, WORLD);
    // Lease still live: the driver may be working; nothing is touched.
    w.clock.set(NOW + 4_000);
    expect((await runner.resync(RESYNC, w.ctx)).outcome).toMatchObject({ code: "DrivenByOtherReplica" });
    expect(w.c.incident(NAME)?.status?.phase).toBe("Fencing");
    // Expired: the interrupted round is recorded, and its fence.failed starts the next one.
    w.clock.set(NOW + 6_000);
    const r = await runner.resync(RESYNC, w.ctx);
    expect(w.c.incident(NAME)?.status).toMatchObject({ phase: "FenceFailed", reason: "RoundInterrupted" });
    expect(types(r.emit)).toEqual([EVENT_TYPES.fenceFailed]);
    const next = await fenceHandler(w)(fenceFailedEvent(1), w.ctx);
    expect(next.outcome.kind).toBe("processed");
    expect(w.c.incident(NAME)?.status).toMatchObject({
      phase: "FencedOff",
      round: 2,
      fencingBy: FENCE.replica,
    });
    expect(w.c.power.get("a")).toBe("Off");
  });

  test("a lost fence.failed: the next round starts from the resync once retryNotBefore is overdue", async () => {
    const w = world();
    const inc = confirmed("a");
    w.c.seedIncident({
      ...inc,
      status: transition(statusOf(inc), "FenceFailed", at(1_000), { round: 1, retryNotBefore: at(1_500) }),
    });
    const runner = stageRunner(fence.stage, w.ad, FENCE, WORLD);
    w.clock.set(T0 + 1_500 + 2_999);
    expect((await runner.resync(RESYNC, w.ctx)).outcome).toMatchObject({ code: "NotDue" });
    expect(w.c.journal.filter((o) => o.op === "power.powerOff")).toEqual([]);
    w.clock.set(T0 + 1_500 + 3_000);
    const r = await runner.resync(RESYNC, w.ctx);
    expect(types(r.emit)).toEqual([EVENT_TYPES.nodeFenced]);
    expect(w.c.incident(NAME)?.status).toMatchObject({ phase: "FencedOff", round: 2 });
  });

  test("a lost node.fenced: remediate-workloads releases the overdue FencedOff incident", async () => {
    const w = world();
    const inc = confirmed("a");
    w.c.seedIncident({
      ...inc,
      status: transition(transition(statusOf(inc), "Fencing", at(100)), "FencedOff", at(500), {
        round: 1,
        attempts: [offAttempt(1, 100)],
        powerOffConfirmedAt: at(500),
      }),
    });
    w.clock.set(T0 + 500 + 3_000);
    const r = await stageRunner(remediate.stage, w.ad, FENCE, WORLD).resync(RESYNC, w.ctx);
    expect(types(r.emit)).toEqual([EVENT_TYPES.workloadsReleased]);
    expect(w.c.incident(NAME)?.status?.phase).toBe("Released");
  });
});
