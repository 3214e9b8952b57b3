// confirm, the pure decision (S2, S4): accumulates suspicions of one node incarnation in
// its NodeFence incident and confirms only with evidence from at least `quorum` distinct
// independent observers (never an observer on the suspected node) inside the evidence
// window. A hold for planned work (core/planned.ts: pause, maintenance, MachineConfig
// reboot, cluster upgrade, another remediator), the storm guard and the etcd-quorum rule
// turn a confirmation into Blocked + incident.blocked with the reason. The fence request is emitted only after the Confirmed
// write succeeded (actions before emits), and the Confirmed write comes only after the
// incident took its slot in the admission ledger (core/admission-ledger.ts). Evidence is
// checked against the cluster, not taken from the record: the incoming probe evidence
// must pass its origin checks (else the suspicion is rejected), and every stored piece
// counts only while it still passes them (probe) or the API still says so
// (condition/lease). The heartbeat veto compares times of one observer's clock. A suspicion
// of a new failure of an incarnation whose incident was closed as back (nothing powered off)
// replaces that incident (core/superseded.ts supersededBy). It never powers anything off. No I/O.
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
  type ViewRequest,
} from "../../core/decision.ts";
import {
  apiStillSays,
  checkClaim,
  claimOfEvidence,
  countsNow,
  futureTimestamp,
} from "../../core/evidence-checks.ts";
import { admit } from "../../core/admission-ledger.ts";
import { supersededBy } from "../../core/superseded.ts";
import { holdOf, suspectedSince } from "../../core/planned.ts";
import { levelsForNode } from "../../core/policy.ts";
import {
  controlPlaneRule,
  freshIndependentEvidence,
  hasQuorum,
  heartbeatSighting,
  mergeEvidence,
  observerKey,
  stormGuard,
  type GuardVerdict,
} from "../../core/rules.ts";
import type { FfEvent } from "../../events/envelope.ts";
import type { PreViewInput } from "../contract.ts";
import { EVENT_TYPES, type AnyFfEvent } from "../../events/catalog.ts";
import type { FenceRequested, IncidentBlocked, NodeSuspected } from "../../events/schemas.ts";

export function locate(event: FfEvent): ViewRequest {
  const d = event.data as Partial<NodeSuspected>;
  return {
    node: event.subject,
    ...(d.incident ? { incident: d.incident } : {}),
    cluster: true,
    nodeList: true,
    observers: true,
    kubeletLease: true,
    planned: true,
  };
}

/**
 * What a suspicion says (PureStage.sameAs): its subject and its whole data, evidence and
 * signature included. Every detect replica forwards the same evidence, so the copies
 * share it. A copy whose envelope time lies in the future gets no key: it is decided in
 * full and refused (FutureTimestamp), never skipped as a duplicate.
 */
export function sameAs({ event, policy, now }: PreViewInput): string | undefined {
  const ev = event as AnyFfEvent;
  if (ev.type !== EVENT_TYPES.nodeSuspected) return undefined;
  if (!futureTimestamp({ time: ev.time }, now, policy).ok) return undefined;
  return JSON.stringify([ev.subject, ev.data]);
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
  if (ev.type !== EVENT_TYPES.nodeSuspected) return false;
  return !("outcome" in beforeGuards(ev.data, withoutSuperseded(ev.data, input).input));
}

function onSuspected(d: NodeSuspected, suspicion: DecideInput<FfEvent>): Decision {
  const { input, superseded } = withoutSuperseded(d, suspicion);
  const at = beforeGuards(d, input);
  const decision = "outcome" in at ? at : guarded(d, input, at);
  return superseded ? replacing(superseded, decision) : decision;
}

/**
 * A suspicion of a new failure of an incarnation whose incident was closed as back, nothing
 * powered off (core/superseded.ts supersededBy: the evidence was observed after the close) is decided
 * as if there were no incident; `superseded` is that incident, which the write replaces.
 */
