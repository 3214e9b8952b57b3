// The bound of a planned reboot (plannedWork.maxPlannedRebootMs) counts from the start of
// the node's current silence: an incident of the same boot opened long before by a
// suspicion that led nowhere (one observer's miss streak, a veto; the node answered again
// and the incident stayed open) must not make a planned reboot "outlast" its bound the
// moment it begins.
import { describe, expect, test } from "vitest";
import { decide as confirmDecide } from "../../../functions/confirm/handler.ts";
import { decide as fenceDecide } from "../../../functions/fence/handler.ts";
import type { NodeInfo, PlannedView } from "../../../core/decision.ts";
import {
  MC_CURRENT_CONFIG_ANNOTATION,
  MC_DESIRED_CONFIG_ANNOTATION,
  MC_STATE_ANNOTATION,
} from "../../../core/planned.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import {
  BOOT,
  CONFIRM,
  FENCE,
  T0,
  at,
  confirmed,
  event,
  evidence,
  incident,
  node,
  signEvidence,
  suspected,
  view,
} from "../../scenarios/fixtures.ts";

const NOW = 10_000_000;
const TWO_HOURS = 7_200_000;
const NONE: PlannedView = { nodeMaintenances: [], otherRemediators: [] };
const MC_REBOOT: Partial<NodeInfo> = {
  unschedulable: true,
  annotations: {
    [MC_STATE_ANNOTATION]: "Working",
    [MC_CURRENT_CONFIG_ANNOTATION]: "rendered-worker-1",
    [MC_DESIRED_CONFIG_ANNOTATION]: "rendered-worker-2",
  },
};
const NODES = () => [node("a", MC_REBOOT), node("b"), node("c"), node("d")];

describe("a planned reboot's bound counts from the current silence, not from an old incident", () => {
  test("confirm: a node rebooting for a MachineConfig update, with a 2 h old Suspected incident, is Blocked", () => {
    const stale = incident("a", {
      phase: "Suspected",
      // opened 2 h ago by one observer; d's current evidence came with this silence
      timestamps: { suspected: at(NOW - TWO_HOURS) },
      evidence: [evidence("b", "a", NOW - TWO_HOURS), evidence("d", "a", NOW - 100)],
    });
    const d = confirmDecide({
      event: suspected("c", "a", NOW),
      view: view({ node: node("a", MC_REBOOT), nodes: NODES(), incident: stale, planned: NONE }),
      now: T0 + NOW,
      self: CONFIRM,
    });
    const write = d.actions.find((a) => a.kind === "updateIncidentStatus");
    expect(write).toMatchObject({ status: { phase: "Blocked", reason: "PlannedReboot" } });
    expect(JSON.stringify(write)).toContain("not fenced for up to 600 s");
  });

  test("confirm: the incident's own first suspicion still starts the bound of a silence it began with", () => {
    const inc = incident("a", {
      phase: "Blocked",
      reason: "PlannedReboot",
      timestamps: { suspected: at(NOW - 700_000), blocked: at(NOW - 699_000) },
      evidence: [signEvidence({ ...evidence("d", "a", NOW - 100), firstMissAt: at(NOW - 701_000) })],
    });
    const d = confirmDecide({
      event: suspected("c", "a", NOW),
      view: view({ node: node("a", MC_REBOOT), nodes: NODES(), incident: inc, planned: NONE }),
      now: T0 + NOW,
      self: CONFIRM,
    });
    const write = d.actions.find((a) => a.kind === "updateIncidentStatus");
    expect(write).toMatchObject({ status: { phase: "Confirmed" } });
    expect(JSON.stringify(write)).toContain("treated as failed");
  });

  test("fence: a round on such an incident is held, with no power command", () => {
    const inc = confirmed("a", NOW - 200, {
      timestamps: { suspected: at(NOW - TWO_HOURS), confirmed: at(NOW - 200) },
    });
    const name = inc.metadata.name;
    const d = fenceDecide({
      event: event(
        EVENT_TYPES.fenceRequested,
        "a",
        { incident: name, node: "a", bootId: BOOT.a, confirmedAt: at(NOW - 200), observers: ["b", "c"] },
        { incident: name, timeMs: NOW - 150, component: "confirm" },
      ),
      view: view({ incident: inc, node: node("a", MC_REBOOT), planned: NONE }),
      now: T0 + NOW,
      self: FENCE,
    });
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(d.actions[0]).toMatchObject({ status: { phase: "Confirmed", reason: "PlannedReboot" } });
  });
});
