// Planned work is not failure, as a spec: which state holds which node (core/planned.ts),
// what confirm writes for a held node (Blocked with the hold's reason), what fence does
// when a hold begins after confirmation (no power command; the incident says why), Observe
// mode (the round stops short of the power command and recover closes the record), and an
// operator's request (confirmed through the same guards, with the request standing in for
// the observers). Plain data in, decisions out.
import { describe, expect, test } from "vitest";
import {
  holdOf,
  MC_DESIRED_CONFIG_ANNOTATION,
  MC_CURRENT_CONFIG_ANNOTATION,
  MC_STATE_ANNOTATION,
  MC_DESIRED_DRAIN_ANNOTATION,
  PAUSE_ANNOTATION,
  type HoldReason,
} from "../../../core/planned.ts";
import type { NodeInfo, PlannedView, View } from "../../../core/decision.ts";
import { decide as confirmDecide } from "../../../functions/confirm/handler.ts";
import { resync as operatorResync, resyncWants } from "../../../functions/confirm/operator.pure.ts";
import { decide as fenceDecide } from "../../../functions/fence/handler.ts";
import { resync as recoverResync } from "../../../functions/recover/resync.pure.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import { OBSERVED_REASON, incidentName, type NodeFence } from "../../../core/incident.ts";
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
  policy,
  suspected,
  view,
} from "../../scenarios/fixtures.ts";
import type { FencingPolicySpecInput } from "../../../core/policy.ts";

const NOW = 10_000;
const NONE: PlannedView = { nodeMaintenances: [], otherRemediators: [] };
const worker = (name: string, opts: Partial<NodeInfo> = {}) =>
  node(name, { labels: { "node-restriction.kubernetes.io/fastfence-fence": "true" }, ...opts });
const MC_REBOOT = {
  unschedulable: true,
  annotations: {
    [MC_STATE_ANNOTATION]: "Working",
    [MC_CURRENT_CONFIG_ANNOTATION]: "rendered-worker-1",
    [MC_DESIRED_CONFIG_ANNOTATION]: "rendered-worker-2",
  },
};

