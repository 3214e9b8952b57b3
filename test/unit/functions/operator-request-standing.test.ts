// An operator's request (spec.operatorRequest) expires, can be withdrawn
// (spec.operatorWithdrawal), and passes fence's last look like any other round
// (core/operator-request.ts, functions/confirm/operator.pure.ts, functions/fence/*).
// On 6f7efbe: a request the storm guard blocked was confirmed hours later, a withdrawn one was
// confirmed and fenced, and its rounds carried no last look. Plain data in, decisions out.
import { describe, expect, test } from "vitest";
import type { Action, NodeInfo, PlannedView, View } from "../../../core/decision.ts";
import { resync as operatorResync } from "../../../functions/confirm/operator.pure.ts";
import { decide as fenceDecide } from "../../../functions/fence/handler.ts";
import { requestStanding } from "../../../core/operator-request.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { NodeFence, NodeFenceStatus } from "../../../core/incident.ts";
import {
  BOOT,
  CONFIRM,
  FENCE,
  T0,
  at,
  event,
  incident,
  node,
  policy,
  view,
} from "../../scenarios/fixtures.ts";

const NONE: PlannedView = { nodeMaintenances: [], otherRemediators: [] };
const worker = (name: string, opts: Partial<NodeInfo> = {}) =>
  node(name, { labels: { "node-restriction.kubernetes.io/fastfence-fence": "true" }, ...opts });
const REQ = { by: "alice", reason: "disk errors", at: at(0) };
const WITHDRAWAL = { by: "bob", reason: "false alarm", at: at(1000) };
const MIN = 60_000;

const requested = (status?: Partial<NodeFenceStatus> & Pick<NodeFenceStatus, "phase">, withdrawn = false) => {
  const inc = incident("a", status ?? { phase: "Suspected" });
  if (!status) delete inc.status;
  inc.spec.operatorRequest = REQ;
  if (withdrawn) Object.assign(inc.spec, { operatorWithdrawal: WITHDRAWAL });
  return inc;
};
const resyncAt = (inc: NodeFence, nowMs: number, v: Partial<View> = {}) =>
  operatorResync({
    event: { kind: "resync", incident: inc.metadata.name, node: "a" },
    view: view({
      incident: inc,
      node: worker("a"),
      nodes: [worker("a"), worker("b"), worker("c")],
      planned: NONE,
      ...v,
    }),
    now: T0 + nowMs,
    self: CONFIRM,
  });
/** The incident as confirm confirms the request `afterMs` after it was made. */
const confirmedOnRequest = (afterMs: number, extra: Partial<NodeFenceStatus> = {}): NodeFenceStatus => ({
  phase: "Confirmed",
  confirmedBy: CONFIRM.identity,
  reason: "OperatorRequested",
  timestamps: { suspected: at(0), confirmed: at(afterMs) },
  evidence: [],
  round: 0,
  attempts: [],
  ...extra,
});
const fenceRequested = (inc: NodeFence, confirmedAtMs: number) =>
  event(
    EVENT_TYPES.fenceRequested,
    "a",
    {
      incident: inc.metadata.name,
      node: "a",
      bootId: BOOT.a,
      confirmedAt: at(confirmedAtMs),
      requestedBy: "alice",
      observers: [],
    },
    { incident: inc.metadata.name, timeMs: confirmedAtMs, component: "confirm" },
  );
const fenceFailed = (inc: NodeFence, nowMs: number) =>
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
    { incident: inc.metadata.name, timeMs: nowMs, component: "fence" },
  );
const fenceAt = (inc: NodeFence, confirmedAtMs: number, nowMs: number) =>
  fenceDecide({
    event: inc.status?.phase === "FenceFailed" ? fenceFailed(inc, nowMs) : fenceRequested(inc, confirmedAtMs),
    view: view({
      incident: inc,
      node: worker("a", { probeAddress: { host: "10.0.0.1" } }),
      planned: NONE,
    }),
    now: T0 + nowMs,
    self: FENCE,
  });
const powerOff = (actions: readonly Action[]) =>
  actions.find((a): a is Extract<Action, { kind: "powerOff" }> => a.kind === "powerOff");

