// Which node and boot an incident is about, and whether everything a stage is about to act
// on agrees with it. An incident's target is fixed when it is created: its name is
// incidentName(node, bootId) and its labels repeat both; the CRD refuses any later change
// of spec.nodeName or spec.bootId (core/incident.ts NodeFenceSpecSchema). A stage that
// powers off or releases a node checks here, before it acts, that the incident's spec
// still names the node and boot its name and labels were made for, and that the event and
// the node read for it name the same ones: a bent spec (an old CRD without the rule, a
// restore from a backup) or an event for another node releases or fences nothing. Pure:
// no I/O; it never decides anything beyond "these agree".
import { BOOT_ID_LABEL, bootIdLabel, incidentName, NODE_LABEL, type NodeFence } from "./incident.ts";

/** What names the node and boot a stage is about to act on, besides the incident itself. */
export interface TargetClaim {
  /** Where the claim comes from, for the message ("event subject", "node.fenced data", "node read"). */
  from: string;
  node?: string;
  bootId?: string;
}

/**
 * Why the incident's target is not the one its name and labels were created for, or not
 * the one a claim names; undefined when all agree. A claim's absent field is not checked.
 */
export function targetMismatch(inc: NodeFence, claims: readonly TargetClaim[] = []): string | undefined {
  const { nodeName, bootId } = inc.spec;
  const name = inc.metadata.name;
  if (name !== incidentName(nodeName, bootId))
    return `incident ${name} was created for another node or boot than its spec names (${nodeName}, boot ${bootId}): the spec was changed, nothing is done`;
  const labels = inc.metadata.labels ?? {};
  if (NODE_LABEL in labels && labels[NODE_LABEL] !== nodeName)
    return `incident ${name} is labelled ${NODE_LABEL}=${labels[NODE_LABEL]} but its spec names node ${nodeName}: nothing is done`;
  if (BOOT_ID_LABEL in labels && labels[BOOT_ID_LABEL] !== bootIdLabel(bootId))
    return `incident ${name} is labelled ${BOOT_ID_LABEL}=${labels[BOOT_ID_LABEL]} but its spec names boot ${bootId}: nothing is done`;
  for (const c of claims) {
    if (c.node !== undefined && c.node !== nodeName)
      return `${c.from} names node ${c.node}, incident ${name} is about ${nodeName}: nothing is done`;
    if (c.bootId !== undefined && c.bootId !== bootId)
      return `${c.from} names boot ${c.bootId} of ${nodeName}, incident ${name} is about boot ${bootId}: nothing is done`;
  }
  return undefined;
}
