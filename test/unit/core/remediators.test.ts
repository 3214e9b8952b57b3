// Living beside other remediators (issue 15, item 4), as a spec in plain data: which
// NodeHealthChecks and MachineHealthChecks select a node with a remediation other than
// fastfence's (core/remediators.ts), with Kubernetes label-selector semantics, and the
// messages that name them.
import { describe, expect, it } from "vitest";
import {
  OTHER_REMEDIATOR_REASON,
  conflictMessage,
  remediatorConflicts,
  remediatorSelections,
  selectionsMessage,
  selectorMatches,
  selectorProblem,
  type LabelMap,
  type LabelSelector,
  type MachineHealthCheckConfig,
  type MachinesByNode,
  type NodeHealthCheckConfig,
  type TemplateRef,
} from "../../../core/remediators.ts";

const SNR: TemplateRef = {
  apiVersion: "self-node-remediation.medik8s.io/v1alpha1",
  kind: "SelfNodeRemediationTemplate",
  name: "self-node-remediation-automatic-strategy-template",
  namespace: "openshift-workload-availability",
};
const FAR: TemplateRef = {
  apiVersion: "fence-agents-remediation.medik8s.io/v1alpha1",
  kind: "FenceAgentsRemediationTemplate",
  name: "far",
  namespace: "openshift-workload-availability",
};
const FASTFENCE: TemplateRef = {
  apiVersion: "fastfence.io/v1alpha1",
  kind: "FastfenceRemediationTemplate",
  name: "fastfence",
  namespace: "fastfence-system",
};

const nhc = (over: Partial<NodeHealthCheckConfig> = {}): NodeHealthCheckConfig => ({
  kind: "NodeHealthCheck",
  name: "nhc-workers",
  selector: { matchLabels: { pool: "b" } },
  templates: [SNR],
  paused: false,
  disabled: false,
  ...over,
});
const mhc = (over: Partial<MachineHealthCheckConfig> = {}): MachineHealthCheckConfig => ({
  kind: "MachineHealthCheck",
  namespace: "openshift-machine-api",
  name: "workers",
  selector: { matchLabels: { "machine.openshift.io/cluster-api-machine-role": "worker" } },
  externalBaremetal: false,
  paused: false,
  ...over,
});
const nodeA = { name: "node-a", labels: { pool: "a" } };
const nodeB = { name: "node-b", labels: { pool: "b" } };
const WORKER = { "machine.openshift.io/cluster-api-machine-role": "worker" };
const machines: MachinesByNode = {
  "node-c": [{ namespace: "openshift-machine-api", name: "m-c", labels: WORKER }],
  "node-d": [{ namespace: "other", name: "m-d", labels: WORKER }],
};

