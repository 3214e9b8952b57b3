// make chaos, the pure parts: a seed gives the same schedule every time (replay), schedules
// stay within their bounds and break at most one node, and the liveness checker's verdicts
// read like its rules (L1: a broken node whose BMC answers is released within a bound from
// the policy; L2: nothing left without progress).
import { describe, expect, test } from "vitest";
import { newIncident, emptyStatus, type NodeFence, type NodeFenceStatus } from "../../../core/incident.ts";
import { resolvePolicy } from "../../../core/policy.ts";
import {
  SCHEDULE_MS,
  SLOW_LATENCIES_MS,
  describe as describeSchedule,
  prng,
  REPLAY_NODE,
  mayBeFenced,
  scheduleFor,
  type Schedule,
} from "../../../lab/chaos-schedule.ts";
import { checkLiveness, silentMissesMs, timingsOf, type Timings } from "../../../lab/liveness.ts";
import { LAB_TIMEOUTS, SLOW_BMC_TIMEOUTS } from "../../../lab/timeouts.ts";

const NODES = [
  { name: "node-a", bmc: "ipmi" as const },
  { name: "node-b", bmc: "redfish" as const },
  { name: "node-c", bmc: "ipmi" as const },
];

describe("chaos schedules", () => {
  test("the same seed gives the same schedule; another seed another one", () => {
    expect(scheduleFor(42, NODES)).toEqual(scheduleFor(42, NODES));
    const texts = new Set(Array.from({ length: 20 }, (_, i) => describeSchedule(scheduleFor(i, NODES))));
    expect(texts.size).toBeGreaterThan(15);
  });

  test("the PRNG is deterministic and spreads over [0, 1)", () => {
    const a = prng(7);
    const b = prng(7);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(xs);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(xs.filter((x) => x < 0.5).length).toBeGreaterThan(400);
  });

  test.each(Array.from({ length: 200 }, (_, i) => i))(
    "seed %i: steps in order, within 90 s, one broken node at most",
    (seed) => {
      const s = scheduleFor(seed, NODES);
      const ats = s.steps.map((x) => x.at);
      expect(ats).toEqual([...ats].sort((x, y) => x - y));
      expect(Math.max(0, ...ats)).toBeLessThan(SCHEDULE_MS);
      const breaks = s.steps.filter((x) => ["crash", "hang", "partition"].includes(x.kind));
      expect(breaks.length).toBeLessThanOrEqual(1);
      if (breaks[0]) expect(breaks[0].node).toBe(s.broken);
      // faults meant not to fence never land on the broken node
      for (const x of s.steps.filter((y) => ["partial", "fn-crash", "source-crash"].includes(y.kind)))
        expect(x.node).not.toBe(s.broken);
      expect(s.steps.filter((x) => x.kind === "broker-kill").length).toBeLessThanOrEqual(1);
      // IPMI BMCs only go unreachable
      for (const x of s.steps)
        if (x.kind === "bmc" && x.node !== "node-b") expect(["unreachable", "none"]).toContain(x.fault);
    },
  );
});

describe("event-source and broker kills (added after seeds 1-100 were run)", () => {
  // What those seeds' schedules were, as the runs logged them (.cache/chaos, docs/lab.md).
  const BEFORE: Record<number, string> = {
    15: "+8.9s crash node-b, +21.7s bmc slow node-b, +31.3s bmc none node-b, +37.6s partial peers node-c, +46.4s partial-heal node-c",
    26: "+0.0s hang node-c, +10.1s partial api node-a, +27.1s partial-heal node-a, +29.9s fn-crash node-b",
    35: "+17.5s bmc unreachable node-b, +17.6s hang node-b, +29.8s fn-crash node-a, +33.8s bmc none node-b",
    54: "+9.8s crash node-b, +22.3s fn-crash node-c",
    81: "+1.3s bmc unreachable node-a, +11.1s crash node-a, +19.3s bmc none node-a, +38.5s fn-crash node-b",
    99: "+10.2s bmc unreachable node-c, +13.8s hang node-c, +15.9s fn-crash node-a, +38.5s resume node-c",
  };
  test.each(Object.entries(BEFORE))("seed %s keeps every step it had", (seed, text) => {
    const s = scheduleFor(Number(seed), NODES);
    const kept = s.steps
      .filter((x) => x.kind !== "source-crash" && x.kind !== "broker-kill")
      .map((x) => (x.kind === "bmc" ? { ...x, latencyMs: undefined } : x)); // drawn since seed 182
    const old: Schedule = { ...s, steps: withoutLiesAndReplays(kept) };
    expect(describeSchedule(old)).toBe(text);
  });

  test("over 200 seeds both kinds occur; a broker kill only on the broken node before its break, or when none breaks", () => {
    const all = Array.from({ length: 200 }, (_, i) => scheduleFor(i, NODES));
    const kills = all.filter((s) => s.steps.some((x) => x.kind === "broker-kill"));
    expect(all.filter((s) => s.steps.some((x) => x.kind === "source-crash")).length).toBeGreaterThan(30);
    expect(kills.length).toBeGreaterThan(20);
    for (const s of kills) {
      const kill = s.steps.find((x) => x.kind === "broker-kill")!;
      const brk = s.steps.find((x) => ["crash", "hang", "partition"].includes(x.kind));
      if (brk) {
        expect(kill.node).toBe(brk.node);
        expect(kill.at).toBeLessThan(brk.at);
        expect(s.steps.indexOf(kill)).toBeLessThan(s.steps.indexOf(brk));
      }
    }
    expect(kills.some((s) => s.broken)).toBe(true);
    expect(kills.some((s) => !s.broken)).toBe(true);
  });
});

