// recover's reconciler ends an incident (Confirmed, FenceFailed, FencedOff, Released) whose
// node the API shows Ready with a new boot ID, as the node.condition event would have: a
// lost, stale or too-early event never leaves a recovered node's incident open, holding its
// storm-guard slot (chaos seed 166: node-a powered back on, its incident still Released 120 s
// later; seed 265: node-b back with a new boot while its second round ran, the incident left
// FenceFailed for 113 s after that round ended). Pure, plain data.
import { describe, expect, test } from "vitest";
import { OUT_OF_SERVICE_TAINT, type Action, type NodeInfo } from "../../../core/decision.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import { RECOVER_RESYNC_PHASES, resync, resyncWants } from "../../../functions/recover/resync.pure.ts";
import {
  BOOT,
  CONFIRM,
  FENCE,
  NEW_BOOT,
  T0,
  at,
  confirmed,
  node,
  offAttempt,
  view,
} from "../../scenarios/fixtures.ts";

const fenced = (phase: "FencedOff" | "Released") =>
  confirmed("a", 0, { phase, round: 1, attempts: [offAttempt(1, 0)], powerOffConfirmedAt: at(400) });

/** `n` null: the node is not in the API. */
const run = (
  inc: ReturnType<typeof fenced>,
  n: NodeInfo | null = node("a", { ready: "True", bootId: NEW_BOOT }),
) =>
  resync({
    event: { kind: "resync", incident: inc.metadata.name, node: "a" },
    view: view({ incident: inc, ...(n ? { node: n } : {}) }),
    now: T0 + 60_000,
    self: FENCE,
  });

describe("recover resync: a fenced incident whose node is back", () => {
  test.each(["FencedOff", "Released"] as const)(
    "%s, node Ready with a new boot → Recovered, taint removed, node.recovered emitted",
    (phase) => {
      const inc = fenced(phase);
      expect(RECOVER_RESYNC_PHASES).toContain(phase);
      expect(resyncWants(inc)).toBe(true);
      const d = run(inc);
      expect(d.outcome.kind).toBe("processed");
      expect(d.actions.map((a) => a.kind)).toEqual(["removeTaint", "updateIncidentStatus"]);
      expect(d.actions[0]).toMatchObject({ node: "a", taint: OUT_OF_SERVICE_TAINT });
      expect((d.actions[1] as Extract<Action, { kind: "updateIncidentStatus" }>).status).toMatchObject({
        phase: "Recovered",
        reason: "NodeRecovered",
        recoveredBootId: NEW_BOOT,
      });
      expect(d.emit.map((e) => e.type)).toEqual([EVENT_TYPES.nodeRecovered]);
    },
  );

  test("the node still on the incident's boot, not Ready, or gone → nothing", () => {
    const inc = fenced("Released");
    expect(run(inc, node("a", { ready: "True", bootId: BOOT.a })).outcome).toMatchObject({
      kind: "ignored",
      code: "NotARecovery",
    });
    expect(run(inc, node("a", { ready: "Unknown", bootId: NEW_BOOT })).outcome).toMatchObject({
      kind: "ignored",
      code: "NodeNotReady",
    });
    expect(run(inc, null).outcome).toMatchObject({ kind: "ignored", code: "NodeNotFound" });
    expect(run(inc, node("a", { ready: "True", bootId: BOOT.a })).actions).toEqual([]);
  });
});

describe("recover resync: an unfenced or failed incident whose node is back", () => {
  const failedRound = confirmed("a", 0, {
    phase: "FenceFailed",
    round: 2,
    reason: "PowerOffNotConfirmed",
    attempts: [{ ...offAttempt(2, 0), result: "timeout" }],
    retryNotBefore: at(50_000),
  });
  const waitingForFence = confirmed("a", 0, { confirmedBy: CONFIRM.identity });

  test("FenceFailed (a round still due), node Ready with a new boot → Recovered, nothing released", () => {
    expect(resyncWants(failedRound)).toBe(true);
    const d = run(failedRound);
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect((d.actions[0] as Extract<Action, { kind: "updateIncidentStatus" }>).status).toMatchObject({
      phase: "Recovered",
      reason: "NodeRecovered",
      recoveredBootId: NEW_BOOT,
    });
    expect(d.emit.map((e) => e.type)).toEqual([EVENT_TYPES.nodeRecovered]);
  });

  test("Confirmed, never fenced, node Ready with a new boot → Closed NodeRebooted", () => {
    expect(resyncWants(waitingForFence)).toBe(true);
    const d = run(waitingForFence);
    expect((d.actions[0] as Extract<Action, { kind: "updateIncidentStatus" }>).status).toMatchObject({
      phase: "Closed",
      reason: "NodeRebooted",
    });
  });

  test("the node on the incident's boot, not Ready, or without a boot ID → left alone", () => {
    for (const n of [
      node("a", { ready: "True", bootId: BOOT.a }),
      node("a", { ready: "Unknown", bootId: NEW_BOOT }),
      node("a", { ready: "True", bootId: "" }),
    ]) {
      expect(run(failedRound, n).actions).toEqual([]);
      expect(run(waitingForFence, n).actions).toEqual([]);
    }
  });
});
