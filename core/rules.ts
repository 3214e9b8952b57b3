// The safety rules shared by the stages: counting independent corroborating observers
// (S2), the storm guard (S4) and the control-plane (etcd quorum) rule. Pure functions of
// their arguments; no I/O, never reads the clock.
import type { HoldReason } from "./planned.ts";
import { ADMITTED_PHASES, type Evidence, type NodeFence } from "./incident.ts";
import type { AdmissionLedger, NodeInfo } from "./decision.ts";
import { ledgerNodes } from "./admission-ledger.ts";
import type { FencingPolicySpec } from "./policy.ts";

/** Independence key for evidence derived from the API (Ready condition, kubelet Lease). */
export const API_OBSERVER_KEY = "@apiserver";

/**
 * How long a node's heartbeat Lease (fastfence-alive-<node>) is valid without renewal:
 * four heartbeat intervals, whole seconds (a Lease's duration is in seconds), at least 1 s.
 * The event source writes it; the heartbeat veto uses it as the recency bound.
 */
export function heartbeatLeaseDurationMs(heartbeatIntervalMs: number): number {
  return Math.max(1, Math.ceil((heartbeatIntervalMs * 4) / 1000)) * 1000;
}

/**
 * The heartbeat veto, one clock per observer: the first fresh probe evidence whose observer
 * saw the node's heartbeat Lease renewed after that observer's own miss streak began, and
 * at most one heartbeat Lease duration before the observation (every time compared is the
 * observer's own, and signed with its claim). A node that keeps renewing while its peers
 * miss it is partitioned, not dead; a dead node's last in-flight renewal stops vetoing
 * after one Lease duration, or at once when the observer dated it (heartbeatRenewedBy) to
 * no later than the streak's start: written before the misses began, it proves nothing
 * about the node since. Evidence carries no time that can undo another observer's
 * sighting: any one sighting vetoes.
 */
export function heartbeatSighting(
  fresh: readonly Evidence[],
  policy: FencingPolicySpec,
): Evidence | undefined {
  if (!policy.suspicion.heartbeatVeto) return undefined;
  const recent = heartbeatLeaseDurationMs(policy.probe.heartbeatIntervalMs);
  return fresh.find((e) => {
    if (e.kind !== "probe" || !e.heartbeatSeenAt) return false;
    const seen = Date.parse(e.heartbeatSeenAt);
    const start = Date.parse(e.firstMissAt ?? e.at);
    if (e.heartbeatRenewedBy !== undefined && Date.parse(e.heartbeatRenewedBy) <= start) return false;
    return seen > start && Date.parse(e.at) - seen <= recent;
  });
}

/**
 * The independence key of one piece of evidence: the observer's node for probes (two
 * replicas on one node are one observer), one shared key for API-derived evidence.
 * Returns undefined for evidence that never counts (observer on the suspected node).
 */
export function observerKey(e: Evidence, policy: FencingPolicySpec): string | undefined {
  if (e.kind === "condition" || e.kind === "lease") {
    return policy.suspicion.countNodeCondition ? API_OBSERVER_KEY : undefined;
  }
  if (e.observerNode === e.node) return undefined;
  return e.observerNode;
}

/** Evidence about `node` inside the window around `now`, one (newest) per independent observer. */
export function freshIndependentEvidence(
  evidence: readonly Evidence[],
  node: string,
  now: number,
  policy: FencingPolicySpec,
): Evidence[] {
  const window = policy.corroboration.evidenceWindowMs;
  const best = new Map<string, Evidence>();
  for (const e of evidence) {
    if (e.node !== node) continue;
    const key = observerKey(e, policy);
    if (key === undefined) continue;
    const at = Date.parse(e.at);
    if (!Number.isFinite(at) || now - at > window || at - now > window) continue;
    const prev = best.get(key);
    if (!prev || Date.parse(prev.at) < at) best.set(key, e);
  }
  return [...best.values()];
}

export function hasQuorum(fresh: readonly Evidence[], policy: FencingPolicySpec): boolean {
  return fresh.length >= policy.corroboration.quorum;
}

/** Adds `e`, replacing older evidence from the same observer replica and kind; keeps at most `max`. */
export function mergeEvidence(existing: readonly Evidence[], e: Evidence, max = 32): Evidence[] {
  const same = (x: Evidence) => x.observer === e.observer && x.kind === e.kind && x.node === e.node;
  const old = existing.find(same);
  if (old && Date.parse(old.at) >= Date.parse(e.at)) return [...existing];
  const merged = [...existing.filter((x) => !same(x)), e];
  merged.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  return merged.slice(-max);
}