/** A schedule's steps without the kinds added after seeds 1-115 were run: lying BMCs (with the step clearing them) and replays. */
function withoutLiesAndReplays(steps: Schedule["steps"]): Schedule["steps"] {
  const liars = new Set(steps.filter((x) => x.kind === "bmc" && x.fault === "lying").map((x) => x.node));
  return steps.filter((x) => x.kind !== "replay" && !(x.kind === "bmc" && liars.has(x.node)));
}

describe("lying BMCs and replayed records (added after seeds 1-115 were run)", () => {
  const all = Array.from({ length: 300 }, (_, i) => scheduleFor(i, NODES));

  test("over 300 seeds both kinds occur, lies on the broken node and on healthy ones, replays of both windows", () => {
    const lies = all.filter((s) => s.steps.some((x) => x.kind === "bmc" && x.fault === "lying"));
    const replays = all.filter((s) => s.steps.some((x) => x.kind === "replay"));
    expect(lies.length).toBeGreaterThan(20);
    expect(replays.length).toBeGreaterThan(50);
    // a lie on the broken node itself occurs, and one on a healthy node too
    expect(
      lies.some((s) => s.steps.some((x) => x.kind === "bmc" && x.fault === "lying" && x.node === s.broken)),
    ).toBe(true);
    expect(
      lies.some((s) => s.steps.some((x) => x.kind === "bmc" && x.fault === "lying" && x.node !== s.broken)),
    ).toBe(true);
    // both windows: duplicates of the running incident and earlier schedules' records
    const windows = new Set(
      replays.flatMap((s) => s.steps.flatMap((x) => (x.kind === "replay" ? [x.windowMs] : []))),
    );
    expect([...windows].sort((a, b) => a - b)).toEqual([10_000, 300_000]);
  });

  test("a lie only on a Redfish BMC, and only on a node without other BMC trouble in the schedule", () => {
    for (const s of all)
      for (const x of s.steps)
        if (x.kind === "bmc" && x.fault === "lying") {
          expect(x.node).toBe("node-b");
          const others = s.steps.filter((y) => y.kind === "bmc" && y.node === x.node && y !== x);
          expect(others.every((y) => y.kind === "bmc" && y.fault === "none" && y.at > x.at)).toBe(true);
        }
  });

  test("a replay concerns no node, so the reset touches none for it", () => {
    for (const s of all) for (const x of s.steps) if (x.kind === "replay") expect(x.node).toBe(REPLAY_NODE);
  });
});

