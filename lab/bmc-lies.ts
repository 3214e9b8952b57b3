// The invariant checker's own category for a BMC that lied (issue 18): an attempt that read a
// node's power back as exactly Off although the BMC carried out no power-off in that attempt
// and the node was on when it began (the lab's power log is the ground truth: every real
// power action of either BMC goes through the lab's power hooks). That is the hardware's
// fault, not fastfence's, so it is reported apart from the S1-S6 violations, with whether
// fastfence noticed it (status.bmcLied, the look after the power-off). Pure: no I/O, no clock.
import type { Attempt, NodeFence } from "../core/incident.ts";
import type { TrialFacts, TrialInput } from "./invariants.ts";

export interface BmcLieFinding {
  node: string;
  incident: string;
  /** 0-based level index and driver of the attempt that read back Off. */
  level: number;
  driver: string;
  readBackAt: string;
  /** fastfence recorded this lie in the incident's status.bmcLied. */
  noticed: boolean;
  detail: string;
}

/** Margin around an attempt within which a logged power-off counts as its own (ms). */
const MARGIN_MS = 50;

/** Whether `a` read back Off while the lab's BMCs powered nothing off and the node was on. */
export function isLie(node: string, a: Attempt, facts: TrialFacts): boolean {
  if (a.result !== "off-confirmed" || a.readBackState !== "Off" || !a.readBackAt) return false;
  const from = Date.parse(a.startedAt) - MARGIN_MS;
  const to = Date.parse(a.readBackAt) + MARGIN_MS;
  const mine = facts.powerActions.filter((p) => p.node === node).sort((x, y) => x.at - y.at);
  if (mine.some((p) => p.action === "off" && p.at >= from && p.at <= to)) return false;
  const before = mine.filter((p) => p.at < from).at(-1);
  return before?.action !== "off"; // it was on (or nothing since the trial began: on)
}

/** Every lie of the trial's incidents, in attempt order. */
export function bmcLies(input: TrialInput): BmcLieFinding[] {
  const out: BmcLieFinding[] = [];
  for (const inc of input.incidents) {
    const st = inc.status;
    if (!st) continue;
    const node = inc.spec.nodeName;
    for (const a of st.attempts.filter((x) => isLie(node, x, input.facts))) {
      const noticed = (st.bmcLied ?? []).some((l) => l.level === a.level && l.readBackAt === a.readBackAt);
      out.push({
        node,
        incident: inc.metadata.name,
        level: a.level,
        driver: a.driver,
        readBackAt: a.readBackAt!,
        noticed,
        detail: `${a.driver} (level ${a.level + 1}) read ${node} back Off at ${a.readBackAt} but powered nothing off${noticed ? "; fastfence noticed (BMCLied)" : "; fastfence did not notice"}`,
      });
    }
  }
  return out;
}

/** Whether the incident's release (at `releasedAt`) relied on a lying read-back. */
export function liedBefore(inc: NodeFence, facts: TrialFacts, releasedAt: number | undefined): boolean {
  const node = inc.spec.nodeName;
  return (inc.status?.attempts ?? []).some(
    (a) => isLie(node, a, facts) && (releasedAt === undefined || Date.parse(a.readBackAt!) <= releasedAt),
  );
}