describe("label selectors select as Kubernetes does", () => {
  const cases: [string, LabelSelector | undefined, LabelMap, boolean][] = [
    ["no selector selects everything", undefined, { a: "1" }, true],
    ["an empty selector selects everything", {}, {}, true],
    ["empty lists select everything", { matchLabels: {}, matchExpressions: [] }, { a: "1" }, true],
    ["matchLabels: equal value", { matchLabels: { role: "worker" } }, { role: "worker" }, true],
    ["matchLabels: other value", { matchLabels: { role: "worker" } }, { role: "master" }, false],
    ["matchLabels: label unset", { matchLabels: { role: "worker" } }, {}, false],
    ["matchLabels: empty value is a value", { matchLabels: { role: "" } }, { role: "" }, true],
    [
      "In: one of the values",
      { matchExpressions: [{ key: "z", operator: "In", values: ["a", "b"] }] },
      { z: "b" },
      true,
    ],
    [
      "In: none of the values",
      { matchExpressions: [{ key: "z", operator: "In", values: ["a"] }] },
      { z: "c" },
      false,
    ],
    ["In: label unset", { matchExpressions: [{ key: "z", operator: "In", values: ["a"] }] }, {}, false],
    [
      "NotIn: other value",
      { matchExpressions: [{ key: "z", operator: "NotIn", values: ["a"] }] },
      { z: "b" },
      true,
    ],
    ["NotIn: label unset", { matchExpressions: [{ key: "z", operator: "NotIn", values: ["a"] }] }, {}, true],
    [
      "NotIn: listed value",
      { matchExpressions: [{ key: "z", operator: "NotIn", values: ["a"] }] },
      { z: "a" },
      false,
    ],
    ["Exists: set (even empty)", { matchExpressions: [{ key: "w", operator: "Exists" }] }, { w: "" }, true],
    ["Exists: unset", { matchExpressions: [{ key: "w", operator: "Exists" }] }, { x: "1" }, false],
    ["DoesNotExist: unset", { matchExpressions: [{ key: "w", operator: "DoesNotExist" }] }, {}, true],
    ["DoesNotExist: set", { matchExpressions: [{ key: "w", operator: "DoesNotExist" }] }, { w: "1" }, false],
    [
      "matchLabels and expressions are ANDed",
      { matchLabels: { a: "1" }, matchExpressions: [{ key: "b", operator: "Exists" }] },
      { a: "1" },
      false,
    ],
    ["inherited object keys are no labels", { matchLabels: { constructor: "x" } }, {}, false],
    [
      "Exists on an inherited key",
      { matchExpressions: [{ key: "toString", operator: "Exists" }] },
      {},
      false,
    ],
  ];
  it.each(cases)("%s", (_what, sel, labels, expected) => {
    expect(selectorMatches(sel, labels)).toBe(expected);
  });

  const invalid: [string, LabelSelector, string][] = [
    [
      "In without values",
      { matchExpressions: [{ key: "z", operator: "In", values: [] }] },
      "values must not be empty",
    ],
    [
      "NotIn without values",
      { matchExpressions: [{ key: "z", operator: "NotIn" }] },
      "values must not be empty",
    ],
    [
      "Exists with values",
      { matchExpressions: [{ key: "z", operator: "Exists", values: ["a"] }] },
      "must be empty",
    ],
    [
      "Gt (a node-selector operator)",
      { matchExpressions: [{ key: "z", operator: "Gt", values: ["1"] }] },
      '"Gt"',
    ],
  ];
  it.each(invalid)("a selector Kubernetes refuses (%s) selects nothing and says why", (_w, sel, why) => {
    expect(selectorProblem(sel)).toContain(why);
    expect(selectorMatches(sel, { z: "a" })).toBe(false);
    expect(selectorMatches(sel, {})).toBe(false);
  });
});

describe("a NodeHealthCheck selecting nodes with another remediation conflicts on those nodes", () => {
  it("conflicts on the node it selects and not on the others, naming the template", () => {
    expect(remediatorConflicts(nodeB, [nhc()])).toEqual([
      {
        kind: "NodeHealthCheck",
        name: "nhc-workers",
        remediation: "SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template",
        state: "active",
      },
    ]);
    expect(remediatorConflicts(nodeA, [nhc()])).toEqual([]);
  });

  const cases: [string, Partial<NodeHealthCheckConfig>, string | undefined][] = [
    ["fastfence's own template: no conflict", { templates: [FASTFENCE] }, undefined],
    ["no template at all (its webhook refuses it): no conflict", { templates: [] }, undefined],
    [
      "escalating from fastfence to FAR: FAR conflicts",
      { templates: [FASTFENCE, FAR] },
      "FenceAgentsRemediationTemplate/far",
    ],
    [
      "escalating SNR then FAR: both, in order",
      { templates: [SNR, FAR] },
      "SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template then FenceAgentsRemediationTemplate/far",
    ],
    [
      "a group that only ends in fastfence.io is not fastfence's",
      { templates: [{ ...FASTFENCE, apiVersion: "remediation.fastfence.io/v1" }] },
      "FastfenceRemediationTemplate/fastfence",
    ],
  ];
  it.each(cases)("%s", (_what, over, remediation) => {
    const got = remediatorConflicts(nodeB, [nhc(over)]);
    expect(got.map((c) => c.remediation)).toEqual(remediation === undefined ? [] : [remediation]);
  });

  it("a paused or disabled NHC still conflicts (it can resume at any moment), and says so", () => {
    expect(remediatorConflicts(nodeB, [nhc({ paused: true })])[0]?.state).toBe("paused");
    expect(remediatorConflicts(nodeB, [nhc({ paused: true, disabled: true })])[0]?.state).toBe("disabled");
  });

  it("an NHC with an empty selector (older objects keep working) selects every node", () => {
    const all = nhc({ selector: {} });
    expect(remediatorConflicts(nodeA, [all])).toHaveLength(1);
    expect(remediatorConflicts({ name: "bare", labels: {} }, [all])).toHaveLength(1);
  });
});