describe("holdOf: which planned state holds a node", () => {
  const cases: {
    name: string;
    node?: Partial<NodeInfo>;
    planned?: Partial<PlannedView>;
    policy?: FencingPolicySpecInput;
    elapsedMs?: number;
    operator?: boolean;
    expect: HoldReason | "none" | `expired:${HoldReason}`;
  }[] = [
    { name: "nothing planned", expect: "none" },
    {
      name: "cluster-wide pause",
      policy: { paused: true, pausedReason: "disk swap" },
      expect: "FencingPaused",
    },
    {
      name: "the node's pause annotation",
      node: { annotations: { [PAUSE_ANNOTATION]: "bios update" } },
      expect: "NodePaused",
    },
    {
      name: "another remediator selects the node",
      planned: { otherRemediators: ["NodeHealthCheck/nhc (remediation X/y)"] },
      expect: "OtherRemediator",
    },
    { name: "a NodeMaintenance", planned: { nodeMaintenances: ["nm-b"] }, expect: "NodeMaintenance" },
    {
      name: "a NodeMaintenance, not honoured by the policy",
      planned: { nodeMaintenances: ["nm-b"] },
      policy: { plannedWork: { nodeMaintenance: false } },
      expect: "none",
    },
    {
      name: "MachineConfig reboot: cordoned, Working, desired ≠ current",
      node: MC_REBOOT,
      expect: "PlannedReboot",
    },
    {
      name: "MachineConfig reboot: Degraded counts too",
      node: { ...MC_REBOOT, annotations: { ...MC_REBOOT.annotations, [MC_STATE_ANNOTATION]: "Degraded" } },
      expect: "PlannedReboot",
    },
    {
      name: "MachineConfig annotations without the cordon: a real failure",
      node: { annotations: MC_REBOOT.annotations },
      expect: "none",
    },
    {
      name: "cordoned, state Done, configs equal: a plain cordon is no plan",
      node: {
        unschedulable: true,
        annotations: {
          [MC_STATE_ANNOTATION]: "Done",
          [MC_CURRENT_CONFIG_ANNOTATION]: "r1",
          [MC_DESIRED_CONFIG_ANNOTATION]: "r1",
        },
      },
      expect: "none",
    },
    {
      name: "cordoned with an MCO drain requested",
      node: {
        unschedulable: true,
        annotations: { [MC_DESIRED_DRAIN_ANNOTATION]: "drain-rendered-worker-2" },
      },
      expect: "PlannedReboot",
    },
    {
      name: "cordoned, MCO uncordon requested: no plan",
      node: {
        unschedulable: true,
        annotations: { [MC_DESIRED_DRAIN_ANNOTATION]: "uncordon-rendered-worker-2" },
      },
      expect: "none",
    },
    {
      name: "MachineConfig reboot past maxPlannedRebootMs: treated as failed",
      node: MC_REBOOT,
      elapsedMs: 600_000,
      expect: "expired:PlannedReboot",
    },
    {
      name: "MachineConfig reboot just inside the bound",
      node: MC_REBOOT,
      elapsedMs: 599_999,
      expect: "PlannedReboot",
    },
    {
      name: "MachineConfig, not honoured by the policy",
      node: MC_REBOOT,
      policy: { plannedWork: { machineConfig: false } },
      expect: "none",
    },
    {
      name: "a cluster upgrade",
      planned: { clusterUpgrade: "Working towards 4.19.3" },
      expect: "ClusterUpgrade",
    },
    {
      name: "a cluster upgrade past the bound",
      planned: { clusterUpgrade: "Working towards 4.19.3" },
      policy: { plannedWork: { maxPlannedRebootMs: 60_000 } },
      elapsedMs: 60_000,
      expect: "expired:ClusterUpgrade",
    },
    {
      name: "pause wins over maintenance",
      planned: { nodeMaintenances: ["nm"] },
      policy: { paused: true },
      expect: "FencingPaused",
    },
    {
      name: "an operator's request: maintenance gives way",
      planned: { nodeMaintenances: ["nm"] },
      operator: true,
      expect: "none",
    },
    {
      name: "an operator's request: a planned reboot gives way",
      node: MC_REBOOT,
      operator: true,
      expect: "none",
    },
    {
      name: "an operator's request: a pause does not",
      policy: { paused: true },
      operator: true,
      expect: "FencingPaused",
    },
    {
      name: "an operator's request: another remediator does not",
      planned: { otherRemediators: ["MachineHealthCheck/m"] },
      operator: true,
      expect: "OtherRemediator",
    },
  ];
  test.each(cases)("$name → $expect", (c) => {
    const v = holdOf({
      node: worker("b", c.node ?? {}),
      planned: { ...NONE, ...c.planned },
      policy: policy(c.policy ?? {}),
      since: T0,
      now: T0 + (c.elapsedMs ?? 1_000),
      ...(c.operator ? { operatorRequested: true } : {}),
    });
    const got = v.held ? v.hold.reason : v.expired ? `expired:${v.expired.reason}` : "none";
    expect(got).toBe(c.expect);
    if (v.held) expect(v.hold.message).toContain(v.hold.reason === "FencingPaused" ? "paused" : "");
  });

  test("without a planned view (not read), only the policy and the node's own fields hold", () => {
    expect(holdOf({ node: worker("b"), planned: undefined, policy: policy(), since: T0, now: T0 }).held).toBe(
      false,
    );
    expect(
      holdOf({ node: worker("b", MC_REBOOT), planned: undefined, policy: policy(), since: T0, now: T0 }).held,
    ).toBe(true);
  });
});

