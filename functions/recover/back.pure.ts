// recover, closing an incident whose node came back before it was powered off: fence's last
// look (functions/fence/last-look.pure.ts) abandoned a round because the node answered and
// recorded what it saw; when that look found the node back (the incident's boot ID, Ready,
// its heartbeat renewed since the incident began) and the Node still is Ready with that boot
// ID, the incident ends Closed with reason NodeResponding, freeing its storm-guard slot.
// Nothing was powered off and nothing is released or untainted. Only recover may close an
// incident (knative/base/admission/nodefence-status-policy.yaml). No I/O.
import { statusOf, transition, type NodeFenceStatus } from "../../core/incident.ts";
import {
  ignored,
  iso,
  processed,
  rejected,
  type DecideInput,
  type Decision,
  type Resync,
} from "../../core/decision.ts";

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

export function closeBack({ view, now, event }: DecideInput<Resync>): Decision {
  const inc = view.incident!;
  const st = statusOf(inc);
  const name = event.incident;
  const last = st.attempts.at(-1);
  if (!last || !lookFoundBack(st))
    return ignored(
      "NotDue",
      `incident ${name}: fence's last look has not found ${inc.spec.nodeName} back yet`,
    );
  const node = view.node;
  if (!node || node.bootId !== inc.spec.bootId || node.ready !== "True")
    return ignored(
      "NotDue",
      `incident ${name}: ${inc.spec.nodeName} is not Ready with the incident's boot ${inc.spec.bootId} now`,
    );
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const status = transition(st, "Closed", iso(now), {
    reason: NODE_RESPONDING,
    message: `${inc.spec.nodeName} is back (boot ${node.bootId}, Ready, heartbeat renewed) before any power-off: ${last.message ?? "seen in fence's last look"}`,
  });
  return processed(`closed ${name}: ${inc.spec.nodeName} is back`, [
    { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
  ]);
}
