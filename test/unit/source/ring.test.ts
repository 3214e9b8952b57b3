// Probe assignment on the ring: every node is watched by k observers on other nodes,
// and each observer probes exactly k targets.
import { describe, expect, it } from "vitest";
import { hasOutOfServiceTaint, observersOf, probeTargets, ringMembers } from "../../../core/ring.ts";

describe("probe ring", () => {
  it.each([
    ["3 nodes, k=2: each probes both others", ["a", "b", "c"], 2],
    ["5 nodes, k=2", ["n1", "n2", "n3", "n4", "n5"], 2],
    ["7 nodes, k=3", ["a", "b", "c", "d", "e", "f", "g"], 3],
  ])("%s", (_name, nodes, k) => {
    for (const n of nodes) {
      const t = probeTargets(n, nodes, k);
      expect(t).toHaveLength(Math.min(k, nodes.length - 1));
      expect(t).not.toContain(n);
      expect(new Set(t).size).toBe(t.length);
    }
    for (const n of nodes) {
      const obs = observersOf(n, nodes, k);
      expect(obs).not.toContain(n);
      expect(obs).toHaveLength(Math.min(k, nodes.length - 1));
    }
  });

  it("is the successors in sorted order, wrapping around", () => {
    expect(probeTargets("c", ["e", "a", "d", "c", "b"], 2)).toEqual(["d", "e"]);
    expect(probeTargets("e", ["e", "a", "d", "c", "b"], 2)).toEqual(["a", "b"]);
  });

  it("an observer outside the node list still gets k targets", () => {
    expect(probeTargets("x-host", ["a", "b", "c"], 2)).toHaveLength(2);
  });

  it("a single other node is all there is", () => {
    expect(probeTargets("a", ["a", "b"], 2)).toEqual(["b"]);
  });

  it("leaves fenced-off nodes off the ring, so the nodes they probed get the next observer", () => {
    const nodes = [{ name: "a", outOfService: true }, { name: "b" }, { name: "c" }, { name: "d" }];
    expect(ringMembers(nodes)).toEqual(["b", "c", "d"]);
    // a,b,c,d with k=2: b is watched by a and d; with a fenced off, by c and d.
    expect(observersOf("b", ["a", "b", "c", "d"], 2)).toEqual(["a", "d"]);
    expect(observersOf("b", ringMembers(nodes), 2)).toEqual(["c", "d"]);
    expect(probeTargets("a", ringMembers(nodes), 2)).toHaveLength(2); // back up, tainted: probes as a non-member
  });

  it("counts the out-of-service taint by its key, whatever its value", () => {
    expect(hasOutOfServiceTaint([{ key: "node.kubernetes.io/out-of-service" }])).toBe(true);
    expect(hasOutOfServiceTaint([{ key: "node.kubernetes.io/unreachable" }])).toBe(false);
    expect(hasOutOfServiceTaint(undefined)).toBe(false);
  });
});