describe("slow BMCs up to 8 s a call (added after seeds 1-181 were run)", () => {
  const all = Array.from({ length: 400 }, (_, i) => scheduleFor(i, NODES));
  const slow = all.flatMap((s) => s.steps.filter((x) => x.kind === "bmc" && x.fault === "slow"));

  test("every slow BMC has a lateness from SLOW_LATENCIES_MS, and over 400 seeds each occurs, 8 s too", () => {
    expect(slow.length).toBeGreaterThan(10);
    for (const x of slow) expect(SLOW_LATENCIES_MS).toContain(x.kind === "bmc" && x.latencyMs);
    const seen = new Set(slow.map((x) => (x.kind === "bmc" ? x.latencyMs : undefined)));
    expect([...seen].sort((a, b) => a! - b!)).toEqual([...SLOW_LATENCIES_MS]);
    expect(describeSchedule(all[15]!)).toMatch(/bmc slow \d+s node-b/);
  });

  test("no other step carries a lateness", () => {
    for (const s of all)
      for (const x of s.steps)
        if (!(x.kind === "bmc" && x.fault === "slow")) expect("latencyMs" in x && x.latencyMs).toBeFalsy();
  });

  test("the chaos lab's policy fences a BMC 8 s late on a cold session (5 calls) and is a valid chain", () => {
    const worst = Math.max(...SLOW_LATENCIES_MS);
    expect(SLOW_BMC_TIMEOUTS.bmcCallMs).toBeGreaterThan(worst);
    expect(SLOW_BMC_TIMEOUTS.redfishLevelMs).toBeGreaterThan(5 * worst);
    const p = resolvePolicy({
      timeouts: {
        bmcCallTimeoutMs: SLOW_BMC_TIMEOUTS.bmcCallMs,
        powerOffTimeoutMs: SLOW_BMC_TIMEOUTS.roundMs,
        leaseDurationMs: SLOW_BMC_TIMEOUTS.leaseMs,
      },
    });
    expect(p.timeouts.leaseDurationMs).toBe(SLOW_BMC_TIMEOUTS.leaseMs);
    expect(SLOW_BMC_TIMEOUTS.roundMs).toBeGreaterThanOrEqual(
      Math.max(SLOW_BMC_TIMEOUTS.redfishLevelMs, SLOW_BMC_TIMEOUTS.ipmiLevelMs),
    );
    expect(SLOW_BMC_TIMEOUTS.ipmiLevelMs).toBeGreaterThan(SLOW_BMC_TIMEOUTS.bmcCallMs);
    // the lab's everyday chain is valid too
    expect(() =>
      resolvePolicy({
        timeouts: {
          bmcCallTimeoutMs: LAB_TIMEOUTS.bmcCallMs,
          powerOffTimeoutMs: LAB_TIMEOUTS.roundMs,
          leaseDurationMs: LAB_TIMEOUTS.leaseMs,
        },
      }),
    ).not.toThrow();
  });
});

const T: Timings = {
  detectMs: 6_000,
  roundMs: 10_000,
  backoffMs: 500,
  maxRounds: 3,
  leaseMs: 15_000,
  reconcileMs: 9_000,
  releaseMs: 5_000,
};
const T0 = Date.parse("2026-01-01T00:00:00Z");
const iso = (ms: number) => new Date(T0 + ms).toISOString();
const inc = (node: string, status: Partial<NodeFenceStatus> & Pick<NodeFenceStatus, "phase">): NodeFence =>
  newIncident(node, "boot-1", { ...emptyStatus(), ...status });
const released = (node: string, atMs: number) =>
  inc(node, { phase: "Released", timestamps: { confirmed: iso(atMs - 3000), released: iso(atMs) } });
const crashB = (extra: Schedule["steps"] = []): Schedule => ({
  seed: 1,
  broken: "node-b",
  steps: [{ at: 1_000, kind: "crash" as const, node: "node-b" }, ...extra].sort((a, b) => a.at - b.at),
});
/** Bound for a crash at 1 s with nothing else: 1000 + 6000 + 2 × 10500 + 15000 + 18000 + 5000. */
const BOUND = 1_000 + 6_000 + 21_000 + 15_000 + 18_000 + 5_000;

