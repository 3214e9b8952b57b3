// The reconciler (infra/runtime/reconciler.ts) over the real stage runner and in-memory
// adapters: a pass re-drives exactly the open incidents in the stage's phases, publishes
// what each resync emitted, keeps going past one that fails, and the loop runs passes on
// the policy's interval until stopped.
import { describe, expect, test } from "vitest";
import { fenceLeaseName, type OutgoingEvent } from "../../../core/decision.ts";
import { incidentName, statusOf, transition, type NodeFence } from "../../../core/incident.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import * as fence from "../../../functions/fence/handler.ts";
import { createLogger } from "../../../infra/log.ts";
import { startReconciler } from "../../../infra/runtime/reconciler.ts";
import { stageRunner } from "../../../infra/runtime/stage-executor.ts";
import {
  BOOT,
  CLUSTER3,
  FENCE,
  T0,
  TRUSTED,
  at,
  confirmed,
  keyOf,
  policy,
} from "../../scenarios/fixtures.ts";
import { MemoryCluster, MemoryPower, memoryAdapters, TestClock } from "../../scenarios/memory-adapters.ts";

const log = createLogger("test", { level: "silent" });

function setup(incidents: NodeFence[], nowMs = 60_000) {
  const clock = new TestClock(T0 + nowMs);
  const c = new MemoryCluster({ policy: policy(), nodes: CLUSTER3(), now: () => clock.now() });
  for (const n of ["a", "b", "c"]) c.publishObserver(n, keyOf(n).annotation, T0);
  for (const i of incidents) c.seedIncident(i);
  const ad = memoryAdapters(c, { power: new MemoryPower(c, clock) });
  const published: OutgoingEvent[] = [];
  const rec = startReconciler({
    stage: "fence",
    phases: fence.stage.resyncPhases!,
    wants: fence.stage.resyncWants!,
    runner: stageRunner(fence.stage, ad, FENCE, { trustedConfirmers: TRUSTED }),
    listOpen: () => ad.incidents.listOpen(),
    policy: (now) => ad.policy.get(now),
    publish: async (evs) => void published.push(...evs),
    handlerTimeoutMs: 10_000,
    clock: { now: () => clock.now(), sleep: () => new Promise(() => undefined) }, // no loop passes
    log,
  });
  return { c, ad, published, rec, clock };
}

const fencingIncident = (node: string) => {
  const inc = confirmed(node);
  return {
    ...inc,
    status: transition(statusOf(inc), "Fencing", at(100), { round: 1, fencingBy: "fence-9" }),
  };
};

describe("reconciler pass", () => {
  test("re-drives the stalled incidents of its phases only, and publishes what they emitted", async () => {
    const released = confirmed("b", 0, { phase: "Released" });
    const { c, published, rec } = setup([confirmed("a"), released, fencingIncident("c")]);
    const report = await rec.pass();
    await rec.stop();
    expect(report.considered).toBe(2); // a (Confirmed), c (Fencing); b is Released, no Off read back to look after
    expect(report.driven.sort()).toEqual([incidentName("a", BOOT.a), incidentName("c", BOOT.c)].sort());
    expect(c.incident(incidentName("a", BOOT.a))?.status?.phase).toBe("FencedOff");
    expect(c.incident(incidentName("c", BOOT.c))?.status).toMatchObject({
      phase: "FenceFailed",
      reason: "RoundInterrupted",
    });
    expect(published.map((e) => e.type).sort()).toEqual(
      [EVENT_TYPES.fenceFailed, EVENT_TYPES.nodeFenced].sort(),
    );
  });

  test("an incident whose driver still holds the Lease is left alone", async () => {
    const inc = fencingIncident("a");
    const { c, published, rec, clock } = setup([inc]);
    c.externalLease(fenceLeaseName("a"), "fence-9", clock.now() - 1_000);
    const report = await rec.pass();
    await rec.stop();
    expect(report).toEqual({ considered: 1, driven: [], failed: [] });
    expect(c.incident(inc.metadata.name)?.status?.phase).toBe("Fencing");
    expect(published).toEqual([]);
  });

  test("one failing resync is reported and the pass goes on with the others", async () => {
    const { c, rec } = setup([confirmed("a"), fencingIncident("c")]);
    c.failNext("incidents.writeStatus", new Error("API down"));
    const report = await rec.pass();
    await rec.stop();
    expect(report.failed).toHaveLength(1);
    expect(report.driven).toHaveLength(1);
  });
});

describe("reconciler loop", () => {
  test("runs a pass every reconcile.intervalMs (jittered) until stopped", async () => {
    const clock = new TestClock(T0 + 60_000);
    const c = new MemoryCluster({ policy: policy(), nodes: CLUSTER3(), now: () => clock.now() });
    const ad = memoryAdapters(c);
    const sleeps: number[] = [];
    let lists = 0;
    const rec = startReconciler({
      stage: "fence",
      phases: fence.stage.resyncPhases!,
      runner: stageRunner(fence.stage, ad, FENCE, { trustedConfirmers: TRUSTED }),
      listOpen: async () => {
        lists++;
        return [];
      },
      policy: (now) => ad.policy.get(now),
      publish: async () => undefined,
      handlerTimeoutMs: 10_000,
      clock: {
        now: () => clock.now(),
        sleep: (ms, signal) => {
          sleeps.push(ms);
          return new Promise((r, j) => {
            if (signal?.aborted) return j(signal.reason);
            setTimeout(r, 1);
          });
        },
      },
      log,
      random: () => 0.5,
    });
    while (lists < 3) await new Promise((r) => setTimeout(r, 2));
    await rec.stop();
    expect(sleeps.slice(0, 3)).toEqual([5_000, 5_000, 5_000]);
  });
});
