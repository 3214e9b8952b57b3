// recover, the pure decision: when a node is Ready again with a boot ID different from its
// incident's, removes the out-of-service taint and ends the incident (Recovered if it was
// fenced, Closed if it never was). On workloads.released, and only if the policy says
// powerOnAfterFence, claims the power-on in the incident and asks for it. A Ready
// condition with the incident's own boot ID ends nothing: that is the lagging Ready of a
// dead node. Nothing is done for an incident whose spec, name and labels or event disagree
// on the node (and, for a power-on, the boot): TargetMismatch (core/incident-target.ts). No I/O.
import { isTerminal, statusOf, transition } from "../../core/incident.ts";
import { targetMismatch } from "../../core/incident-target.ts";
import {
  ignored,
  iso,
  outgoing,
  processed,
  rejected,
  OUT_OF_SERVICE_TAINT,
  type Action,
  type DecideInput,
  type Decision,
  type ViewRequest,
} from "../../core/decision.ts";
import { resolveLevels } from "../../core/policy-levels.ts";
import type { FfEvent } from "../../events/envelope.ts";
import { decideByType } from "../stage-info.ts";
import { EVENT_TYPES, type DataOf } from "../../events/catalog.ts";
import type { NodeRecovered } from "../../events/schemas.ts";
import type { NodeFence } from "../../core/incident.ts";

export function locate(event: FfEvent): ViewRequest {
  const d = event.data as { incident?: string; bootId?: string };
  // A power-on after workloads.released may use the node's discovered levels.
  const discovery = event.type === EVENT_TYPES.workloadsReleased;
  if (d.incident) return { node: event.subject, incident: d.incident, cluster: false, discovery };
  // A condition ends an incident of an earlier boot: one the node's new boot already has
  // (a suspicion as it came back) must not hide it.
  const except = d.bootId ? { exceptBootId: d.bootId } : {};
  return { node: event.subject, openIncidentOfNode: true, ...except, cluster: false, discovery };
}

export function decide(input: DecideInput<FfEvent>): Decision {
  return byType(input);
}

const byType = decideByType("recover", {
  [EVENT_TYPES.nodeCondition]: onCondition,
  [EVENT_TYPES.workloadsReleased]: onReleased,
});

function onCondition(
  d: DataOf<typeof EVENT_TYPES.nodeCondition>,
  { view, now }: DecideInput<FfEvent>,
): Decision {
  if (d.ready !== "True") return ignored("NodeNotReady", `${d.node} is not Ready`);
  const inc = view.incident;
  if (!inc) return ignored("IncidentNotFound", `no open incident for ${d.node}`);
  // the node only: a recovery is the node Ready with another boot than the incident's
  const mismatch = targetMismatch(inc, [{ from: "node.condition", node: d.node }]);
  if (mismatch) return rejected("TargetMismatch", mismatch);
  const st = statusOf(inc);
  const name = inc.metadata.name;
  if (isTerminal(st.phase)) return ignored("PhasePassed", `incident ${name} already ${st.phase}`);
  const current = view.node?.bootId ?? d.bootId;
  if (d.bootId !== current)
    return ignored("StaleIncarnation", `stale condition event for boot ${d.bootId}; node now ${current}`);
  if (current === inc.spec.bootId)
    return ignored("NotARecovery", `${d.node} Ready with the incident's own boot ${current}: not a recovery`);
  if (st.phase === "Fencing")
    return ignored("FencingInProgress", `fencing of ${name} in progress; recovery waits for its result`);
  return recovery(inc, d.node, current, now);
}

/**
 * Ends `inc` because its node is Ready with the new boot `current` (the caller checked both):
 * Recovered if it was fenced, Closed if it never was; the out-of-service taint removed if it
 * was set; node.recovered emitted. Used by the event path and by the reconciler (resync.pure.ts).
 */
export function recovery(inc: NodeFence, node: string, current: string, now: number): Decision {
  const st = statusOf(inc);
  const name = inc.metadata.name;
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const fenced = st.phase === "FencedOff" || st.phase === "Released" || st.phase === "FenceFailed";
  const to = fenced ? "Recovered" : "Closed";
  // also a FenceFailed one whose workloads were released before the look after found its BMC lying
  const taintRemoved = st.phase === "FencedOff" || st.phase === "Released" || st.released !== undefined;
  const status = transition(st, to, iso(now), {
    recoveredBootId: current,
    reason: fenced ? "NodeRecovered" : "NodeRebooted",
    message: `${node} Ready with new boot ${current}${fenced ? "" : " before it was fenced"}`,
  });
  const actions: Action[] = [];
  if (taintRemoved) actions.push({ kind: "removeTaint", node, taint: { ...OUT_OF_SERVICE_TAINT } });
  actions.push({ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status });
  const data: NodeRecovered = {
    incident: name,
    node,
    previousBootId: inc.spec.bootId,
    bootId: current,
    phase: to,
    taintRemoved,
    at: iso(now),
  };
  return processed(`${name} ${to}`, actions, [outgoing(EVENT_TYPES.nodeRecovered, node, name, data)]);
}

function onReleased(
  d: DataOf<typeof EVENT_TYPES.workloadsReleased>,
  { view, now }: DecideInput<FfEvent>,
): Decision {
  const inc = view.incident;
  if (!inc || inc.metadata.name !== d.incident)
    return ignored("IncidentNotFound", `no incident ${d.incident} in the API`);
  const mismatch = targetMismatch(inc, [{ from: "workloads.released", node: d.node, bootId: d.bootId }]);
  if (mismatch) return rejected("TargetMismatch", mismatch);
  const st = statusOf(inc);
  if (st.phase !== "Released")
    return ignored("WrongPhase", `incident ${d.incident} is ${st.phase}, not Released`);
  if (!view.policy.powerOnAfterFence)
    return ignored("PowerOnDisabled", "policy powerOnAfterFence is off: the node stays off");
  if (st.powerOnRequestedAt)
    return ignored("PowerOnRequested", `power-on already requested at ${st.powerOnRequestedAt}`);
  if (view.node && view.node.bootId !== inc.spec.bootId)
    return ignored("StaleIncarnation", `${d.node} is already back (boot ${view.node.bootId})`);
  const levels = resolveLevels(view.policy, view.node ?? { name: d.node }, view.discoveredLevels);
  if (!levels) return ignored("NoFencingLevels", `no fencing levels for ${d.node}: cannot power it on`);
  const rv = inc.metadata.resourceVersion;
  if (!rv)
    return rejected("MissingResourceVersion", `incident ${d.incident} was read without a resourceVersion`);
  // Claim first (resourceVersion-guarded), so a duplicate delivery does not power on twice.
  const status = { ...st, powerOnRequestedAt: iso(now) };
  return processed(`powering ${d.node} back on`, [
    { kind: "updateIncidentStatus", name: inc.metadata.name, expectedResourceVersion: rv, status },
    { kind: "powerOn", node: d.node, incident: inc.metadata.name, levels },
  ]);
}
