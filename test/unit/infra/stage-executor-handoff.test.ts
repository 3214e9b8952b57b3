// The stage executor runs fence's leader hand-off (issue 46) where the decision puts it:
// after the proven power-off's fenced-off fact and FencedOff write, before the fencing Lease
// is let go, with the plan the pure fence returned; the hand-off's outcomes go back into
// fence's decide (core/decision.ts contract 4), and node.fenced is still emitted once,
// without waiting for the hand-off (contract 7: a slow hand-off never holds the release). Over
// the in-memory adapters (test/scenarios/memory-adapters.ts) and a recording hand-off double.
import { describe, expect, test } from "vitest";
import { fenceLeaseName, type Self } from "../../../core/decision.ts";
import { incidentName } from "../../../core/incident.ts";
import type { HandoffPlan, LeaseOutcome } from "../../../core/lease-handoff.ts";
import { DEFAULT_HANDOFF_LEASES } from "../../../core/policy-lease-handoff.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import * as fence from "../../../functions/fence/handler.ts";
import { stageHandler } from "../../../infra/runtime/stage-executor.ts";
import {
  BOOT,
  CLUSTER3,
  FENCE,
  T0,
  TRUSTED,
  at,
  confirmed,
  event,
  keyOf,
  policy,
} from "../../scenarios/fixtures.ts";
import {
  MemoryCluster,
  MemoryPower,
  TestClock,
  handlerContext,
  memoryAdapters,
} from "../../scenarios/memory-adapters.ts";

const NAME = incidentName("a", BOOT.a);
const NOW = T0 + 1000;

function world(p = policy(), gate?: Promise<void>) {
  const clock = new TestClock(NOW);
  const c = new MemoryCluster({ policy: p, nodes: CLUSTER3(), now: () => clock.now() });
  for (const n of ["a", "b", "c"]) c.publishObserver(n, keyOf(n).annotation, NOW);
  const plans: { plan: HandoffPlan; fencedOffWritten: boolean; leaseHeld: boolean }[] = [];
  const results: LeaseOutcome[] = [{ namespace: "kube-system", name: "kube-scheduler", outcome: "released" }];
  const ad = {
    ...memoryAdapters(c, { power: new MemoryPower(c, clock) }),
    handoff: {
      handOff: async (plan: HandoffPlan) => {
        plans.push({
          plan,
          fencedOffWritten: c.incident(NAME)?.status?.phase === "FencedOff",
          leaseHeld: c.leases.has(fenceLeaseName("a")) && !!c.leases.get(fenceLeaseName("a"))!.holder,
        });
        await gate;
        return results;
      },
    },
  };
  return { c, ad, plans, ctx: handlerContext(clock) };
}

const request = () =>
  event(
    EVENT_TYPES.fenceRequested,
    "a",
    { incident: NAME, node: "a", bootId: BOOT.a, confirmedAt: at(0), observers: ["b", "c"] },
    { incident: NAME },
  );
const handler = (w: ReturnType<typeof world>, self: Self = FENCE) =>
  stageHandler(fence.stage, w.ad, self, { trustedConfirmers: TRUSTED });

describe("fence's hand-off in the stage executor", () => {
  test("after the FencedOff write, before the fencing Lease is let go; node.fenced emitted once", async () => {
    const w = world();
    w.c.seedIncident(confirmed("a"));
    const r = await handler(w)(request(), w.ctx);
    expect(r.outcome.kind).toBe("processed");
    expect(r.emit.map((e) => e.type)).toEqual([EVENT_TYPES.nodeFenced]);
    expect(w.plans).toHaveLength(1);
    expect(w.plans[0]!.fencedOffWritten).toBe(true);
    expect(w.plans[0]!.leaseHeld).toBe(true);
    expect(w.plans[0]!.plan).toMatchObject({ node: "a", incident: NAME, leases: DEFAULT_HANDOFF_LEASES });
    const proven = w.c.incident(NAME)!.status!.powerOffConfirmedAt;
    expect(w.plans[0]!.plan.provenAt).toBe(proven);
  });

  test("a hand-off that has not ended holds neither node.fenced nor the handler", async () => {
    let end!: () => void;
    const w = world(policy(), new Promise<void>((r) => (end = r)));
    w.c.seedIncident(confirmed("a"));
    const r = await handler(w)(request(), w.ctx); // returns while the hand-off still waits
    expect(r.emit.map((e) => e.type)).toEqual([EVENT_TYPES.nodeFenced]);
    expect(w.plans).toHaveLength(1);
    expect(w.c.incident(NAME)?.status?.phase).toBe("FencedOff");
    end();
  });

  test("turned off in the policy: no hand-off at all", async () => {
    const w = world(policy({ leaseHandoff: { enabled: false } }));
    w.c.seedIncident(confirmed("a"));
    const r = await handler(w)(request(), w.ctx);
    expect(r.emit.map((e) => e.type)).toEqual([EVENT_TYPES.nodeFenced]);
    expect(w.plans).toEqual([]);
  });
});