describe("liveness checker", () => {
  const verdict = (s: Schedule, incidents: NodeFence[], atMs = 120_000) =>
    checkLiveness({ schedule: s, t0: T0, now: T0 + atMs, incidents, timings: T });

  test("L1: a crashed node released within the bound passes; later or never fails", () => {
    expect(verdict(crashB(), [released("node-b", 4_000)])).toMatchObject({
      releaseBoundMs: BOUND,
      releasedMs: 4_000,
      failures: [],
    });
    expect(verdict(crashB(), [released("node-b", BOUND + 1)]).failures).toMatchObject([
      { rule: "L1", node: "node-b" },
    ]);
    expect(verdict(crashB(), []).failures[0]!.detail).toContain("not released");
  });

  test("L1: the broken node's own broker killed too still owes a release within the bound", () => {
    const s = crashB([{ at: 500, kind: "broker-kill", node: "node-b" }]);
    expect(verdict(s, []).releaseBoundMs).toBe(BOUND);
    expect(verdict(s, []).failures).toMatchObject([{ rule: "L1" }]);
  });

  test("L1: the bound starts when the BMC answers again and the peers' partial faults healed", () => {
    const s = crashB([
      { at: 500, kind: "bmc", node: "node-b", fault: "unreachable" },
      { at: 9_000, kind: "bmc", node: "node-b", fault: "none" },
      { at: 2_000, kind: "partial", node: "node-a", mode: "peers" },
      { at: 12_000, kind: "partial-heal", node: "node-a" },
    ]);
    expect(verdict(s, []).releaseBoundMs).toBe(BOUND - 1_000 + 12_000);
  });

  test.each<[string, Schedule]>([
    ["no broken node", { seed: 1, steps: [{ at: 0, kind: "fn-crash", node: "node-a" }] }],
    [
      "a hang that was resumed",
      {
        seed: 1,
        broken: "node-b",
        steps: [
          { at: 0, kind: "hang", node: "node-b" },
          { at: 9_000, kind: "resume", node: "node-b" },
        ],
      },
    ],
    ["a BMC that never answers again", crashB([{ at: 0, kind: "bmc", node: "node-b", fault: "stuck" }])],
    [
      "a BMC back only after every round failed",
      crashB([
        { at: 0, kind: "bmc", node: "node-b", fault: "unreachable" },
        { at: 80_000, kind: "bmc", node: "node-b", fault: "none" },
      ]),
    ],
  ])("L1 expects no release: %s", (_n, s) => {
    const v = verdict(s, []);
    expect(v.releaseBoundMs).toBeUndefined();
    expect(v.noReleaseBecause).toBeTruthy();
    expect(v.failures).toEqual([]);
  });

  // Seed 35 of the first long run: the BMC refused connections from 17.5 s to 33.8 s, the
  // node hung at 17.6 s; every round failed at once (ECONNREFUSED) between 26.6 and 28.0 s,
  // long before the worst case, and the incident ended a final FenceFailed.
  describe("rounds all spent while the BMC was broken", () => {
    const hangB: Schedule = {
      seed: 35,
      broken: "node-b",
      steps: [
        { at: 17_500, kind: "bmc", node: "node-b", fault: "unreachable" },
        { at: 17_600, kind: "hang", node: "node-b" },
        { at: 33_800, kind: "bmc", node: "node-b", fault: "none" },
      ],
    };
    const attempt = (round: number, from: number, to: number) => ({
      round,
      level: 0,
      driver: "redfish" as const,
      by: "fence/0",
      startedAt: iso(from),
      finishedAt: iso(to),
      result: "unreachable" as const,
      errorCode: "FF_BMC_UNREACHABLE",
    });
    const failed = (attempts: ReturnType<typeof attempt>[]) =>
      inc("node-b", { phase: "FenceFailed", round: 3, attempts, timestamps: { fenceFailed: iso(28_000) } });

    test("every attempt inside the broken stretch, final FenceFailed: no release owed", () => {
      const v = verdict(hangB, [
        failed([attempt(1, 26_600, 26_620), attempt(2, 27_280, 27_300), attempt(3, 27_930, 27_960)]),
      ]);
      expect(v.failures).toEqual([]);
      expect(v.releaseBoundMs).toBeUndefined();
      expect(v.noReleaseBecause).toMatch(
        /every round of .* ran while the BMC of node-b was broken \(17500\.\.33800 ms\)/,
      );
    });

    test("an attempt after the BMC answered again, or a retry still due: the release is owed", () => {
      const late = verdict(hangB, [
        failed([attempt(1, 26_600, 26_620), attempt(2, 27_280, 27_300), attempt(3, 34_000, 34_100)]),
      ]);
      expect(late.failures).toMatchObject([{ rule: "L1", node: "node-b" }]);
      const notFinal = inc("node-b", {
        phase: "FenceFailed",
        round: 1,
        retryNotBefore: iso(27_000),
        attempts: [attempt(1, 26_600, 26_620)],
      });
      // (and, 93 s on, L2: its retry is long overdue)
      expect(verdict(hangB, [notFinal]).failures.map((f) => `${f.rule} ${f.node}`)).toEqual([
        "L1 node-b",
        "L2 node-b",
      ]);
    });
  });

  test("a slow BMC still answers: the release is expected", () => {
    expect(verdict(crashB([{ at: 0, kind: "bmc", node: "node-b", fault: "slow" }]), []).releaseBoundMs).toBe(
      BOUND,
    );
  });

  test("a lying BMC still powers off as far as liveness goes: the release is expected (the lie is reported apart)", () => {
    const s = crashB([{ at: 0, kind: "bmc", node: "node-b", fault: "lying" }]);
    expect(verdict(s, []).releaseBoundMs).toBe(BOUND);
    expect(verdict(s, []).failures).toMatchObject([{ rule: "L1" }]);
    expect(verdict(s, [released("node-b", 3_000)]).failures).toEqual([]);
  });

  test("L2: an incident stuck in Fencing or Confirmed, or a retry long overdue, is a failure; a final FenceFailed is not", () => {
    const stall = T.roundMs + T.backoffMs + T.leaseMs + 2 * T.reconcileMs;
    const stuck = [
      inc("node-a", { phase: "Fencing", round: 1, timestamps: { fencing: iso(1_000) } }),
      inc("node-c", { phase: "Confirmed", timestamps: { confirmed: iso(1_000) } }),
    ];
    const v = verdict({ seed: 1, steps: [] }, stuck, 1_000 + stall + 1);
    expect(v.failures.map((f) => `${f.rule} ${f.node}`).sort()).toEqual(["L2 node-a", "L2 node-c"]);
    expect(verdict({ seed: 1, steps: [] }, stuck, 1_000 + stall).failures).toEqual([]);
    const overdue = inc("node-a", { phase: "FenceFailed", round: 1, retryNotBefore: iso(1_000) });
    expect(verdict({ seed: 1, steps: [] }, [overdue], 1_000 + stall + 1).failures).toHaveLength(1);
    const final = inc("node-a", { phase: "FenceFailed", round: 3, timestamps: { fenceFailed: iso(0) } });
    expect(verdict({ seed: 1, steps: [] }, [final], 600_000).failures).toEqual([]);
  });

  test("timings come from the policy", () => {
    const t = timingsOf(resolvePolicy({ reconcile: { intervalMs: 1_000, stalledAfterMs: 500 } }));
    expect(t.reconcileMs).toBe(1_700);
    expect(t.maxRounds).toBe(3);
  });

  test("detection waits out every probe's timeout: a silent node answers nothing", () => {
    // The lab's probe: every 100 ms, 150 ms timeout; a probe in flight skips the next tick,
    // so one starts every 200 ms; three misses within 3 × 200 + 150 ms.
    expect(silentMissesMs({ intervalMs: 100, timeoutMs: 150 }, 3)).toBe(750);
    // A timeout of exactly one interval still skips that tick (the probe is in flight).
    expect(silentMissesMs({ intervalMs: 100, timeoutMs: 100 }, 3)).toBe(700);
    expect(silentMissesMs({ intervalMs: 200, timeoutMs: 50 }, 3)).toBe(650);
    const p = resolvePolicy({
      probe: { intervalMs: 100, timeoutMs: 150 },
      suspicion: { missThreshold: 3, minSuspectMs: 250 },
      corroboration: { evidenceWindowMs: 5_000 },
    });
    expect(timingsOf(p).detectMs).toBe(750 + 250 + 5_000);
  });
});

describe("nodes a schedule may get fenced without breaking them", () => {
  test("on the compact plane a node cut off from its peers (and the etcd quorum); on the host plane none", () => {
    // seed 432 of the first compact-plane run: node-c cut off from its peers, its BMC unreachable
    const s = scheduleFor(432, NODES);
    expect(s.broken).toBeUndefined();
    expect(s.steps.some((x) => x.kind === "partial" && x.node === "node-c" && x.mode === "peers")).toBe(true);
    expect(mayBeFenced(s, "compact")).toEqual(["node-c"]);
    expect(mayBeFenced(s, "host")).toEqual([]);
    // cut off from the API (the host) only: it keeps its peers and their quorum
    const api = {
      seed: 0,
      steps: [{ at: 1, kind: "partial" as const, node: "node-a", mode: "api" as const }],
    };
    expect(mayBeFenced(api, "compact")).toEqual([]);
  });
});
