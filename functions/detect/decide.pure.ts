// detect, the pure decision: one observer's probe observation or one informer condition
// change → a node.suspected event when it crosses the policy's suspicion threshold.
// Stateless (the observer counts its own misses); it never writes state and never decides
// to fence: that needs corroboration in confirm. An observation becomes evidence only if
// its claim checks out against the cluster (core/evidence-checks.ts: signature by a key
// its observer node published, observer Ready, heartbeating and assigned by the ring, no
// future timestamp); else it is rejected with the reason. A condition event is only a
// hint: Ready and the kubelet Lease are read from the API, never from the event.
// No I/O, `now` comes in as an argument.
import { incidentName, isTerminal, type Evidence } from "../../core/incident.ts";
import { apiStillSays, checkClaim, futureTimestamp } from "../../core/evidence-checks.ts";
import { API_OBSERVER_KEY } from "../../core/rules.ts";
import {
  ignored,
  iso,
  ms,
  outgoing,
  processed,
  rejected,
  type DecideInput,
  type Decision,
  type ViewRequest,
} from "../../core/decision.ts";
import type { FfEvent } from "../../events/envelope.ts";
import type { PreViewInput } from "../contract.ts";
import { decideByType } from "../stage-info.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import { EVENT_TYPES, type AnyFfEvent, type DataOf } from "../../events/catalog.ts";
import type { NodeSuspected } from "../../events/schemas.ts";
import { claimOfObservation, evidenceOfObservation } from "../../events/observation-claim.ts";

export function locate(event: FfEvent): ViewRequest {
  return {
    node: event.subject,
    openIncidentOfNode: true,
    cluster: false,
    ...(event.type === EVENT_TYPES.nodeObserved
      ? { nodeList: true, observers: true }
      : { kubeletLease: true }),
  };
}

export function decide(input: DecideInput<FfEvent>): Decision {
  return byType(input);
}

const byType = decideByType("detect", {
  [EVENT_TYPES.nodeObserved]: onObserved,
  [EVENT_TYPES.nodeCondition]: onCondition,
});

/**
 * The checks of an observation that need only the event and the policy (run before the
 * view is read, see PureStage.screen, and again by decide). During an outage observers
 * report a miss every probe interval; only the threshold crossing and every repeatEvery-th
 * miss after it can become a suspicion, so most observations stop here.
 */
function screenObserved(
  d: DataOf<typeof EVENT_TYPES.nodeObserved>,
  time: string,
  policy: FencingPolicySpec,
  now: number,
): Decision | undefined {
  const future = futureTimestamp(
    {
      time,
      at: d.at,
      firstMissAt: d.firstMissAt,
      heartbeatSeenAt: d.heartbeatSeenAt,
      heartbeatRenewedBy: d.heartbeatRenewedBy,
    },
    now,
    policy,
  );
  if (!future.ok) return rejected(future.code, `observation of ${d.target}: ${future.reason}`);
  const s = policy.suspicion;
  if (d.result === "restored")
    return ignored("ProbeRestored", `probe restored by ${d.observer.replica}: nothing to suspect`);
  if (d.observer.node === d.target)
    return ignored("ObserverOnNode", `observer ${d.observer.replica} runs on ${d.target} itself`);
  const at = ms(d.at);
  if (now - at > s.maxEventAgeMs)
    return ignored("StaleEvent", `stale observation: ${now - at} ms old (max ${s.maxEventAgeMs})`);
  const streakStart = ms(d.firstMissAt ?? d.at);
  const threshold = s.missThreshold;
  if (d.consecutiveMisses < threshold)
    return ignored("TooFewMisses", `below threshold: ${d.consecutiveMisses}/${threshold} misses`);
  const elapsed = at - streakStart;
  if (elapsed < s.minSuspectMs)
    return ignored("StreakTooShort", `below threshold: streak ${elapsed} ms < ${s.minSuspectMs} ms`);
  // Emit on the crossing (the first miss meeting both criteria) and every repeatEvery misses after.
  const prevElapsed = elapsed - policy.probe.intervalMs;
  const crossing = d.consecutiveMisses === threshold || prevElapsed < s.minSuspectMs;
  const repeat = (d.consecutiveMisses - threshold) % s.repeatEvery === 0;
  if (!crossing && !repeat)
    return ignored("SuspicionNotDue", `already suspected at this streak (${d.consecutiveMisses} misses)`);
  return undefined;
}

export function screen({ event, policy, now }: PreViewInput): Decision | undefined {
  const ev = event as AnyFfEvent;
  return ev.type === EVENT_TYPES.nodeObserved ? screenObserved(ev.data, ev.time, policy, now) : undefined;
}

