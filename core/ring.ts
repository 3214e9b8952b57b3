// Which nodes one observer replica probes: its k successors on a ring of node names
// (sorted), skipping its own node. Every node is then probed by k replicas on other
// nodes, and probe traffic grows linearly with the cluster (k probes per replica per
// interval). One definition shared by the event source (what it probes) and by detect
// and confirm (whether an observer was assigned the node it reports on). A node that
// carries the out-of-service taint (fenced off, its workloads released, not yet
// recovered) is not on the ring: it probes nothing, and the nodes it probed get the next
// observer at once — otherwise a second node dying soon after would keep one dead
// observer of its k until the node controller marks the first NotReady (40 s). Pure: no I/O.
import { OUT_OF_SERVICE_TAINT } from "./decision.ts";

/** Whether a node's taints fence it off: the out-of-service taint's key, any value or effect. */
export function hasOutOfServiceTaint(taints: readonly { key: string }[] | undefined): boolean {
  return (taints ?? []).some((t) => t.key === OUT_OF_SERVICE_TAINT.key);
}

/** The nodes on the ring: every node but those fenced off (NodeInfo.outOfService). */
export function ringMembers(nodes: readonly { name: string; outOfService?: boolean }[]): string[] {
  return nodes.filter((n) => n.outOfService !== true).map((n) => n.name);
}

/** Targets of the observer on `self`: the k nodes after it on the sorted ring. */
export function probeTargets(self: string, nodes: readonly string[], k: number): string[] {
  const ring = [...new Set(nodes)].sort();
  const others = ring.filter((n) => n !== self);
  if (others.length <= k) return others;
  // Position of self on the ring (or where it would be, for an observer on a non-member).
  let start = ring.findIndex((n) => n > self);
  if (ring.includes(self)) start = (ring.indexOf(self) + 1) % ring.length;
  if (start < 0) start = 0;
  const out: string[] = [];
  for (let i = 0; out.length < k && i < ring.length; i++) {
    const n = ring[(start + i) % ring.length]!;
    if (n !== self) out.push(n);
  }
  return out;
}

/** The observers (by node) that probe `target` when every node runs one replica. */
export function observersOf(target: string, nodes: readonly string[], k: number): string[] {
  return [...new Set(nodes)].filter((n) => n !== target && probeTargets(n, nodes, k).includes(target));
}
