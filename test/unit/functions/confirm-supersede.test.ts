// confirm and an incident closed as back (fence's last look abandoned its last round, the
// node answering; nothing powered off, nothing released): a later failure of the same
// boot replaces it — the Closed one removed (guarded by its resourceVersion), a new one of the
// same name created — so a node that once paused and came back can still be fenced when it
// dies. Evidence observed before the close, or within the clock-skew bound after it (a late
// copy of the failure that incident was about), never replaces it, and an incident with a
// power-off read back or workloads released, or whose node is still down (closed as observed,
// or on an operator's release-slot), is never replaced. Pure, plain data.
import { describe, expect, test } from "vitest";
import { decide } from "../../../functions/confirm/handler.ts";
import type { Attempt, NodeFence, NodeFenceStatus } from "../../../core/incident.ts";
import { supersededBy } from "../../../core/superseded.ts";
import type { Action } from "../../../core/decision.ts";
import {
  CONFIRM,
  T0,
  at,
  incident,
  node,
  offAttempt,
  policy,
  suspected,
  view,
} from "../../scenarios/fixtures.ts";

const SKEW = policy().corroboration.maxClockSkewMs;
const CLOSED_AT = 1_000;
/** a's incident, Closed by recover at CLOSED_AT after its round was abandoned (found back). */
const looked: Attempt = {
  ...offAttempt(1, -350, { result: "abandoned" }),
  commandAt: undefined,
  readBackState: undefined,
  readBackAt: undefined,
  lastLook: { reason: "NodeResponding", probe: "answered", heartbeat: "renewed", ready: "True", back: true },
};
const closedBack = (extra: Partial<NodeFenceStatus> = {}): NodeFence =>
  incident("a", {
    phase: "Closed",
    reason: "NodeResponding",
    round: 1,
    attempts: [looked],
    timestamps: { suspected: at(-500), confirmed: at(-400), fenceFailed: at(-300), closed: at(CLOSED_AT) },
    ...extra,
  });
/** b's suspicion of a at `atMs` (its miss streak began 400 ms before). */
const run = (inc: NodeFence, atMs: number) =>
  decide({
    event: suspected("b", "a", atMs),
    view: view({ node: node("a"), incident: inc }),
    now: T0 + atMs + 50,
    self: CONFIRM,
  });
const kinds = (actions: Action[]) => actions.map((x) => x.kind);

describe("confirm: a new failure of a boot whose incident was closed as back", () => {
  test("evidence observed after the close (beyond the skew bound) → the Closed incident removed, a new Suspected one created", () => {
    const inc = closedBack();
    const d = run(inc, CLOSED_AT + SKEW + 1_000);
    expect(d.outcome.kind).toBe("processed");
    expect(kinds(d.actions)).toEqual(["removeClosedIncident", "createIncident"]);
    expect(d.actions[0]).toMatchObject({
      name: inc.metadata.name,
      expectedResourceVersion: inc.metadata.resourceVersion,
    });
    const created = (d.actions[1] as Extract<Action, { kind: "createIncident" }>).incident;
    expect(created.metadata.name).toBe(inc.metadata.name);
    expect(created.status).toMatchObject({ phase: "Suspected", round: 0, attempts: [] });
    expect(created.status!.evidence).toHaveLength(1);
  });

  test("a node that dies just after the close: its streak began within the skew bound, its later misses replace", () => {
    expect(kinds(run(closedBack(), CLOSED_AT + SKEW + 100).actions)).toEqual([
      "removeClosedIncident",
      "createIncident",
    ]); // the streak began at CLOSED_AT + SKEW - 300
  });

  test("evidence observed before the close, or within the skew bound after it → PhasePassed, nothing written", () => {
    for (const atMs of [CLOSED_AT - 2_000, CLOSED_AT + 400, CLOSED_AT + SKEW]) {
      const d = run(closedBack(), atMs);
      expect(d.outcome, `suspicion at ${atMs}`).toMatchObject({ kind: "ignored", code: "PhasePassed" });
      expect(d.actions).toEqual([]);
    }
  });

  test("a power-off read back, workloads released, a Recovered one, one closed as observed or on release-slot → never replaced", () => {
    const released = { taint: at(-100), podsDeleted: 1, volumeAttachmentsDeleted: 0, vmLaunchersDeleted: 0 };
    const later = CLOSED_AT + SKEW + 1_000;
    for (const inc of [
      closedBack({ timestamps: { suspected: at(-500), fencedOff: at(-200), closed: at(CLOSED_AT) } }),
      closedBack({ released }),
      closedBack({ phase: "Recovered", timestamps: { suspected: at(-500), recovered: at(CLOSED_AT) } }),
      // the node still down: closed as observed (no round), or on release-slot after a failed round
      closedBack({ reason: "Observed", round: 0, attempts: [] }),
      closedBack({ reason: "SlotReleased", attempts: [{ ...offAttempt(1, -350), result: "timeout" }] }),
    ]) {
      expect(run(inc, later).actions).toEqual([]);
      expect(supersededBy(inc, T0 + later, SKEW)).toBe(false);
    }
  });

  test("the rule on its own: only Closed, only with a close time, only later than it by more than the skew", () => {
    expect(supersededBy(undefined, T0 + 99_999, SKEW)).toBe(false);
    expect(supersededBy(closedBack({ timestamps: {} }), T0 + 99_999, SKEW)).toBe(false);
    expect(supersededBy(closedBack(), T0 + CLOSED_AT + SKEW, SKEW)).toBe(false);
    expect(supersededBy(closedBack(), T0 + CLOSED_AT + SKEW + 1, SKEW)).toBe(true);
    expect(supersededBy(closedBack(), Number.NaN, SKEW)).toBe(false);
  });
});
