// fence: S6 and S2 checked again on the stored incident before any round — it was confirmed
// by a trusted confirm identity, and the evidence it recorded is still a quorum of
// independent observers (or a person's request, tied to its creator by admission, that was
// confirmed while it stood and has not been withdrawn since: core/operator-request.ts). A
// stored probe piece counts only if its signature verifies with a key its observer node
// publishes on its heartbeat Lease (View.observers, as confirm checks: core/evidence-proof.ts)
// and it names the node's current boot; it must never count evidence no observer signed. Pure.
import type { Evidence, NodeFence, NodeFenceStatus } from "../../core/incident.ts";
import { ms, type NodeInfo, type ObserverInfo } from "../../core/decision.ts";
import { claimOfEvidence } from "../../core/evidence-checks.ts";
import { verifyClaim } from "../../core/evidence-proof.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { RejectCode } from "../../core/reasons.ts";
import { freshIndependentEvidence, hasQuorum } from "../../core/rules.ts";
import { requestStanding } from "../../core/operator-request.ts";

/**
 * Whether one stored piece may be counted by fence: API-server evidence (condition, lease)
 * carries no signature and is one vote (`@apiserver`); probe evidence needs a proof that
 * verifies with a key published for its observer node, over a claim about `node`'s boot.
 */
export function storedEvidenceVerifies(
  e: Evidence,
  node: NodeInfo,
  observers: Readonly<Record<string, ObserverInfo>> | undefined,
): boolean {
  if (e.kind !== "probe") return true;
  if (!e.proof || e.targetBootId !== node.bootId) return false;
  return verifyClaim(claimOfEvidence(e), e.proof, observers?.[e.observerNode]?.keys ?? []) === "ok";
}

/** S6 + S2 re-checked on the stored incident: trusted writer, and the verified evidence it recorded is quorate. */
export function checkConfirmation(
  inc: NodeFence,
  st: NodeFenceStatus,
  node: NodeInfo,
  policy: FencingPolicySpec,
  trusted: readonly string[],
  observers: Readonly<Record<string, ObserverInfo>> | undefined,
): { code: RejectCode; reason: string } | undefined {
  if (!st.confirmedBy || !trusted.includes(st.confirmedBy)) {
    return {
      code: "UntrustedConfirmation",
      reason: `incident ${inc.metadata.name} confirmedBy "${st.confirmedBy ?? ""}" is not a trusted confirm identity (S6)`,
    };
  }
  const confirmedAt = ms(st.timestamps.confirmed);
  if (!Number.isFinite(confirmedAt))
    return { code: "NoConfirmationTime", reason: `incident ${inc.metadata.name} has no confirmed timestamp` };
  // A person's request stands in for the evidence, for every round, if it was confirmed while
  // it stood (not expired then) and was not withdrawn since: the admission policy ties
  // spec.operatorRequest and spec.operatorWithdrawal to their creators and keeps them
  // unchanged once set. The status reason says OperatorRequested only until the first round
  // ends, so it is not what is checked (a failed first round would otherwise never be retried).
  const standing = inc.spec.operatorRequest ? requestStanding(inc.spec, confirmedAt, policy) : undefined;
  if (standing && !standing.code) return undefined;
  const verified = st.evidence.filter((e) => storedEvidenceVerifies(e, node, observers));
  const fresh = freshIndependentEvidence(verified, node.name, confirmedAt, policy);
  if (hasQuorum(fresh, policy)) return undefined;
  if (standing?.code === "OperatorRequestExpired" || standing?.code === "OperatorRequestWithdrawn")
    return {
      code: standing.code,
      reason: `incident ${inc.metadata.name}: ${standing.message}, and it records ${fresh.length} independent observers with verified evidence, quorum is ${policy.corroboration.quorum} (S2)`,
    };
  const all = freshIndependentEvidence(st.evidence, node.name, confirmedAt, policy);
  if (hasQuorum(all, policy)) {
    const dropped = st.evidence
      .filter((e) => !verified.includes(e))
      .map((e) => `${e.observer}@${e.observerNode}`);
    return {
      code: "StoredEvidenceUnverified",
      reason: `incident ${inc.metadata.name} records ${all.length} independent observers, but only ${fresh.length} with a signature that verifies against the keys published on the heartbeat Leases for node ${node.name}'s boot ${node.bootId} (quorum ${policy.corroboration.quorum}; not counted: ${dropped.join(", ")}) (S2)`,
    };
  }
  return {
    code: "ConfirmationBelowQuorum",
    reason: `incident ${inc.metadata.name} records ${fresh.length} independent observers, quorum is ${policy.corroboration.quorum} (S2)`,
  };
}