function withoutSuperseded(
  d: NodeSuspected,
  input: DecideInput<FfEvent>,
): { input: DecideInput<FfEvent>; superseded?: NodeFence } {
  const inc = input.view.incident;
  if (!inc || inc.metadata.name !== incidentName(d.node, d.bootId) || inc.spec.bootId !== d.bootId)
    return { input };
  if (!supersededBy(inc, ms(d.evidence.at), input.view.policy.corroboration.maxClockSkewMs)) return { input };
  const { incident: _closed, ...view } = input.view;
  return { input: { ...input, view }, superseded: inc };
}

/**
 * The decision on a superseded incident: a create of the new incident (same name) is preceded
 * by the removal of the Closed one, guarded by its resourceVersion; anything else is unchanged.
 */
function replacing(closed: NodeFence, decision: Decision): Decision {
  const at = decision.actions.findIndex((a) => a.kind === "createIncident");
  const rv = closed.metadata.resourceVersion;
  if (at < 0) return decision;
  if (!rv)
    return rejected(
      "MissingResourceVersion",
      `incident ${closed.metadata.name} was read without a resourceVersion`,
    );
  const remove: Action = {
    kind: "removeClosedIncident",
    name: closed.metadata.name,
    expectedResourceVersion: rv,
  };
  const detail = `${decision.outcome.kind === "processed" ? (decision.outcome.detail ?? "") : ""}; replaces ${closed.metadata.name}, Closed (${statusOf(closed).reason ?? "no reason"}) at ${statusOf(closed).timestamps.closed}: a new failure of the same boot`;
  return processed(
    detail,
    [...decision.actions.slice(0, at), remove, ...decision.actions.slice(at)],
    decision.emit,
  );
}

