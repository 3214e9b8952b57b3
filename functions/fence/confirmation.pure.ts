// fence: S6 and S2 checked again on the stored incident before any round — it was confirmed
// by a trusted confirm identity, and the evidence it recorded is still a quorum of
// independent observers (or a person's request, tied to its creator by admission, that was
// confirmed while it stood and has not been withdrawn since: core/operator-request.ts). Pure.
import type { NodeFence, NodeFenceStatus } from "../../core/incident.ts";
import { ms, type NodeInfo } from "../../core/decision.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { RejectCode } from "../../core/reasons.ts";
import { freshIndependentEvidence, hasQuorum } from "../../core/rules.ts";
import { requestStanding } from "../../core/operator-request.ts";

/** S6 + S2 re-checked on the stored incident: trusted writer, and the evidence it recorded is quorate. */
export function checkConfirmation(
  inc: NodeFence,
  st: NodeFenceStatus,
  node: NodeInfo,
  policy: FencingPolicySpec,
  trusted: readonly string[],
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
  const fresh = freshIndependentEvidence(st.evidence, node.name, confirmedAt, policy);
  if (!hasQuorum(fresh, policy)) {
    if (standing?.code === "OperatorRequestExpired" || standing?.code === "OperatorRequestWithdrawn")
      return {
        code: standing.code,
        reason: `incident ${inc.metadata.name}: ${standing.message}, and it records ${fresh.length} independent observers, quorum is ${policy.corroboration.quorum} (S2)`,
      };
    return {
      code: "ConfirmationBelowQuorum",
      reason: `incident ${inc.metadata.name} records ${fresh.length} independent observers, quorum is ${policy.corroboration.quorum} (S2)`,
    };
  }
  return undefined;
}