function onObserved(
  d: DataOf<typeof EVENT_TYPES.nodeObserved>,
  { event, view, now }: DecideInput<FfEvent>,
): Decision {
  const early = screenObserved(d, event.time, view.policy, now);
  if (early) return early;
  if (d.target !== event.subject)
    return rejected("InconsistentEvent", `observation of ${d.target} sent with subject ${event.subject}`);
  // Observers drop a fenced-off node from their ring as soon as their informer sees the
  // taint; the few misses already on their way are moot, not misassigned.
  if (view.node?.outOfService)
    return ignored("NodeOutOfService", `${d.target} carries the out-of-service taint: off the probe ring`);
  const origin = checkClaim(claimOfObservation(d), d.proof, {
    observers: view.observers,
    nodes: view.nodes,
    policy: view.policy,
    now,
  });
  if (!origin.ok) return rejected(origin.code, `observation of ${d.target}: ${origin.reason}`);
  if (view.policy.suspicion.heartbeatVeto && d.heartbeatSynced !== true)
    return ignored(
      "HeartbeatWatchNotSynced",
      `observer ${d.observer.replica} had no synced heartbeat watch: its misses cannot be vetoed`,
    );
  const node = view.node;
  if (!node) return ignored("NodeNotFound", `node ${d.target} is not in the API`);
  if (d.targetBootId !== node.bootId) {
    return ignored(
      "StaleIncarnation",
      `stale incarnation: misses of boot ${d.targetBootId || "(none)"}, ${d.target} now runs boot ${node.bootId}`,
    );
  }
  const past = pastSuspicion(view.incident, node.bootId);
  if (past) return ignored("PhasePassed", past);
  const evidence = evidenceOfObservation(d);
  return suspect(d.target, node.bootId, "ProbeMisses", evidence);
}

function onCondition(
  d: DataOf<typeof EVENT_TYPES.nodeCondition>,
  { event, view, now }: DecideInput<FfEvent>,
): Decision {
  const policy = view.policy.suspicion;
  const future = futureTimestamp({ time: event.time, at: d.at }, now, view.policy);
  if (!future.ok) return rejected(future.code, `condition of ${d.node}: ${future.reason}`);
  if (d.change === "bootId") return ignored("BootIdChanged", "boot ID change: recover's business");
  if (!policy.countNodeCondition)
    return ignored("ConditionsNotCounted", "policy: node conditions do not count as observers");
  const node = view.node;
  if (!node) return ignored("NodeNotFound", `node ${d.node} is not in the API`);
  if (node.bootId !== d.bootId)
    return ignored(
      "StaleIncarnation",
      `stale incarnation: event for boot ${d.bootId}, node now ${node.bootId}`,
    );
  const at = ms(d.at);
  if (now - at > policy.maxEventAgeMs)
    return ignored("StaleEvent", `stale condition event: ${now - at} ms old`);
  const past = pastSuspicion(view.incident, node.bootId);
  let reason: NodeSuspected["reason"];
  let kind: Evidence["kind"];
  // The event only says where to look: Ready and the kubelet Lease come from the API.
  const api = { node, kubeletLease: view.kubeletLease };
  if (d.change === "ready") {
    if (!apiStillSays("condition", api, view.policy, now))
      return ignored("NodeReady", `${d.node} is Ready in the API`);
    reason = "NotReady";
    kind = "condition";
  } else {
    if (!apiStillSays("lease", api, view.policy, now)) {
      const renew = ms(view.kubeletLease?.renewTime);
      return ignored(
        "LeaseNotStale",
        Number.isFinite(renew)
          ? `kubelet lease renewed ${now - renew} ms ago (API)`
          : "no kubelet lease renewTime in the API",
      );
    }
    reason = "LeaseStale";
    kind = "lease";
  }
  if (past) return ignored("PhasePassed", past);
  // API-derived evidence has one observer, the API server, and detect's own time.
  return suspect(d.node, node.bootId, reason, {
    observer: API_OBSERVER_KEY,
    observerNode: API_OBSERVER_KEY,
    node: d.node,
    at: iso(now),
    kind,
  });
}

/** A reason to stay quiet when the node's incident is already beyond suspicion. */
function pastSuspicion(incident: DecideInput["view"]["incident"], bootId: string): string | undefined {
  if (!incident?.status || incident.spec.bootId !== bootId) return undefined;
  const phase = incident.status.phase;
  if (phase === "Suspected" || phase === "Blocked") return undefined;
  return `incident ${incident.metadata.name} already ${phase}${isTerminal(phase) ? " (closed)" : ""}`;
}

function suspect(
  node: string,
  bootId: string,
  reason: NodeSuspected["reason"],
  evidence: Evidence,
): Decision {
  const incident = incidentName(node, bootId);
  const data: NodeSuspected = { node, bootId, incident, reason, evidence };
  return processed(
    `suspected ${node} (${reason}, observer ${evidence.observer})`,
    [],
    [outgoing(EVENT_TYPES.nodeSuspected, node, incident, data)],
  );
}
