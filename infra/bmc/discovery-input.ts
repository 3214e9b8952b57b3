// Adapter half of fencing.discovery: reads the levels a node's metal3 BareMetalHost gives
// and returns them as extra decide input ({ discoveredLevels } or { discoveryError }) for
// the pure fence/recover stages, which decide whether to use them. Reads only when the
// policy opts in and no policy entry matches the node (no API calls otherwise). Never
// returns credentials: levels name the Secret, the power executor reads it.
import type { View } from "../../core/decision.ts";
import { levelsForNode } from "../../core/policy.ts";
import { discoverLevels, type Metal3Api } from "./metal3.ts";

export async function discoveryInput(api: Metal3Api, view: View): Promise<Record<string, unknown>> {
  const node = view.node;
  if (!node || view.policy.fencing.discovery !== "Metal3" || levelsForNode(view.policy, node)) return {};
  return discoverLevels(api, node.name);
}