/** Phases in which a node counts as "looking dead / being fenced" for S4 and the etcd rule. */

/**
 * Nodes other than `node` that are in an active incident, or hold a slot in the admission
 * ledger (admitted by a confirmer whose Confirmed write may not have landed yet). Blocked
 * incidents count only while their evidence is still fresh (their node still looks dead),
 * so a blip that once tripped the guard does not block fencing forever.
 */
export function nodesInIncidents(
  openIncidents: readonly NodeFence[],
  node: string,
  now: number,
  policy: FencingPolicySpec,
  ledger?: AdmissionLedger,
): Set<string> {
  const out = ledgerNodes(ledger, openIncidents, node, now, policy);
  for (const inc of openIncidents) {
    const n = inc.spec.nodeName;
    if (n === node || !inc.status) continue;
    const phase = inc.status.phase;
    if (ADMITTED_PHASES.includes(phase)) out.add(n);
    else if (phase === "Blocked") {
      const fresh = freshIndependentEvidence(inc.status.evidence, n, now, policy);
      if (fresh.length > 0) out.add(n);
    }
  }
  return out;
}

export type GuardVerdict =
  | { ok: true }
  | {
      ok: false;
      reason: "StormGuard" | "ControlPlaneQuorum" | "NoFencingLevels" | HoldReason;
      message: string;
      limit: number;
      count: number;
    };

/** S4: too many nodes would be (or are) fenced at once. */
export function stormGuard(
  node: string,
  openIncidents: readonly NodeFence[],
  nodes: readonly NodeInfo[],
  now: number,
  policy: FencingPolicySpec,
  ledger?: AdmissionLedger,
): GuardVerdict {
  const others = nodesInIncidents(openIncidents, node, now, policy, ledger);
  const count = others.size + 1;
  const total = Math.max(nodes.length, 1);
  const limit = Math.min(
    policy.stormGuard.maxConcurrentFenced,
    Math.floor(policy.stormGuard.maxFraction * total),
  );
  if (count > limit) {
    return {
      ok: false,
      reason: "StormGuard",
      message: `fencing ${node} would make ${count} node(s) fenced or fencing at once (limit ${limit} of ${total}); others: ${[...others].sort().join(",") || "none"}`,
      limit,
      count,
    };
  }
  return { ok: true };
}

/**
 * Whether the policy counts `node` as a control-plane (etcd) node: it carries one of
 * controlPlane.roleLabels (any value). The only place control-plane nodes are identified.
 */
export function isControlPlane(node: Pick<NodeInfo, "labels">, policy: FencingPolicySpec): boolean {
  return policy.controlPlane.roleLabels.some((l) => Object.hasOwn(node.labels, l));
}

/** Majority needed by an etcd cluster of `members`. */
export function etcdQuorum(members: number): number {
  return Math.floor(members / 2) + 1;
}

/**
 * Never fence a control-plane node if the control-plane nodes left (not this one, not in
 * an incident, Ready) would be fewer than etcd's majority.
 */
export function controlPlaneRule(
  node: NodeInfo,
  openIncidents: readonly NodeFence[],
  nodes: readonly NodeInfo[],
  now: number,
  policy: FencingPolicySpec,
  ledger?: AdmissionLedger,
): GuardVerdict {
  if (!policy.controlPlane.protectEtcdQuorum || !isControlPlane(node, policy)) return { ok: true };
  const cp = nodes.filter((n) => isControlPlane(n, policy));
  if (!cp.some((n) => n.name === node.name)) cp.push(node);
  const busy = nodesInIncidents(openIncidents, node.name, now, policy, ledger);
  const remaining = cp.filter((n) => n.name !== node.name && n.ready === "True" && !busy.has(n.name)).length;
  const need = etcdQuorum(cp.length);
  if (remaining < need) {
    return {
      ok: false,
      reason: "ControlPlaneQuorum",
      message: `fencing control-plane node ${node.name} would leave ${remaining} healthy control-plane node(s) of ${cp.length}; etcd needs ${need}`,
      limit: need,
      count: remaining,
    };
  }
  return { ok: true };
}
