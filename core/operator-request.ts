// Whether an operator's request to fence a node (NodeFence spec.operatorRequest, `fastfence
// fence NODE`) still stands: not withdrawn (spec.operatorWithdrawal, `fastfence fence NODE
// --withdraw`) and not older than the FencingPolicy's fencing.operatorRequestMaxAgeMs (plus
// the clock-skew bound: `at` is the requester's clock). confirm confirms only a standing
// request; fence lets a request stand in for the observers' quorum only when it was
// confirmed while it stood and was not withdrawn since. It never makes a request stand that
// the rule refuses: a time that does not parse is expired. Pure: no I/O, no clock.
import type { NodeFenceSpec } from "./incident.ts";
import type { FencingPolicySpec } from "./policy.ts";

/** Why a request does not stand (stable codes: status reasons, refusals, metrics). */
export type RequestRefusal = "NoOperatorRequest" | "OperatorRequestExpired" | "OperatorRequestWithdrawn";

export interface Standing {
  /** undefined: the request stands. */
  code?: RequestRefusal;
  message: string;
}

type Policy = Pick<FencingPolicySpec, "fencing" | "corroboration">;

/** The request's standing at `atMs` (epoch ms; confirm's clock, or the confirmation time). */
export function requestStanding(spec: NodeFenceSpec, atMs: number, policy: Policy): Standing {
  const req = spec.operatorRequest;
  if (!req) return { code: "NoOperatorRequest", message: "no operator request" };
  const w = spec.operatorWithdrawal;
  if (w)
    return {
      code: "OperatorRequestWithdrawn",
      message: `the request by ${req.by} at ${req.at} was withdrawn by ${w.by} at ${w.at}: ${w.reason}`,
    };
  const maxAge = policy.fencing.operatorRequestMaxAgeMs;
  const made = Date.parse(req.at);
  const limit = made + maxAge + policy.corroboration.maxClockSkewMs;
  if (!Number.isFinite(made) || atMs > limit)
    return {
      code: "OperatorRequestExpired",
      message: `the request by ${req.by} at ${req.at} expired after ${Math.round(maxAge / 1000)} s (fencing.operatorRequestMaxAgeMs); ask again if the node must still be fenced`,
    };
  return { message: `requested by ${req.by} at ${req.at}` };
}