/** Every check and write that needs no cluster view: a Decision, or where the guards start. */
function beforeGuards(d: NodeSuspected, { event, view, now }: DecideInput<FfEvent>): Decision | AtGuards {
  const { policy } = view;
  const e = d.evidence;
  const future = futureTimestamp(
    {
      time: event.time,
      at: e.at,
      firstMissAt: e.firstMissAt,
      heartbeatSeenAt: e.heartbeatSeenAt,
      heartbeatRenewedBy: e.heartbeatRenewedBy,
    },
    now,
    policy,
  );
  if (!future.ok) return rejected(future.code, `suspicion of ${d.node}: ${future.reason}`);
  if (e.node !== d.node) return rejected("InconsistentEvent", `evidence is about ${e.node}, not ${d.node}`);
  const ctx = {
    observers: view.observers,
    nodes: view.nodes,
    policy,
    now,
    node: view.node,
    kubeletLease: view.kubeletLease,
  };
  if (e.kind === "probe" && view.node?.outOfService)
    return ignored("NodeOutOfService", `${d.node} carries the out-of-service taint: off the probe ring`);
  if (e.kind === "probe" && e.observerNode !== d.node) {
    const origin = checkClaim(claimOfEvidence(e), e.proof, ctx);
    if (!origin.ok) return rejected(origin.code, `suspicion of ${d.node} by ${e.observer}: ${origin.reason}`);
    if (policy.suspicion.heartbeatVeto && e.heartbeatSynced !== true)
      return ignored("HeartbeatWatchNotSynced", `observer ${e.observer} had no synced heartbeat watch`);
  }
  const node = view.node;
  if (!node) return ignored("NodeNotFound", `node ${d.node} is not in the API`);
  if (d.bootId !== node.bootId) {
    return ignored(
      "StaleIncarnation",
      `stale incarnation: suspicion for boot ${d.bootId}, ${d.node} now runs boot ${node.bootId}`,
    );
  }
  if (e.kind === "probe" && e.targetBootId !== d.bootId)
    return rejected(
      "InconsistentEvent",
      `evidence is about boot ${e.targetBootId ?? "(none)"} of ${d.node}, the suspicion about boot ${d.bootId}`,
    );
  const name = incidentName(d.node, d.bootId);
  if (d.incident !== name)
    return rejected(
      "InconsistentEvent",
      `incident ${d.incident} does not match node ${d.node} boot ${d.bootId} (${name})`,
    );
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
  if (e.kind !== "probe" && !apiStillSays(e.kind, ctx, policy, now))
    return e.kind === "condition"
      ? ignored("NodeReady", `${d.node} is Ready in the API`)
      : ignored("LeaseNotStale", `${d.node}'s kubelet Lease is not stale in the API`);

  const inc = view.incident;
  if (inc && inc.metadata.name !== name)
    return rejected("ViewMismatch", `view holds incident ${inc.metadata.name}, expected ${name}`);
  const current = inc ? statusOf(inc) : undefined;
  if (current && current.phase !== "Suspected" && current.phase !== "Blocked") {
    return ignored("PhasePassed", `incident ${name} already ${current.phase}`);
  }
  // A refresh of an observer's still-fresh evidence is not worth a write on its own (bounded
  // write rate), but it is always decided on: a newer observation can lift a heartbeat veto
  // (its sighting grows older than a Lease duration), and a decision that changes the phase
  // is written with it.
  const prior = current?.evidence.find((x) => x.observer === e.observer && x.kind === e.kind);
  const refreshUseful = !prior || ms(e.at) - ms(prior.at) > window / 2;
  const evidence = mergeEvidence(current?.evidence ?? [], e);
  // Counted: only what still checks out against the cluster now (stored evidence too).
  const fresh = freshIndependentEvidence(
    evidence.filter((x) => countsNow(x, ctx)),
    d.node,
    now,
    policy,
  );
  const nowIso = iso(now);
  const base: NodeFenceStatus = current ?? transition(emptyStatus(), "Suspected", nowIso);

  if (!hasQuorum(fresh, policy)) {
    const tally = `${fresh.length}/${policy.corroboration.quorum} independent observers`;
    if (!refreshUseful)
      return ignored("DuplicateEvidence", `duplicate evidence from ${e.observer} (${tally})`);
    return write(inc, d, { ...base, evidence }, `suspected ${d.node}: ${tally}`);
  }

  // A node an observer saw heartbeat to the API server after that observer began missing
  // it is cut off from its peers, not dead: no fencing (a partial partition never fences).
  const sighting = heartbeatSighting(fresh, policy);
  if (sighting) {
    const tally = `${fresh.length} observers miss ${d.node}, but ${sighting.observer} saw its heartbeat renewed at ${sighting.heartbeatSeenAt} (after its misses began at ${sighting.firstMissAt ?? sighting.at}): partitioned from its peers, not dead`;
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
  const hold = holdOf({
    node: view.node!,
    planned: view.planned,
    policy: view.policy,
    since: suspectedSince(current, now, fresh),
    now,
  });
  const verdict = hold.held
    ? { ok: false as const, reason: hold.hold.reason, message: hold.hold.message, count: 0, limit: 0 }
    : guards(d, view, now);
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
    message: `confirmed by ${fresh.length} independent observers: ${observers.join(", ")}${hold.held || !hold.expired ? "" : `; ${hold.expired.message}`}`,
  });
  const data: FenceRequested = {
    incident: name,
    node: d.node,
    bootId: d.bootId,
    confirmedAt: status.timestamps.confirmed ?? nowIso,
    observers,
  };
  const confirmed = write(inc, d, status, `confirmed ${d.node} (${observers.length} observers)`, [
    outgoing(EVENT_TYPES.fenceRequested, d.node, name, data),
  ]);
  if (confirmed.outcome.kind !== "processed") return confirmed;
  // The slot first: a confirmer that decided on an older ledger loses this write and
  // decides again with this admission counted (S4 under concurrent confirmations).
  const ledger: Action = {
    kind: "writeLedger",
    ...(view.ledger?.resourceVersion ? { expectedResourceVersion: view.ledger.resourceVersion } : {}),
    admitted: admit(view.ledger, view.openIncidents, name, d.node, now, nowIso, view.policy),
  };
  return { ...confirmed, actions: [ledger, ...confirmed.actions] };
}

/** Fencing levels, the storm guard (S4) and the etcd-quorum rule for the node (needs the cluster view). */
export function guards(
  d: Pick<NodeSuspected, "node">,
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
  const storm = stormGuard(d.node, view.openIncidents, view.nodes, now, policy, view.ledger);
  if (!storm.ok) return storm;
  return controlPlaneRule(node, view.openIncidents, view.nodes, now, policy, view.ledger);
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