/** a, one of 4 workers, Suspected with d's evidence: c's suspicion completes the quorum. */
const quorate = (v: Partial<View> = {}, nodeOpts: Partial<NodeInfo> = {}) =>
  view({
    node: worker("a", nodeOpts),
    nodes: [worker("a", nodeOpts), worker("b"), worker("c"), worker("d")],
    incident: incident("a", {
      phase: "Suspected",
      evidence: [evidence("d", "a", NOW - 100)],
      timestamps: { suspected: at(NOW - 1_000) },
    }),
    planned: NONE,
    ...v,
  });
const confirmOn = (v: View, now = NOW) =>
  confirmDecide({ event: suspected("c", "a", now), view: v, now: T0 + now, self: CONFIRM });

describe("confirm: a held node is Blocked with the hold's reason, never Confirmed", () => {
  test.each([
    ["NodeMaintenance", quorate({ planned: { ...NONE, nodeMaintenances: ["nm-a"] } })],
    ["ClusterUpgrade", quorate({ planned: { ...NONE, clusterUpgrade: "Working towards 4.19.3" } })],
    ["NodePaused", quorate({}, { annotations: { [PAUSE_ANNOTATION]: "firmware" } })],
    ["FencingPaused", quorate({ policy: policy({ paused: true }) })],
    ["PlannedReboot", quorate({}, MC_REBOOT)],
    [
      "OtherRemediator",
      quorate({
        planned: {
          ...NONE,
          otherRemediators: ["NodeHealthCheck/nhc (remediation SelfNodeRemediationTemplate/snr)"],
        },
      }),
    ],
  ])("%s", (reason, v) => {
    expect(confirmOn(quorate()).emit.map((e) => e.type)).toEqual([EVENT_TYPES.fenceRequested]); // the control
    const d = confirmOn(v);
    expect(d.actions.map((a) => a.kind)).not.toContain("writeLedger"); // no storm-guard slot taken
    const write = d.actions.find((a) => a.kind === "updateIncidentStatus");
    expect(write).toMatchObject({ status: { phase: "Blocked", reason } });
    expect(d.emit).toMatchObject([{ type: EVENT_TYPES.incidentBlocked, data: { reason } }]);
  });

  test("a planned reboot that outlasts its bound is confirmed, and the message says why", () => {
    const v = quorate({ policy: policy({ plannedWork: { maxPlannedRebootMs: 500 } }) }, MC_REBOOT);
    const d = confirmOn(v);
    const write = d.actions.find((a) => a.kind === "updateIncidentStatus");
    expect(write).toMatchObject({ status: { phase: "Confirmed" } });
    expect(JSON.stringify(write)).toContain("treated as failed");
  });
});

