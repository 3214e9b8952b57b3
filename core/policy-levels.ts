// Which fencing levels a node gets: its FencingPolicy entry's, or, only when no entry
// matches and the policy opts into discovery, the ones the adapter discovered. Kept beside
// core/policy.ts. Pure: it never reads a node's own fields beyond its name and labels.
import { levelsForNode, type FencingPolicySpec, type ResolvedFencingLevel } from "./policy.ts";

/**
 * Levels for a node: the policy's matching entry first; only when none matches and the
 * policy opts into discovery, the levels the adapter discovered (passed in; pure).
 */
export function resolveLevels(
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> },
  discovered: readonly ResolvedFencingLevel[] | undefined,
): ResolvedFencingLevel[] | undefined {
  const own = levelsForNode(policy, node);
  if (own) return own;
  if (policy.fencing.discovery !== "Metal3") return undefined;
  const hosts = (discovered ?? []).filter((l) => l.discovered?.kind === "BareMetalHost");
  return hosts.length ? hosts : undefined;
}
