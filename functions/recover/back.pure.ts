// recover, closing an incident whose node came back before it was powered off, as Closed
// with reason NodeResponding, freeing its storm-guard slot. Two ways to know: (1) fence's
// last look (functions/fence/last-look.pure.ts) abandoned the last round and found the node
// back (the incident's boot ID, Ready, its heartbeat renewed since the incident began), and
// the Node still is Ready with that boot ID; (2) every round was abandoned by the last look,
// before any off command, and recover's own read now finds the node back: Ready with the
// incident's boot ID and its heartbeat Lease renewed after the confirmation (the look's rule
// (b)). (2) ends an incident whose looks saw the node answer before it was Ready or renewing
// (one still starting), so that no look found it back and its rounds ran out. Never closes
// one whose workloads were released or that sent an off command: a node back then needs an
// operator (S1). Nothing is released or untainted. Only recover may close an incident
// (knative/base/admission/nodefence-status-policy.yaml). No I/O.
import { statusOf, transition, type NodeFenceStatus } from "../../core/incident.ts";
import {
  ignored,
  iso,
  processed,
  rejected,
  type DecideInput,
  type Decision,
  type Resync,
  type View,
} from "../../core/decision.ts";
import { renewedAfterConfirmation } from "../fence/last-look.pure.ts";

/** status.reason of a round fence's last look abandoned because the node responds. */
export const NODE_RESPONDING = "NodeResponding";

/**
 * Whether fence's last round was abandoned by a look that found the node back. Read from the
 * attempts, which only fence writes (status.reason is free text any writer may set).
 */
export function lookFoundBack(st: NodeFenceStatus): boolean {
  const last = st.attempts.at(-1);
  return st.phase === "FenceFailed" && last?.result === "abandoned" && last.lastLook?.back === true;
}

/**
 * Whether every round was abandoned by fence's last look (so no off command was ever sent)
 * and nothing was released.
 */
export function everyRoundAbandoned(st: NodeFenceStatus): boolean {
  return (
    st.phase === "FenceFailed" &&
    st.released === undefined &&
    st.attempts.length > 0 &&
    st.attempts.every((a) => a.result === "abandoned")
  );
}

/** What recover's own read says of the node, for way (2): back (with the renewal seen), or why not. */
function backNow(
  st: NodeFenceStatus,
  bootId: string,
  view: View,
): { back: true; renewTime: string } | { back: false; why: string } {
  const node = view.node;
  if (!node || node.bootId !== bootId || node.ready !== "True")
    return { back: false, why: `not Ready with the incident's boot ${bootId}` };
  const hb = view.heartbeat;
  const confirmed = st.timestamps.confirmed ?? "";
  if (!hb || hb === "absent") return { back: false, why: "no heartbeat Lease" };
  if (!hb.renewTime || !renewedAfterConfirmation(hb, confirmed, view.policy.corroboration.maxClockSkewMs))
    return {
      back: false,
      why: `heartbeat last renewed ${hb.renewTime ?? "never"}, not after the confirmation at ${confirmed || "(unknown)"}`,
    };
  return { back: true, renewTime: hb.renewTime };
}

/** Whether recover may try to close the incident as back (either way); closeBack says whether it does. */
export function mayBeBack(st: NodeFenceStatus): boolean {
  return lookFoundBack(st) || everyRoundAbandoned(st);
}

export function closeBack({ view, now, event }: DecideInput<Resync>): Decision {
  const inc = view.incident!;
  const st = statusOf(inc);
  const name = event.incident;
  const last = st.attempts.at(-1);
  const node = view.node;
  let message: string;
  if (last && lookFoundBack(st)) {
    if (!node || node.bootId !== inc.spec.bootId || node.ready !== "True")
      return ignored(
        "NotDue",
        `incident ${name}: ${inc.spec.nodeName} is not Ready with the incident's boot ${inc.spec.bootId} now`,
      );
    message = `${inc.spec.nodeName} is back (boot ${node.bootId}, Ready, heartbeat renewed) before any power-off: ${last.message ?? "seen in fence's last look"}`;
  } else if (everyRoundAbandoned(st)) {
    const seen = backNow(st, inc.spec.bootId, view);
    if (!seen.back)
      return ignored(
        "NotDue",
        `incident ${name}: every round abandoned, ${inc.spec.nodeName} not back yet: ${seen.why}`,
      );
    message = `${inc.spec.nodeName} is back (boot ${inc.spec.bootId}, Ready, heartbeat renewed ${seen.renewTime} after the confirmation) and each of its ${st.attempts.length} rounds was abandoned before any off command`;
  } else
    return ignored(
      "NotDue",
      `incident ${name}: fence's last look has not found ${inc.spec.nodeName} back yet`,
    );
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const status = transition(st, "Closed", iso(now), { reason: NODE_RESPONDING, message });
  return processed(`closed ${name}: ${inc.spec.nodeName} is back`, [
    { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
  ]);
}
