// Builders for scenario and table tests of the pure handlers: nodes, incidents, events,
// a policy with fencing levels for every node, and each observer node's signing key
// (observations and probe evidence are signed by default, as the event source signs
// them; the default view publishes every key). Test-only; no I/O.
import { fencedOffValue } from "../../core/fenced-off.ts";
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
import type { NodeInfo, ObserverInfo, Self, View } from "../../core/decision.ts";
import { claimOfEvidence } from "../../core/evidence-checks.ts";
import { ObserverKey } from "../../source/observer-key.ts";
import type { NodeObserved } from "../../events/schemas.ts";

/** One signing key per observer node, made on first use (as each event-source replica does at start). */
const KEYS = new Map<string, ObserverKey>();
export function keyOf(observerNode: string): ObserverKey {
  let k = KEYS.get(observerNode);
  if (!k) KEYS.set(observerNode, (k = new ObserverKey()));
  return k;
}

/**
 * The observers as the API publishes them: each node's key on its heartbeat Lease, renewed
 * at T0 with a duration that covers every test time (tests of a stale heartbeat set their own).
 */
export function observers(
  names: readonly string[] = ["a", "b", "c"],
  opts: Partial<ObserverInfo> = {},
): Record<string, ObserverInfo> {
  return Object.fromEntries(
    names.map((n) => [n, { keys: [keyOf(n).annotation], renewTime: at(0), durationMs: 1e9, ...opts }]),
  );
}

/** Probe evidence signed by its observer node's key (or `signer`'s). */
export function signEvidence(e: Evidence, signer = e.observerNode): Evidence {
  const { proof: _p, ...rest } = e;
  return { ...rest, proof: keyOf(signer).sign(claimOfEvidence(rest)) };
}

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
          nodeSelector: { matchLabels: { "node-restriction.kubernetes.io/fastfence-fence": "true" } },
          levels: [
            {
              driver: "redfish",
              address: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
              credentialsSecret: "bmc",
              insecure: true,
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
    labels: {
      "node-restriction.kubernetes.io/fastfence-fence": "true",
      "node-role.kubernetes.io/control-plane": "",
    },
    ...opts,
  };
}

/** The fenced-off fact fence writes on the node after the proven power-off (core/fenced-off.ts). */
export function markedFencedOff(inc: NodeFence): Pick<NodeInfo, "fencedOff"> {
  return { fencedOff: fencedOffValue(inc.metadata.name, inc.spec.bootId) };
}

export const CLUSTER3 = () => [node("a"), node("b"), node("c")];

export function evidence(
  observerNode: string,
  target: string,
  atMs: number,
  kind: Evidence["kind"] = "probe",
  bootId: string = bootOf(target),
): Evidence {
  if (kind !== "probe")
    return { observer: "@apiserver", observerNode: "@apiserver", node: target, at: at(atMs), kind };
  return signEvidence({
    observer: `event-source-${observerNode}`,
    observerNode,
    node: target,
    targetBootId: bootId,
    at: at(atMs),
    kind,
    consecutiveMisses: 3,
    firstMissAt: at(atMs - 400),
    heartbeatSynced: true,
  });
}

/** The boot ID fixtures give a node unless told otherwise. */
export function bootOf(nodeName: string): string {
  return (BOOT as Record<string, string>)[nodeName] ?? `${nodeName}-boot-0000`;
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
  opts: {
    firstMissMs?: number;
    result?: "missed" | "restored";
    /** When the observer last saw the target's heartbeat renewed (its clock). */
    heartbeatSeenMs?: number;
    heartbeatSynced?: boolean;
    /** Sign with this node's key instead of the observer node's; null: unsigned. */
    signer?: string | null;
    /** Envelope time, if not atMs. */
    timeMs?: number;
    /** The target's boot ID the observer claims to have probed (default: the fixture's). */
    targetBootId?: string;
  } = {},
): FfEvent {
  const data: NodeObserved = {
    observer: { replica: `event-source-${observerNode}`, node: observerNode },
    target,
    targetBootId: opts.targetBootId ?? bootOf(target),
    result: opts.result ?? "missed",
    consecutiveMisses: misses,
    firstMissAt: at(opts.firstMissMs ?? atMs - (misses - 1) * 200),
    lastOkAt: at((opts.firstMissMs ?? atMs - (misses - 1) * 200) - 200),
    at: at(atMs),
    probe: { kind: "tcp", port: 10250 },
    ...(opts.heartbeatSeenMs !== undefined ? { heartbeatSeenAt: at(opts.heartbeatSeenMs) } : {}),
    heartbeatSynced: opts.heartbeatSynced ?? true,
  };
  const signed = opts.signer === null ? data : keyOf(opts.signer ?? observerNode).signObservation(data);
  return event(EVENT_TYPES.nodeObserved, target, signed, {
    timeMs: opts.timeMs ?? atMs,
    component: "event-source",
  });
}

/** The same event with its data changed after signing (a tampered copy). */
export function tampered(ev: FfEvent, change: (d: NodeObserved) => NodeObserved): FfEvent {
  return { ...ev, data: change(structuredClone(ev.data as NodeObserved)) };
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
      evidence: evidence(observerNode, target, atMs, kind, boot),
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
  const nodes = v.nodes ?? CLUSTER3();
  return {
    openIncidents: [],
    nodes,
    policy: policy(),
    trustedConfirmers: TRUSTED,
    observers: observers(nodes.map((n) => n.name)),
    ...v,
  };
}
