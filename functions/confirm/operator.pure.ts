// confirm, re-driven without an event: an incident a person asked for (`fastfence fence
// NODE --reason`, spec.operatorRequest, tied to its creator by the API server) is confirmed
// through the same guards as a detected failure, except that the request stands in for
// the observers' quorum (S2). Pauses and another remediator still hold it; the automatic
// planned states (maintenance, MachineConfig reboot, upgrade) give way to the person. The
// storm guard (S4) and the etcd-quorum rule still block it, the admission-ledger slot is
// taken before the Confirmed write, and fence still needs a read-back of Off (S1). The
// request is for the incarnation it names: a node that rebooted since is not fenced. A
// request expires (fencing.operatorRequestMaxAgeMs) and can be withdrawn
// (spec.operatorWithdrawal): either is recorded as Blocked with OperatorRequestExpired /
// OperatorRequestWithdrawn (core/operator-request.ts), never confirmed. It never confirms an
// incident without a standing operator request. No I/O.
import {
  OPERATOR_REQUESTED_REASON,
  statusOf,
  transition,
  type NodeFence,
  type NodeFenceStatus,
  type Phase,
} from "../../core/incident.ts";
import {
  ignored,
  iso,
  outgoing,
  processed,
  rejected,
  type Action,
  type DecideInput,
  type Decision,
  type Resync,
  type ViewRequest,
} from "../../core/decision.ts";
import { admit } from "../../core/admission-ledger.ts";
import { holdOf, suspectedSince } from "../../core/planned.ts";
import { requestStanding } from "../../core/operator-request.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import type { FenceRequested, IncidentBlocked } from "../../events/schemas.ts";
import { guards } from "./decide.pure.ts";

/** The phases confirm re-drives: an operator's request not confirmed yet. */
export const CONFIRM_RESYNC_PHASES: readonly Phase[] = ["Suspected", "Blocked"];

/** Only incidents with an operator request: the rest are driven by suspicions. */
export function resyncWants(inc: NodeFence): boolean {
  return inc.spec.operatorRequest !== undefined;
}

export function locateResync(r: Resync): ViewRequest {
  return { node: r.node, incident: r.incident, cluster: true, planned: true };
}

export function resync(input: DecideInput<Resync>): Decision {
  const { view, now } = input;
  const name = input.event.incident;
  const inc = view.incident;
  if (!inc || inc.metadata.name !== name)
    return ignored("IncidentNotFound", `no incident ${name} in the API`);
  const req = inc.spec.operatorRequest;
  if (!req) return ignored("NotDue", `incident ${name} has no operator request: suspicions drive it`);
  const st = statusOf(inc);
  if (!CONFIRM_RESYNC_PHASES.includes(st.phase))
    return ignored("PhasePassed", `incident ${name} already ${st.phase}`);
  const node = view.node;
  if (!node) return ignored("NodeNotFound", `node ${inc.spec.nodeName} is not in the API`);
  if (node.bootId !== inc.spec.bootId)
    return ignored(
      "StaleIncarnation",
      `${node.name} booted ${node.bootId} since the request for boot ${inc.spec.bootId}: not fencing (S3)`,
    );
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const nowIso = iso(now);
  const base: NodeFenceStatus = inc.status ? st : transition(st, "Suspected", nowIso);
  const hold = holdOf({
    node,
    planned: view.planned,
    policy: view.policy,
    since: suspectedSince(base, now),
    now,
    operatorRequested: true,
  });
  const standing = requestStanding(inc.spec, now, view.policy);
  const verdict =
    standing.code === "OperatorRequestExpired" || standing.code === "OperatorRequestWithdrawn"
      ? { ok: false as const, reason: standing.code, message: standing.message, count: 0, limit: 0 }
      : hold.held
        ? { ok: false as const, reason: hold.hold.reason, message: hold.hold.message, count: 0, limit: 0 }
        : guards({ node: node.name }, view, now);
  if (!verdict.ok) {
    if (st.phase === "Blocked" && st.reason === verdict.reason)
      return ignored("StillBlocked", `still blocked (${verdict.reason}): ${verdict.message}`);
    const status = transition(base, "Blocked", nowIso, { reason: verdict.reason, message: verdict.message });
    const data: IncidentBlocked = {
      incident: name,
      node: node.name,
      bootId: inc.spec.bootId,
      reason: verdict.reason,
      message: verdict.message,
      count: verdict.count,
      limit: verdict.limit,
    };
    return processed(
      `blocked the request to fence ${node.name}: ${verdict.message}`,
      [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }],
      [outgoing(EVENT_TYPES.incidentBlocked, node.name, name, data)],
    );
  }
  return confirmRequest(inc, base, rv, input);
}

/** The admission-ledger slot, then Confirmed (confirmedBy this identity), then fence.requested. */
function confirmRequest(
  inc: NodeFence,
  base: NodeFenceStatus,
  rv: string,
  input: DecideInput<Resync>,
): Decision {
  const { view, now, self } = input;
  const name = inc.metadata.name;
  const req = inc.spec.operatorRequest!;
  const nowIso = iso(now);
  const status = transition(base, "Confirmed", nowIso, {
    confirmedBy: self.identity,
    reason: OPERATOR_REQUESTED_REASON,
    message: `fencing requested by ${req.by} at ${req.at}: ${req.reason}`,
  });
  const data: FenceRequested = {
    incident: name,
    node: inc.spec.nodeName,
    bootId: inc.spec.bootId,
    confirmedAt: status.timestamps.confirmed ?? nowIso,
    observers: [],
    requestedBy: req.by,
  };
  const ledger: Action = {
    kind: "writeLedger",
    ...(view.ledger?.resourceVersion ? { expectedResourceVersion: view.ledger.resourceVersion } : {}),
    admitted: admit(view.ledger, view.openIncidents, name, inc.spec.nodeName, now, nowIso, view.policy),
  };
  return processed(
    `confirmed ${inc.spec.nodeName} on ${req.by}'s request`,
    [ledger, { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }],
    [outgoing(EVENT_TYPES.fenceRequested, inc.spec.nodeName, name, data)],
  );
}
