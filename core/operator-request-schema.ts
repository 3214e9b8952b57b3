// The schemas of an operator's request to fence a node (NodeFence spec.operatorRequest,
// `fastfence fence NODE`) and of its withdrawal (spec.operatorWithdrawal, `fastfence fence
// NODE --withdraw`), kept beside core/incident.ts, which composes them into the spec. The
// CRD is generated from them (core/crdschema.ts). Declarations only: no I/O; nothing here
// decides whether a request stands (core/operator-request.ts does).
import { z } from "zod";

const Time = z.iso.datetime({ offset: true });

/**
 * An authorised person's request to fence the node (`fastfence fence NODE --reason`): it
 * stands in for the observers' evidence (S2), and nothing else. confirm still applies the
 * pauses, the other-remediator check, the storm guard and the etcd-quorum rule, and fence
 * still needs a read-back of Off (S1). The API server ties `by` to the creator
 * (knative/base/admission/operator-request-policy.yaml): set once, by an identity that is
 * no fastfence stage, to its own user name, and never changed.
 */
export const OperatorRequestSchema = z.object({
  /** The requester's user name, as the API server authenticated it. */
  by: z.string().min(1).max(256),
  /** Why (free text, shown in the incident, Events and trace). */
  reason: z.string().min(1).max(1024),
  /** When it was requested (RFC 3339). */
  at: Time,
});
export type OperatorRequest = z.infer<typeof OperatorRequestSchema>;

/**
 * An operator's withdrawal of the request (`fastfence fence NODE --withdraw --reason`): set
 * once, only beside a request, by an identity that is no fastfence stage, naming itself
 * (operator-request-policy.yaml); never changed. A withdrawn request is never confirmed, and
 * fence refuses a round that stands on it (core/operator-request.ts). The request stays as
 * the record of what was asked.
 */
export const OperatorWithdrawalSchema = z.object({
  /** The withdrawer's user name, as the API server authenticated it. */
  by: z.string().min(1).max(256),
  /** Why (free text). */
  reason: z.string().min(1).max(1024),
  /** When it was withdrawn (RFC 3339). */
  at: Time,
});
export type OperatorWithdrawal = z.infer<typeof OperatorWithdrawalSchema>;
