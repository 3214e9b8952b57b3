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

/** Why the Node is not Ready with the incident's boot now, or undefined when it is. */
function notReadyOnBoot(view: View, bootId: string): string | undefined {
  const node = view.node;
  if (!node || node.bootId !== bootId || node.ready !== "True")
    return `not Ready with the incident's boot ${bootId}`;
  return undefined;
}

/** What recover's own read says of the node, for way (2): back (with the renewal seen), or why not. */
function backNow(
  st: NodeFenceStatus,
  bootId: string,
  view: View,
): { back: true; renewTime: string } | { back: false; why: string } {
  const notReady = notReadyOnBoot(view, bootId);
  if (notReady) return { back: false, why: notReady };
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

/**
 * Closes the incident as back, either way; ignored (NotDue) while its node is not back yet;
 * undefined when neither way applies to it (no round abandoned by the last look).
 */
export function closeIfBack({ view, now, event }: DecideInput<Resync>): Decision | undefined {
  const inc = view.incident!;
  const st = statusOf(inc);
  const name = event.incident;
  const node = inc.spec.nodeName;
  let message: string;
  if (lookFoundBack(st)) {
    const notReady = notReadyOnBoot(view, inc.spec.bootId);
    if (notReady) return ignored("NotDue", `incident ${name}: ${node} is ${notReady} now`);
    message = `${node} is back (boot ${inc.spec.bootId}, Ready, heartbeat renewed) before any power-off: ${st.attempts.at(-1)!.message ?? "seen in fence's last look"}`;
  } else if (everyRoundAbandoned(st)) {
    const seen = backNow(st, inc.spec.bootId, view);
    if (!seen.back)
      return ignored("NotDue", `incident ${name}: every round abandoned, ${node} not back yet: ${seen.why}`);
    message = `${node} is back (boot ${inc.spec.bootId}, Ready, heartbeat renewed ${seen.renewTime} after the confirmation) and each of its ${st.attempts.length} rounds was abandoned before any off command`;
  } else return undefined;
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const status = transition(st, "Closed", iso(now), { reason: NODE_RESPONDING, message });
  return processed(`closed ${name}: ${node} is back`, [
    { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
  ]);
}
