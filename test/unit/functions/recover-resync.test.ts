// recover's reconciler ends a fenced incident (FencedOff, Released) whose node the API shows
// Ready with a new boot ID, as the node.condition event would have: a lost or stale event
// (chaos seed 166: node-a powered back on, its incident still Released 120 s later) never
// leaves a recovered node's incident open, holding its storm-guard slot. Pure, plain data.
import { describe, expect, test } from "vitest";
import { OUT_OF_SERVICE_TAINT, type Action, type NodeInfo } from "../../../core/decision.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import { RECOVER_RESYNC_PHASES, resync, resyncWants } from "../../../functions/recover/resync.pure.ts";
import {
  BOOT,
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
