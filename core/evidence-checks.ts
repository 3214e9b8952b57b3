// Whether a piece of evidence may count, checked against the cluster rather than taken
// from the record: a probe claim must carry a valid signature by a key its observer node
// published, come from a real, Ready, heartbeating node that the ring assigns to watch
// the target, and carry no timestamp later than the receiver's clock plus the allowed
// skew; Ready/Lease evidence counts only while the API itself still says so. Used by
// detect (on the observation) and confirm (on the suspicion and on every stored piece
// of evidence it counts). Pure: no I/O, never reads the clock.
import type { LeaseInfo, NodeInfo, ObserverInfo } from "./decision.ts";
import { verifyClaim, type ObservationClaim, type Proof } from "./evidence-proof.ts";
import type { Evidence } from "./incident.ts";
import type { FencingPolicySpec } from "./policy.ts";
import type { RejectCode } from "./reasons.ts";
import { probeTargets, ringMembers } from "./ring.ts";

export type Check = { ok: true } | { ok: false; code: RejectCode; reason: string };

const OK: Check = { ok: true };

/** FutureTimestamp if any of `times` lies beyond now + corroboration.maxClockSkewMs. */
export function futureTimestamp(
  times: Readonly<Record<string, string | undefined>>,
  now: number,
  policy: FencingPolicySpec,
): Check {
  const skew = policy.corroboration.maxClockSkewMs;
  for (const [field, t] of Object.entries(times)) {
    if (t === undefined) continue;
    const ahead = Date.parse(t) - now;
    if (!Number.isFinite(ahead) || ahead > skew)
      return {
        ok: false,
        code: "FutureTimestamp",
        reason: `${field} ${t} is ${ahead} ms ahead of the receiver's clock (max skew ${skew} ms)`,
      };
  }
  return OK;
}

/** What the checks read from the view. */
export interface ClaimContext {
  observers: Readonly<Record<string, ObserverInfo>> | undefined;
  nodes: readonly NodeInfo[];
  policy: FencingPolicySpec;
  now: number;
}

/**
 * The origin checks of one probe claim, in order: signed; by a key published for the
 * observer node; the observer node Ready and heartbeating (its Lease renewed within its
 * duration plus the skew, on the receiver's clock); assigned to the target by the ring;
 * no future timestamp.
 */
export function checkClaim(claim: ObservationClaim, proof: Proof | undefined, ctx: ClaimContext): Check {
  const { policy, now } = ctx;
  const future = futureTimestamp(
    {
      at: claim.at,
      firstMissAt: claim.firstMissAt,
      heartbeatSeenAt: claim.heartbeatSeenAt,
      heartbeatRenewedBy: claim.heartbeatRenewedBy,
    },
    now,
    policy,
  );
  if (!future.ok) return future;
  const who = `${claim.observer}@${claim.observerNode}`;
  if (!proof) return { ok: false, code: "MissingProof", reason: `claim of ${who} is not signed` };
  const observer = ctx.observers?.[claim.observerNode];
  const verdict = verifyClaim(claim, proof, observer?.keys ?? []);
  if (verdict === "UnknownObserverKey")
    return {
      ok: false,
      code: verdict,
      reason: `key ${proof.keyId} is not published for node ${claim.observerNode} (claim of ${who})`,
    };
  if (verdict === "BadSignature")
    return { ok: false, code: verdict, reason: `signature of ${who} does not verify over its claim` };
  const node = ctx.nodes.find((n) => n.name === claim.observerNode);
  if (!node || node.ready !== "True")
    return {
      ok: false,
      code: "ObserverNotReady",
      reason: `observer node ${claim.observerNode} is ${node ? `Ready=${node.ready}` : "not in the API"}`,
    };
  const renew = Date.parse(observer?.renewTime ?? "");
  const skew = policy.corroboration.maxClockSkewMs;
  // A renewal "in the future" would keep a dead observer looking alive: refused like any
  // other time beyond the skew.
  if (renew - now > skew)
    return {
      ok: false,
      code: "FutureTimestamp",
      reason: `observer node ${claim.observerNode}'s heartbeat renewTime is ${renew - now} ms ahead (max skew ${skew} ms)`,
    };
  const bound = (observer?.durationMs ?? 0) + skew;
  if (!Number.isFinite(renew) || now - renew > bound)
    return {
      ok: false,
      code: "ObserverHeartbeatStale",
      reason: `observer node ${claim.observerNode} last renewed its heartbeat ${Number.isFinite(renew) ? `${now - renew} ms ago` : "never"} (max ${bound} ms)`,
    };
  const assigned = probeTargets(claim.observerNode, ringMembers(ctx.nodes), policy.probe.observersPerNode);
  if (!assigned.includes(claim.target))
    return {
      ok: false,
      code: "ObserverNotAssigned",
      reason: `the ring assigns ${claim.observerNode} to probe ${assigned.join(",") || "nothing"}, not ${claim.target}`,
    };
  return OK;
}

/** The claim a piece of probe evidence was copied from (a miss: only misses become evidence). */
export function claimOfEvidence(e: Evidence): ObservationClaim {
  return {
    observer: e.observer,
    observerNode: e.observerNode,
    target: e.node,
    targetBootId: e.targetBootId ?? "",
    result: "missed",
    consecutiveMisses: e.consecutiveMisses ?? 0,
    firstMissAt: e.firstMissAt,
    at: e.at,
    heartbeatSeenAt: e.heartbeatSeenAt,
    heartbeatRenewedBy: e.heartbeatRenewedBy,
    heartbeatSynced: e.heartbeatSynced,
  };
}

/** The API's own view that makes condition/lease evidence count (never the event's fields). */
export interface ApiState {
  node: NodeInfo | undefined;
  kubeletLease: LeaseInfo | undefined;
}

/** Whether the API still says what condition or lease evidence claims (not Ready / kubelet Lease stale). */
export function apiStillSays(
  kind: "condition" | "lease",
  api: ApiState,
  policy: FencingPolicySpec,
  now: number,
): boolean {
  if (kind === "condition") return api.node !== undefined && api.node.ready !== "True";
  const renew = Date.parse(api.kubeletLease?.renewTime ?? "");
  return Number.isFinite(renew) && now - renew >= policy.suspicion.leaseStaleMs;
}

/**
 * Whether one stored piece of evidence counts now: probe evidence is about the node's
 * current boot, passes checkClaim and, with the heartbeat veto on, came from a synced
 * heartbeat watch (else the veto could not see what that observer saw); condition/lease
 * evidence only while the API still says so.
 */
export function countsNow(e: Evidence, ctx: ClaimContext & ApiState): boolean {
  if (e.kind !== "probe") return apiStillSays(e.kind, ctx, ctx.policy, ctx.now);
  if (ctx.node === undefined || e.targetBootId !== ctx.node.bootId) return false;
  if (ctx.policy.suspicion.heartbeatVeto && e.heartbeatSynced !== true) return false;
  return checkClaim(claimOfEvidence(e), e.proof, ctx).ok;
}
