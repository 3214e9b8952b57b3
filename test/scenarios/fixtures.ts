// Builders for scenario and table tests of the pure handlers: nodes, incidents, events,
// a policy with fencing levels for every node. Test-only; no I/O.
import type { FfEvent } from "../../events/envelope.ts";
import { EVENT_TYPES, type EventType, type DataOf } from "../../events/catalog.ts";
import {
  emptyStatus,
  newIncident,
  type Attempt,
  type Evidence,
  type NodeFence,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import { resolvePolicy, type FencingPolicySpec, type FencingPolicySpecInput } from "../../core/policy.ts";
import type { NodeInfo, Self, View } from "../../core/decision.ts";

export const T0 = Date.parse("2025-01-01T00:00:00.000Z");
export const at = (ms: number) => new Date(T0 + ms).toISOString();

export const BOOT = {
  a: "aaaaaaaa-1111-4111-8111-111111111111",
  b: "bbbbbbbb-2222-4222-8222-222222222222",
  c: "cccccccc-3333-4333-8333-333333333333",
} as const;
export const NEW_BOOT = "ffffffff-9999-4999-8999-999999999999";

export const CONFIRM: Self = { identity: "system:serviceaccount:fastfence:confirm", replica: "confirm-0" };
export const FENCE: Self = { identity: "system:serviceaccount:fastfence:fence", replica: "fence-0" };
export const OTHER_FENCE: Self = { identity: "system:serviceaccount:fastfence:fence", replica: "fence-1" };
export const TRUSTED = [CONFIRM.identity];

export function policy(overrides: FencingPolicySpecInput = {}): FencingPolicySpec {
  return resolvePolicy({
    fencing: {
      nodes: [
        {
          nodeSelector: { matchLabels: { "fastfence.io/fence": "true" } },
          levels: [
            {
              driver: "redfish",
              address: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
              credentialsSecret: "bmc",
            },
            { driver: "ipmi", address: "ipmi://127.0.0.1:623", credentialsSecret: "bmc" },
          ],
        },
      ],
      ...(overrides.fencing ?? {}),
    },
    ...Object.fromEntries(Object.entries(overrides).filter(([k]) => k !== "fencing")),
  });
}

export function node(name: string, opts: Partial<NodeInfo> = {}): NodeInfo {
  return {
    name,
    bootId: (BOOT as Record<string, string>)[name] ?? `${name}-boot-0000`,
    ready: "True",
    // a control-plane node under the default policy (controlPlane.roleLabels)
    labels: { "fastfence.io/fence": "true", "node-role.kubernetes.io/control-plane": "" },
    ...opts,
  };
}

export const CLUSTER3 = () => [node("a"), node("b"), node("c")];

export function evidence(
  observerNode: string,
  target: string,
  atMs: number,
  kind: Evidence["kind"] = "probe",
): Evidence {
  return {
    observer: `event-source-${observerNode}`,
    observerNode,
    node: target,
    at: at(atMs),
    kind,
    consecutiveMisses: 3,
  };
}

let rv = 100;
export function incident(
  nodeName: string,
  status: Partial<NodeFenceStatus> & Pick<NodeFenceStatus, "phase">,
  bootId?: string,
): NodeFence {
  const boot = bootId ?? (BOOT as Record<string, string>)[nodeName] ?? `${nodeName}-boot-0000`;
  const inc = newIncident(nodeName, boot, { ...emptyStatus(), ...status });
  inc.metadata.resourceVersion = String(++rv);
  inc.metadata.namespace = "fastfence";
  return inc;
}

/** A Confirmed incident as confirm writes it (2 independent observers, trusted writer). */
export function confirmed(nodeName: string, atMs = 0, extra: Partial<NodeFenceStatus> = {}): NodeFence {
  return incident(nodeName, {
    phase: "Confirmed",
    confirmedBy: CONFIRM.identity,
    timestamps: { suspected: at(atMs - 100), confirmed: at(atMs) },
    evidence: [evidence("b", nodeName, atMs - 100), evidence("c", nodeName, atMs - 50)].filter(
      (e) => e.observerNode !== nodeName,
    ),
    ...extra,
  });
}

export function offAttempt(round: number, startMs: number, overrides: Partial<Attempt> = {}): Attempt {
  return {
    round,
    level: 0,
    driver: "redfish",
    by: FENCE.replica,
    startedAt: at(startMs),
    commandAt: at(startMs + 50),
    finishedAt: at(startMs + 400),
    result: "off-confirmed",
    readBackState: "Off",
    readBackAt: at(startMs + 400),
    ...overrides,
  };
}

let seq = 0;
export function event<T extends EventType>(
  type: T,
  subject: string,
  data: DataOf<T>,
  opts: { incident?: string; timeMs?: number; component?: string } = {},
): FfEvent {
  return {
    specversion: "1.0",
    id: `evt-${++seq}`,
    source: `/fastfence/${opts.component ?? "test"}/replica-0`,
    type,
    subject,
    time: at(opts.timeMs ?? 0),
    datacontenttype: "application/json",
    ...(opts.incident ? { ffincident: opts.incident } : {}),
    traceparent: "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01",
    data,
  };
}

export function observed(
  observerNode: string,
  target: string,
  misses: number,
  atMs: number,
  opts: { firstMissMs?: number; result?: "missed" | "restored" } = {},
): FfEvent {
  return event(
    EVENT_TYPES.nodeObserved,
    target,
    {
      observer: { replica: `event-source-${observerNode}`, node: observerNode },
      target,
      result: opts.result ?? "missed",
      consecutiveMisses: misses,
      firstMissAt: at(opts.firstMissMs ?? atMs - (misses - 1) * 200),
      lastOkAt: at((opts.firstMissMs ?? atMs - (misses - 1) * 200) - 200),
      at: at(atMs),
      probe: { kind: "tcp", port: 10250 },
    },
    { timeMs: atMs, component: "event-source" },
  );
}

export function suspected(
  observerNode: string,
  target: string,
  atMs: number,
  bootId?: string,
  kind: Evidence["kind"] = "probe",
): FfEvent {
  const boot = bootId ?? (BOOT as Record<string, string>)[target]!;
  const inc = newIncident(target, boot, emptyStatus()).metadata.name;
  return event(
    EVENT_TYPES.nodeSuspected,
    target,
    {
      node: target,
      bootId: boot,
      incident: inc,
      reason: kind === "probe" ? "ProbeMisses" : "NotReady",
      evidence: evidence(observerNode, target, atMs, kind),
    },
    { incident: inc, timeMs: atMs, component: "detect" },
  );
}

export function condition(
  target: string,
  ready: "True" | "False" | "Unknown",
  bootId: string,
  atMs: number,
  change: "ready" | "lease" | "bootId" = "ready",
): FfEvent {
  return event(
    EVENT_TYPES.nodeCondition,
    target,
    {
      observer: { replica: "event-source-b", node: "b" },
      node: target,
      bootId,
      change,
      ready,
      at: at(atMs),
    },
    { timeMs: atMs, component: "event-source" },
  );
}

export function view(v: Partial<View> & { node?: NodeInfo } = {}): View {
  return { openIncidents: [], nodes: CLUSTER3(), policy: policy(), trustedConfirmers: TRUSTED, ...v };
}