describe("requestStanding: the rule, on plain data", () => {
  const p = policy();
  test("the default expiry is 10 minutes (FencingPolicy fencing.operatorRequestMaxAgeMs)", () => {
    expect(p.fencing.operatorRequestMaxAgeMs).toBe(10 * MIN);
  });
  const cases: [string, NodeFence, number, ReturnType<typeof requestStanding>["code"]][] = [
    ["no request", incident("a", { phase: "Suspected" }), 0, "NoOperatorRequest"],
    ["fresh", requested(), 9 * MIN, undefined],
    ["at the limit plus the skew bound", requested(), 10 * MIN + 2000, undefined],
    ["just past the limit plus the skew bound", requested(), 10 * MIN + 2001, "OperatorRequestExpired"],
    ["withdrawn, however fresh", requested(undefined, true), 1500, "OperatorRequestWithdrawn"],
  ];
  test.each(cases)("%s", (_n, inc, nowMs, code) => {
    expect(requestStanding(inc.spec, T0 + nowMs, p).code).toBe(code);
  });
  test("a request time that does not parse is expired, never standing", () => {
    const inc = requested();
    inc.spec.operatorRequest = { ...REQ, at: "not a time" };
    expect(requestStanding(inc.spec, T0, p).code).toBe("OperatorRequestExpired");
  });
});

describe("confirm: an expired or withdrawn request is refused and recorded", () => {
  test("a request the storm guard blocked is not confirmed two hours later: Blocked, OperatorRequestExpired", () => {
    const blocked = requested({ phase: "Blocked", reason: "StormGuard", timestamps: { blocked: at(10) } });
    const d = resyncAt(blocked, 120 * MIN);
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(d.actions[0]).toMatchObject({ status: { phase: "Blocked", reason: "OperatorRequestExpired" } });
    expect(d.emit).toMatchObject([
      { type: EVENT_TYPES.incidentBlocked, data: { reason: "OperatorRequestExpired" } },
    ]);
  });
  test("a fresh request is still confirmed (ledger slot, Confirmed)", () => {
    expect(resyncAt(requested(), 5 * MIN).actions.map((a) => a.kind)).toEqual([
      "writeLedger",
      "updateIncidentStatus",
    ]);
  });
  test("a withdrawn request is not confirmed: Blocked, OperatorRequestWithdrawn", () => {
    const d = resyncAt(requested(undefined, true), 2000);
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(d.actions[0]).toMatchObject({ status: { phase: "Blocked", reason: "OperatorRequestWithdrawn" } });
  });
  test("once recorded, a repeat writes nothing", () => {
    const st = { phase: "Blocked" as const, reason: "OperatorRequestWithdrawn", timestamps: {} };
    expect(resyncAt(requested(st, true), 3000).outcome).toMatchObject({
      kind: "ignored",
      code: "StillBlocked",
    });
  });
});

describe("fence: a confirmed request withdrawn before its round, and the last look", () => {
  test("withdrawn after confirmation: no power command; Closed, OperatorRequestWithdrawn (its slot freed)", () => {
    const inc = requested(confirmedOnRequest(500), true);
    const d = fenceAt(inc, 500, 2000);
    expect(powerOff(d.actions)).toBeUndefined();
    expect(d.actions.map((a) => a.kind)).toEqual(["updateIncidentStatus"]);
    expect(d.actions[0]).toMatchObject({ status: { phase: "Closed", reason: "OperatorRequestWithdrawn" } });
  });
  test("a round of an operator's request takes the last look, like any other (never skipped)", () => {
    const inc = requested(confirmedOnRequest(500));
    const off = powerOff(fenceAt(inc, 500, 1000).actions);
    expect(off).toBeDefined();
    expect(off!.look).toMatchObject({ node: "a", probe: { host: "10.0.0.1" } });
  });
  test("confirmed in time, a later round still goes (expiry bounds the confirmation, not the retries)", () => {
    const failed = confirmedOnRequest(5 * MIN, {
      phase: "FenceFailed",
      reason: "PowerOffNotConfirmed",
      round: 1,
      retryNotBefore: at(20 * MIN),
    });
    const inc = requested(failed);
    const d = fenceAt(inc, 5 * MIN, 20 * MIN);
    expect(d.outcome).not.toMatchObject({ kind: "rejected" });
    expect(powerOff(d.actions)?.look).toBeDefined();
  });
  test("an incident whose request was confirmed only after it expired needs the observers' quorum", () => {
    const inc = requested(confirmedOnRequest(60 * MIN));
    expect(fenceAt(inc, 60 * MIN, 60 * MIN + 100).outcome).toMatchObject({
      kind: "rejected",
      code: "OperatorRequestExpired",
    });
  });
});