describe("a MachineHealthCheck conflicts through the Machine that names the node", () => {
  const cases: [string, Partial<MachineHealthCheckConfig>, string, MachinesByNode | undefined, string[]][] = [
    ["deletes the machine when it has no template", {}, "node-c", machines, ["machine deletion"]],
    [
      "the metal3 reboot annotation",
      { externalBaremetal: true },
      "node-c",
      machines,
      ["external-baremetal (metal3 reboot)"],
    ],
    [
      "an external template (SNR) wins over the annotation",
      { externalBaremetal: true, template: SNR },
      "node-c",
      machines,
      ["SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template"],
    ],
    ["fastfence's own template: no conflict", { template: FASTFENCE }, "node-c", machines, []],
    ["a Machine in another namespace is not the MHC's", {}, "node-d", machines, []],
    ["a node without a Machine", {}, "node-a", machines, []],
    ["without Machines no MHC selects anything", {}, "node-c", undefined, []],
    ["labels the selector does not match", { selector: { matchLabels: { x: "y" } } }, "node-c", machines, []],
    [
      "an empty selector selects every Machine of its namespace",
      { selector: {} },
      "node-c",
      machines,
      ["machine deletion"],
    ],
  ];
  it.each(cases)("%s", (_what, over, node, byNode, expected) => {
    const got = remediatorConflicts({ name: node, labels: {} }, [mhc(over)], byNode);
    expect(got.map((c) => c.remediation)).toEqual(expected);
  });

  it("names the MHC's namespace and the Machine; paused by annotation still conflicts", () => {
    expect(remediatorConflicts({ name: "node-c", labels: {} }, [mhc({ paused: true })], machines)).toEqual([
      {
        kind: "MachineHealthCheck",
        name: "workers",
        namespace: "openshift-machine-api",
        remediation: "machine deletion",
        state: "paused",
        machine: "openshift-machine-api/m-c",
      },
    ]);
  });
});

describe("messages", () => {
  const both = [mhc({ selector: {} }), nhc({ name: "all-nodes", selector: {} }), nhc()];
  it("one line per node naming every conflict, sorted", () => {
    expect(conflictMessage("node-b", remediatorConflicts(nodeB, [nhc()]))).toBe(
      "NodeHealthCheck/nhc-workers (remediation SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template) selects node-b",
    );
    const byNode = { "node-b": [{ namespace: "openshift-machine-api", name: "m-b", labels: {} }] };
    expect(conflictMessage("node-b", remediatorConflicts(nodeB, both, byNode))).toBe(
      "MachineHealthCheck/openshift-machine-api/workers (remediation machine deletion; via Machine openshift-machine-api/m-b)" +
        " and NodeHealthCheck/all-nodes (remediation SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template)" +
        " and NodeHealthCheck/nhc-workers (remediation SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template)" +
        " select node-b",
    );
    expect(conflictMessage("node-a", [])).toBe("");
  });

  it("the policy message names each remediator with its nodes and the reason code", () => {
    const sel = remediatorSelections(
      [nodeA, nodeB, { name: "node-c", labels: {} }],
      [nhc(), mhc()],
      machines,
    );
    expect(sel.map((s) => [s.kind, s.name, s.nodes])).toEqual([
      ["MachineHealthCheck", "workers", ["node-c"]],
      ["NodeHealthCheck", "nhc-workers", ["node-b"]],
    ]);
    expect(selectionsMessage(sel)).toBe(
      "MachineHealthCheck/openshift-machine-api/workers (remediation machine deletion) selects node-c; " +
        "NodeHealthCheck/nhc-workers (remediation SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template) selects node-b. " +
        `fastfence refuses to act on these nodes (reason ${OTHER_REMEDIATOR_REASON}) while another remediator selects them`,
    );
    expect(OTHER_REMEDIATOR_REASON).toBe("OtherRemediator");
    expect(remediatorSelections([nodeA], [nhc()])).toEqual([]);
    expect(selectionsMessage([])).toBe("");
  });

  it("bounds the message: a few node names per remediator, then a count, and a length cap", () => {
    const nodes = Array.from({ length: 40 }, (_, i) => ({
      name: `w${String(i).padStart(2, "0")}`,
      labels: {},
    }));
    const sel = remediatorSelections(nodes, [nhc({ selector: {}, paused: true })]);
    expect(sel[0]!.nodes).toHaveLength(40);
    expect(selectionsMessage(sel)).toContain("; paused) selects nodes w00, w01, w02, w03, w04 and 35 more.");
    const many = Array.from({ length: 100 }, (_, i) => nhc({ name: `nhc-${i}`, selector: {} }));
    const long = selectionsMessage(remediatorSelections(nodes, many));
    expect(long.length).toBeLessThanOrEqual(1000);
    expect(long.endsWith("…")).toBe(true);
  });
});