describe("fence: a hold that begins after confirmation stops the round before any power command", () => {
  const req = () =>
    event(
      EVENT_TYPES.fenceRequested,
      "a",
      {
        incident: confirmed("a").metadata.name,
        node: "a",
        bootId: BOOT.a,
        confirmedAt: at(0),
        observers: ["b", "c"],
      },
      { incident: confirmed("a").metadata.name, timeMs: 100, component: "confirm" },
    );
  const fence = (v: Partial<View>, inc: NodeFence = confirmed("a")) =>
    fenceDecide({
      event: req(),
      view: view({ incident: inc, node: node("a"), planned: NONE, ...v }),
      now: T0 + 200,
      self: FENCE,
    });

  test("paused: the incident keeps its phase, says FencingPaused, no Lease, no power-off", () => {
    const d = fence({ policy: policy({ paused: true, pausedReason: "change window" }) });
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(d.actions[0]).toMatchObject({ status: { phase: "Confirmed", reason: "FencingPaused" } });
    expect(JSON.stringify(d.actions[0])).toContain("change window");
  });
  test("still held, already said: nothing written", () => {
    const d = fence({ policy: policy({ paused: true }) }, confirmed("a", 0, { reason: "FencingPaused" }));
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "Held" });
    expect(d.actions).toEqual([]);
  });
  test("maintenance that began after confirmation holds too", () => {
    const d = fence({ planned: { ...NONE, nodeMaintenances: ["nm-a"] } });
    expect(d.actions.map((a) => a.kind)).not.toContain("powerOff");
    expect(d.actions[0]).toMatchObject({ status: { reason: "NodeMaintenance" } });
  });
  test("the hold ends: the round starts as usual", () => {
    expect(fence({}, confirmed("a", 0, { reason: "FencingPaused" })).actions.map((a) => a.kind)).toEqual([
      "takeLease",
      "updateIncidentStatus",
      "powerOff",
    ]);
  });
  test("Observe mode: no Lease, no power-off; reason Observed with the level it would use; fence.observed", () => {
    const d = fence({ policy: policy({ mode: "Observe" }) });
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(d.actions[0]).toMatchObject({ status: { phase: "Confirmed", reason: OBSERVED_REASON } });
    expect(JSON.stringify(d.actions[0])).toContain("would power off a with level 1 of 2 (redfish");
    expect(d.emit).toMatchObject([
      { type: EVENT_TYPES.fenceObserved, data: { level: 1, levels: 2, driver: "redfish" } },
    ]);
  });
  test("an observed incident is never fenced later, even in Enforce mode", () => {
    const d = fence({}, confirmed("a", 0, { reason: OBSERVED_REASON }));
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "AlreadyObserved" });
  });
  test("recover closes an observed incident (Closed, reason Observed) and leaves other Confirmed ones alone", () => {
    const resync = (inc: NodeFence) =>
      recoverResync({
        event: { kind: "resync", incident: inc.metadata.name, node: "a" },
        view: view({ incident: inc, node: node("a") }),
        now: T0 + 300,
        self: CONFIRM,
      });
    const obs = confirmed("a", 0, { reason: OBSERVED_REASON, message: "observe mode: would power off a" });
    expect(resync(obs).actions[0]).toMatchObject({
      status: { phase: "Closed", reason: OBSERVED_REASON, message: "observe mode: would power off a" },
    });
    expect(resync(confirmed("a")).outcome).toMatchObject({ kind: "ignored", code: "NotThisStage" });
  });
});

