// NodeFence conditions as a spec: what each phase and proof field says, in the shape
// `kubectl wait --for=condition=…` reads, and lastTransitionTime kept while a status holds.
import { describe, expect, test } from "vitest";
import { incidentConditions } from "../../../core/incident-conditions.ts";
import { emptyStatus, type NodeFenceStatus } from "../../../core/incident.ts";

const T1 = "2026-01-01T00:00:01.000Z";
const T2 = "2026-01-01T00:00:02.000Z";
const st = (s: Partial<NodeFenceStatus> & Pick<NodeFenceStatus, "phase">): NodeFenceStatus => ({
  ...emptyStatus(),
  ...s,
});
const statuses = (s: NodeFenceStatus) =>
  Object.fromEntries(incidentConditions(s, T1).map((c) => [c.type, `${c.status}/${c.reason}`]));

describe("incident conditions", () => {
  test.each([
    {
      name: "Suspected: nothing yet",
      s: st({ phase: "Suspected" }),
      want: {
        Confirmed: "False/NotConfirmed",
        Fenced: "False/NotFenced",
        Released: "False/NotReleased",
        ReadyForRecovery: "False/NotReleased",
      },
    },
    {
      name: "Blocked by a hold: Confirmed False with the hold's reason",
      s: st({ phase: "Blocked", reason: "PlannedReboot", message: "rebooting" }),
      want: { Confirmed: "False/PlannedReboot" },
    },
    {
      name: "Fencing after confirmation",
      s: st({ phase: "Fencing", timestamps: { confirmed: T1 } }),
      want: { Confirmed: "True/Confirmed", Fenced: "False/Fencing" },
    },
    {
      name: "FenceFailed: Fenced False with the failure's reason",
      s: st({ phase: "FenceFailed", reason: "PowerOffNotConfirmed", timestamps: { confirmed: T1 } }),
      want: { Fenced: "False/PowerOffNotConfirmed" },
    },
    {
      name: "Released: everything True, ready for recovery",
      s: st({ phase: "Released", powerOffConfirmedAt: T1, timestamps: { confirmed: T1, released: T2 } }),
      want: {
        Confirmed: "True/Confirmed",
        Fenced: "True/PowerOffConfirmed",
        Released: "True/WorkloadsReleased",
        ReadyForRecovery: "True/WorkloadsReleased",
      },
    },
    {
      name: "Recovered: the history stays True, no longer ready for recovery",
      s: st({
        phase: "Recovered",
        reason: "NodeRecovered",
        powerOffConfirmedAt: T1,
        timestamps: { confirmed: T1, released: T2 },
      }),
      want: { Released: "True/WorkloadsReleased", ReadyForRecovery: "False/Recovered" },
    },
    {
      name: "Closed unfenced (node rebooted): False with the closing reason",
      s: st({ phase: "Closed", reason: "NodeRebooted" }),
      want: { Confirmed: "False/NodeRebooted", Fenced: "False/NodeRebooted", Released: "False/NodeRebooted" },
    },
  ])("$name", ({ s, want }) => {
    expect(statuses(s)).toMatchObject(want);
  });

  test("lastTransitionTime moves only when a condition's status changes", () => {
    const first = incidentConditions(st({ phase: "Fencing", timestamps: { confirmed: T1 } }), T1);
    const later = incidentConditions(
      st({ phase: "FencedOff", powerOffConfirmedAt: T2, timestamps: { confirmed: T1 } }),
      T2,
      first,
    );
    const at = (cs: typeof first, t: string) => cs.find((c) => c.type === t)!.lastTransitionTime;
    expect(at(later, "Confirmed")).toBe(T1);
    expect(at(later, "Fenced")).toBe(T2);
  });
});
