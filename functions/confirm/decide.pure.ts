// confirm, the pure decision (S2, S4): accumulates suspicions of one node incarnation in
// its NodeFence incident and confirms only with evidence from at least `quorum` distinct
// independent observers (never an observer on the suspected node) inside the evidence
// window. Applies the storm guard and the etcd-quorum rule, which turn a confirmation
// into Blocked + incident.blocked. The fence request is emitted only after the Confirmed
// write succeeded (actions before emits). It never powers anything off. No I/O.
import {
  emptyStatus,
  incidentName,
  newIncident,
  statusOf,
  transition,
  type NodeFence,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import {
  ignored,
  iso,
  ms,
  outgoing,
  processed,
  rejected,
  type Action,
  type DecideInput,
  type Decision,
  heartbeatLeaseName,
  type ViewRequest,
} from "../../core/decision.ts";
import { levelsForNode } from "../../core/policy.ts";
import {
  controlPlaneRule,
  freshIndependentEvidence,
  hasQuorum,
  mergeEvidence,
  observerKey,
  stormGuard,
  type GuardVerdict,
} from "../../core/rules.ts";
import type { FfEvent } from "../../events/envelope.ts";
import { EVENT_TYPES, type AnyFfEvent } from "../../events/catalog.ts";
import type { FenceRequested, IncidentBlocked, NodeSuspected } from "../../events/schemas.ts";

export function locate(event: FfEvent): ViewRequest {
  const d = event.data as Partial<NodeSuspected>;
  return {
    node: event.subject,
    ...(d.incident ? { incident: d.incident } : {}),
    heartbeat: heartbeatLeaseName(event.subject),
    cluster: true,
  };
}

export function decide(input: DecideInput<FfEvent>): Decision {
  const ev = input.event as AnyFfEvent;
  if (ev.type !== EVENT_TYPES.nodeSuspected)
    return ignored("UnhandledEventType", `confirm does not handle ${ev.type}`);
  return onSuspected(ev.data, input);
}

/** What onSuspected has worked out when it reaches the guards (the only part that needs the cluster). */
interface AtGuards {
  inc: NodeFence | undefined;
  name: string;
  current: NodeFenceStatus | undefined;
  base: NodeFenceStatus;
  evidence: NodeFenceStatus["evidence"];
  fresh: NodeFenceStatus["evidence"];
  refreshUseful: boolean;
  nowIso: string;
}

/**
 * Whether decide needs the cluster lists (all nodes, open incidents) for this input: only
 * when a quorum is reached and the guards must run. The executor reads the view without
 * them first and skips those two lists when this is false — most suspicions are repeats
 * for an incident already past Suspected, and during a burst each list costs the API
 * server a full read.
 */
export function clusterNeeded(input: DecideInput<FfEvent>): boolean {
  const ev = input.event as AnyFfEvent;
  return ev.type === EVENT_TYPES.nodeSuspected && !("outcome" in beforeGuards(ev.data, input));
}

function onSuspected(d: NodeSuspected, input: DecideInput<FfEvent>): Decision {
  const at = beforeGuards(d, input);
  return "outcome" in at ? at : guarded(d, input, at);
}

/** Every check and write that needs no cluster view: a Decision, or where the guards start. */
function beforeGuards(d: NodeSuspected, { view, now }: DecideInput<FfEvent>): Decision | AtGuards {
  const { policy } = view;
  const node = view.node;
  if (!node) return ignored("NodeNotFound", `node ${d.node} is not in the API`);
  if (d.bootId !== node.bootId) {
    return ignored(
      "StaleIncarnation",
      `stale incarnation: suspicion for boot ${d.bootId}, ${d.node} now runs boot ${node.bootId}`,
    );
  }
  const name = incidentName(d.node, d.bootId);
  if (d.incident !== name)
    return rejected(
      "InconsistentEvent",
      `incident ${d.incident} does not match node ${d.node} boot ${d.bootId} (${name})`,
    );
  const e = d.evidence;
  if (e.node !== d.node) return rejected("InconsistentEvent", `evidence is about ${e.node}, not ${d.node}`);
  if (observerKey(e, policy) === undefined) {
    return e.kind === "probe"
      ? ignored(
          "ObserverOnNode",
          `observer ${e.observer} runs on the suspected node ${d.node}: not independent`,
        )
      : ignored("ConditionsNotCounted", "policy: node conditions do not count as observers");
  }
  const window = policy.corroboration.evidenceWindowMs;
  const age = now - ms(e.at);
  if (age > window)
    return ignored("StaleEvent", `stale evidence from ${e.observer}: ${age} ms old (window ${window} ms)`);

  const inc = view.incident;
  if (inc && inc.metadata.name !== name)
    return rejected("ViewMismatch", `view holds incident ${inc.metadata.name}, expected ${name}`);
  const current = inc ? statusOf(inc) : undefined;
  if (current && current.phase !== "Suspected" && current.phase !== "Blocked") {
    return ignored("PhasePassed", `incident ${name} already ${current.phase}`);
  }
  // A refresh of an observer's still-fresh evidence is not worth a write (bounded write rate).
  const prior = current?.evidence.find((x) => x.observer === e.observer && x.kind === e.kind);
  const refreshUseful = !prior || ms(e.at) - ms(prior.at) > window / 2;
  const evidence = refreshUseful ? mergeEvidence(current?.evidence ?? [], e) : (current?.evidence ?? [e]);
  const fresh = freshIndependentEvidence(evidence, d.node, now, policy);
  const nowIso = iso(now);
  const base: NodeFenceStatus = current ?? transition(emptyStatus(), "Suspected", nowIso);

  if (!hasQuorum(fresh, policy)) {
    const tally = `${fresh.length}/${policy.corroboration.quorum} independent observers`;
    if (!refreshUseful)
      return ignored("DuplicateEvidence", `duplicate evidence from ${e.observer} (${tally})`);
    return write(inc, d, { ...base, evidence }, `suspected ${d.node}: ${tally}`);
  }

  // A node that still heartbeats to the API server after its observers began missing it
  // is cut off from its peers, not dead: no fencing (a partial partition never fences).
  const alive = heartbeatAfterStreak(view.heartbeat?.renewTime, fresh, policy.suspicion.heartbeatVeto);
  if (alive) {
    const tally = `${fresh.length} observers miss ${d.node}, but it renewed its heartbeat at ${alive} (after the misses began): partitioned from its peers, not dead`;
    if (!refreshUseful) return ignored("HeartbeatSeen", tally);
    return write(
      inc,
      d,
      { ...base, evidence, reason: "HeartbeatSeen", message: tally },
      `not confirming ${d.node}: ${tally}`,
    );
  }
  return { inc, name, current, base, evidence, fresh, refreshUseful, nowIso };
}

/** The storm guard and the etcd-quorum rule, then Blocked or Confirmed (needs the cluster view). */
function guarded(d: NodeSuspected, { view, now, self }: DecideInput<FfEvent>, at: AtGuards): Decision {
  const { inc, name, current, base, evidence, fresh, refreshUseful, nowIso } = at;
  const verdict = guards(d, view, now);
  if (!verdict.ok) {
    if (current?.phase === "Blocked" && current.reason === verdict.reason) {
      if (!refreshUseful)
        return ignored("StillBlocked", `still blocked (${verdict.reason}): ${verdict.message}`);
      return write(inc, d, { ...current, evidence }, `still blocked (${verdict.reason}), evidence refreshed`);
    }
    const status = transition({ ...base, evidence }, "Blocked", nowIso, {
      reason: verdict.reason,
      message: verdict.message,
    });
    const data: IncidentBlocked = {
      incident: name,
      node: d.node,
      bootId: d.bootId,
      reason: verdict.reason,
      message: verdict.message,
      count: verdict.count,
      limit: verdict.limit,
    };
    return write(inc, d, status, `blocked ${d.node}: ${verdict.message}`, [
      outgoing(EVENT_TYPES.incidentBlocked, d.node, name, data),
    ]);
  }

  const observers = fresh.map((x) => `${x.observer}@${x.observerNode}`).sort();
  const status = transition({ ...base, evidence }, "Confirmed", nowIso, {
    confirmedBy: self.identity,
    reason: "Corroborated",
    message: `confirmed by ${fresh.length} independent observers: ${observers.join(", ")}`,
  });
  const data: FenceRequested = {
    incident: name,
    node: d.node,
    bootId: d.bootId,
    confirmedAt: status.timestamps.confirmed ?? nowIso,
    observers,
  };
  return write(inc, d, status, `confirmed ${d.node} (${observers.length} observers)`, [
    outgoing(EVENT_TYPES.fenceRequested, d.node, name, data),
  ]);
}

function guards(
  d: NodeSuspected,
  view: DecideInput["view"],
  now: number,
): Extract<GuardVerdict, { ok: false }> | { ok: true } {
  const { policy } = view;
  const node = view.node!;
  if (!levelsForNode(policy, node)) {
    return {
      ok: false,
      reason: "NoFencingLevels",
      message: `no fencing levels match node ${d.node} in the policy`,
      count: 0,
      limit: 0,
    };
  }
  const storm = stormGuard(d.node, view.openIncidents, view.nodes, now, policy);
  if (!storm.ok) return storm;
  return controlPlaneRule(node, view.openIncidents, view.nodes, now, policy);
}

function write(
  inc: NodeFence | undefined,
  d: NodeSuspected,
  status: NodeFenceStatus,
  detail: string,
  emit: ReturnType<typeof outgoing>[] = [],
): Decision {
  let action: Action;
  if (!inc) {
    action = { kind: "createIncident", incident: newIncident(d.node, d.bootId, status) };
  } else {
    const rv = inc.metadata.resourceVersion;
    if (!rv)
      return rejected(
        "MissingResourceVersion",
        `incident ${inc.metadata.name} was read without a resourceVersion`,
      );
    action = { kind: "updateIncidentStatus", name: inc.metadata.name, expectedResourceVersion: rv, status };
  }
  return processed(detail, [action], emit);
}

/**
 * The heartbeat renew time if it is later than the start of every fresh miss streak (the
 * latest start: older streaks, e.g. from an earlier partition, must not veto a crash).
 */
function heartbeatAfterStreak(
  renewTime: string | undefined,
  fresh: readonly { at: string; firstMissAt?: string | undefined }[],
  veto: boolean,
): string | undefined {
  if (!veto || !renewTime || fresh.length === 0) return undefined;
  const streakStart = Math.max(...fresh.map((e) => ms(e.firstMissAt ?? e.at)));
  return ms(renewTime) > streakStart ? renewTime : undefined;
}
