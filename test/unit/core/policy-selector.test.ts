// Fencing levels are selected only by node name or by labels a kubelet cannot set on its
// own Node (node-restriction.kubernetes.io/, issue 13): the zod schema refuses any other
// label key naming it, the generated CRD carries the same rule as CEL for the API server,
// and a trusted label still selects its levels.
import { describe, expect, it } from "vitest";
import { ZodError } from "zod";
import { crdSchemas } from "../../../core/crdschema.ts";
import { levelsForNode, resolvePolicy, TRUSTED_NODE_LABEL_PREFIX } from "../../../core/policy.ts";

const level = {
  driver: "redfish",
  address: "redfish+https://10.0.0.1/redfish/v1/Systems/1",
  credentialsSecret: "bmc",
};
const withLabels = (matchLabels: Record<string, string>) =>
  resolvePolicy({ fencing: { nodes: [{ nodeSelector: { matchLabels }, levels: [level] }] } });

describe("FencingPolicy nodeSelector.matchLabels", () => {
  it("accepts labels under node-restriction.kubernetes.io/ and selects by them", () => {
    const p = withLabels({ "node-restriction.kubernetes.io/bmc": "rack-1" });
    expect(
      levelsForNode(p, { name: "w1", labels: { "node-restriction.kubernetes.io/bmc": "rack-1" } }),
    ).toHaveLength(1);
    expect(
      levelsForNode(p, { name: "w2", labels: { "node-restriction.kubernetes.io/bmc": "rack-2" } }),
    ).toBeUndefined();
  });

  it.each([
    "kubernetes.io/hostname",
    "fastfence.io/fence",
    "node-role.kubernetes.io/worker",
    "node-restriction.kubernetes.io",
  ])("refuses the label %s a kubelet can set on itself, naming it", (key) => {
    let err: unknown;
    try {
      withLabels({ "node-restriction.kubernetes.io/ok": "x", [key]: "x" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ZodError);
    const issues = (err as ZodError).issues;
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toEqual(["fencing", "nodes", 0, "nodeSelector", "matchLabels", key]);
    expect(issues[0]!.message).toContain(`label ${key} is not under ${TRUSTED_NODE_LABEL_PREFIX}`);
  });

  it("names still select, and the CRD carries the rule (CEL) and says so in the description", () => {
    const p = resolvePolicy({ fencing: { nodes: [{ nodeSelector: { names: ["w1"] }, levels: [level] }] } });
    expect(levelsForNode(p, { name: "w1" })).toHaveLength(1);
    const spec = crdSchemas().fencingPolicySpec as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const ml = spec.properties.fencing.properties.nodes.items.properties.nodeSelector.properties.matchLabels;
    expect(ml.description).toContain(TRUSTED_NODE_LABEL_PREFIX);
    expect(ml.maxProperties).toBe(16); // bounds the rule's cost: the API server refuses the CRD without it
    const many = Object.fromEntries(
      Array.from({ length: 17 }, (_, i) => [`${TRUSTED_NODE_LABEL_PREFIX}l${i}`, "x"]),
    );
    expect(() => withLabels(many)).toThrow(/at most 16 labels/);
    expect(ml["x-kubernetes-validations"]).toEqual([
      expect.objectContaining({ rule: `self.all(k, k.startsWith('${TRUSTED_NODE_LABEL_PREFIX}'))` }),
    ]);
  });
});
