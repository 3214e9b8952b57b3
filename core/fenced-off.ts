// The fenced-off fact on a Node: the annotation fastfence.io/fenced-off = "<incident>/<bootId>",
// which fence writes on the Node after it has proven the power-off (S1) and which the
// admission policy knative/base/admission/node-writers-policy.yaml lets only fence set.
// The out-of-service taint is admitted only on a Node whose fact names its current boot
// (an admission policy cannot look up the NodeFence, so the fact travels on the object
// written). Pure: formats and reads the value; never decides whether a node is off.

import type { Action } from "./decision.ts";
import type { NodeFence } from "./incident.ts";

/** The Node annotation that says fence proved this boot of the node powered off. */
export const FENCED_OFF_ANNOTATION = "fastfence.io/fenced-off";

/** The annotation's value for an incident and the boot it powered off. */
export function fencedOffValue(incident: string, bootId: string): string {
  return `${incident}/${bootId}`;
}

/** Whether `value` says that `incident` powered off boot `bootId` (what remediate-workloads waits for). */
export function fencedOffNames(value: string | undefined, incident: string, bootId: string): boolean {
  return bootId !== "" && value === fencedOffValue(incident, bootId);
}

/**
 * fence's action after a proven power-off, before it records FencedOff: the fact first, so
 * remediate-workloads (which acts on FencedOff) finds it and its taint is admitted.
 */
export function markFencedOff(inc: NodeFence): Action {
  return {
    kind: "markFencedOff",
    node: inc.spec.nodeName,
    value: fencedOffValue(inc.metadata.name, inc.spec.bootId),
  };
}