describe("an operator's request (spec.operatorRequest), confirmed by confirm's resync", () => {
  const REQ = { by: "alice", reason: "disk errors", at: at(0) };
  const requested = (status?: Parameters<typeof incident>[1]) => {
    const inc = incident("a", status ?? { phase: "Suspected" });
    if (!status) delete inc.status;
    inc.spec.operatorRequest = REQ;
    return inc;
  };
  const resync = (inc: NodeFence, v: Partial<View> = {}) =>
    operatorResync({
      event: { kind: "resync", incident: inc.metadata.name, node: "a" },
      view: view({
        incident: inc,
        node: worker("a"),
        nodes: [worker("a"), worker("b"), worker("c")],
        planned: NONE,
        ...v,
      }),
      now: T0 + NOW,
      self: CONFIRM,
    });

  test("the reconciler only wants incidents with a request", () => {
    expect(resyncWants(requested())).toBe(true);
    expect(resyncWants(incident("a", { phase: "Suspected" }))).toBe(false);
  });
  test("confirmed without observers: ledger slot first, Confirmed by confirm, fence.requested names the requester", () => {
    const d = resync(requested());
    expect(d.actions.map((a) => a.kind)).toEqual(["writeLedger", "updateIncidentStatus"]);
    expect(d.actions[1]).toMatchObject({
      status: { phase: "Confirmed", reason: "OperatorRequested", confirmedBy: CONFIRM.identity },
    });
    expect(d.emit).toMatchObject([
      { type: EVENT_TYPES.fenceRequested, data: { observers: [], requestedBy: "alice" } },
    ]);
  });
  /** The status confirm writes for the operator's request (observers: none). */
  const confirmedStatus = () => (resync(requested()).actions[1] as { status: NodeFence["status"] }).status!;
  /** fence's decision on `ev` for the request's incident with status `st`. */
  const fenceOn = (ev: Parameters<typeof fenceDecide>[0]["event"], st: NodeFence["status"]) =>
    fenceDecide({
      event: ev,
      view: view({ incident: { ...requested(), status: st }, node: worker("a"), planned: NONE }),
      now: T0 + NOW + 50,
      self: FENCE,
    });
  test("fence accepts it without a quorum of evidence (the request stands in for it)", () => {
    const st = confirmedStatus();
    const inc = { ...requested(), status: st };
    const d = fenceOn(
      event(
        EVENT_TYPES.fenceRequested,
        "a",
        {
          incident: inc.metadata.name,
          node: "a",
          bootId: BOOT.a,
          confirmedAt: at(NOW),
          requestedBy: "alice",
          observers: [],
        },
        { incident: inc.metadata.name, timeMs: NOW, component: "confirm" },
      ),
      st,
    );
    expect(d.actions.map((a) => a.kind)).toEqual(["takeLease", "updateIncidentStatus", "powerOff"]);
  });
  test("after a failed round, fence retries it without a quorum too (the request stands for every round)", () => {
    const st = confirmedStatus();
    // Round 1 ended without a confirmed power-off: the reason is no longer OperatorRequested.
    const failed = {
      ...st,
      phase: "FenceFailed" as const,
      reason: "PowerOffNotConfirmed",
      round: 1,
      retryNotBefore: at(NOW),
    };
    const inc = { ...requested(), status: failed };
    const d = fenceOn(
      event(
        EVENT_TYPES.fenceFailed,
        "a",
        {
          incident: inc.metadata.name,
          node: "a",
          bootId: BOOT.a,
          round: 1,
          reason: "power-off not confirmed",
          code: "PowerOffNotConfirmed",
          attempts: [],
          final: false,
        },
        { incident: inc.metadata.name, timeMs: NOW, component: "fence" },
      ),
      failed,
    );
    expect(d.outcome).not.toMatchObject({ kind: "rejected" });
    expect(d.actions.map((a) => a.kind)).toEqual(["takeLease", "updateIncidentStatus", "powerOff"]);
  });
  test("the same incident without a request, confirmed without evidence, is refused by fence (S2)", () => {
    const inc = confirmed("a", NOW, { evidence: [], reason: "OperatorRequested" });
    const d = fenceDecide({
      event: event(
        EVENT_TYPES.fenceRequested,
        "a",
        {
          incident: inc.metadata.name,
          node: "a",
          bootId: BOOT.a,
          confirmedAt: at(NOW),
          observers: ["b", "c"],
        },
        { incident: inc.metadata.name, timeMs: NOW, component: "confirm" },
      ),
      view: view({ incident: inc, node: node("a") }),
      now: T0 + NOW + 50,
      self: FENCE,
    });
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "ConfirmationBelowQuorum" });
  });
  test("the storm guard still blocks it", () => {
    const d = resync(requested(), { openIncidents: [incident("b", { phase: "Released" })] });
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(d.actions[0]).toMatchObject({ status: { phase: "Blocked", reason: "StormGuard" } });
  });
  test("a pause still holds it; maintenance does not", () => {
    expect(resync(requested(), { policy: policy({ paused: true }) }).actions[0]).toMatchObject({
      status: { phase: "Blocked", reason: "FencingPaused" },
    });
    expect(
      resync(requested(), { planned: { ...NONE, nodeMaintenances: ["nm-a"] } }).actions.map((a) => a.kind),
    ).toContain("writeLedger");
  });
  test("a node that rebooted since the request is not fenced (S3)", () => {
    const d = resync(requested(), { node: worker("a", { bootId: "another-boot" }) });
    expect(d.outcome).toMatchObject({ kind: "ignored", code: "StaleIncarnation" });
  });
  test("already Confirmed: nothing to do", () => {
    expect(resync(requested({ phase: "Confirmed" })).outcome).toMatchObject({
      kind: "ignored",
      code: "PhasePassed",
    });
  });
  test("the incident name is the node's incarnation", () => {
    expect(requested().metadata.name).toBe(incidentName("a", BOOT.a));
  });
});
