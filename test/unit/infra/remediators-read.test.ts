// What fastfence reads from NodeHealthCheck, MachineHealthCheck and Machine objects
// (infra/kube/remediators.ts, the pure part), and the RemediatorConflict condition on the
// FencingPolicy as a pure function of the conflicts (infra/kube/remediator-status.ts).
// Reading them from a real API server: test/integration/remediator-conflicts.test.ts.
import { describe, expect, it } from "vitest";
import type { RemediatorSelection } from "../../../core/remediators.ts";
import {
  machineFrom,
  machineHealthCheckFrom,
  machinesByNodeFrom,
  nodeHealthCheckFrom,
} from "../../../infra/kube/remediators.ts";
import {
  NO_CONFLICT_MESSAGE,
  remediatorCondition,
  remediatorEvent,
  sameRemediatorCondition,
} from "../../../infra/kube/remediator-status.ts";

const tpl = (kind: string, name: string, group = "self-node-remediation.medik8s.io") => ({
  apiVersion: `${group}/v1alpha1`,
  kind,
  name,
  namespace: "openshift-workload-availability",
});

describe("nodeHealthCheckFrom", () => {
  it("reads selector, template, pause requests and the Disabled condition", () => {
    const n = nodeHealthCheckFrom({
      apiVersion: "remediation.medik8s.io/v1alpha1",
      kind: "NodeHealthCheck",
      metadata: { name: "nhc" },
      spec: {
        selector: {
          matchLabels: { pool: "b", bad: 7 },
          matchExpressions: [{ key: "node-role.kubernetes.io/worker", operator: "Exists" }],
        },
        remediationTemplate: tpl("SelfNodeRemediationTemplate", "snr"),
        pauseRequests: ["upgrade"],
      },
      status: { conditions: [{ type: "Disabled", status: "True", reason: "RemediationTemplateNotFound" }] },
    });
    expect(n).toEqual({
      kind: "NodeHealthCheck",
      name: "nhc",
      selector: {
        matchLabels: { pool: "b" },
        matchExpressions: [{ key: "node-role.kubernetes.io/worker", operator: "Exists", values: [] }],
      },
      templates: [tpl("SelfNodeRemediationTemplate", "snr")],
      paused: true,
      disabled: true,
    });
  });

  it("orders escalating remediations by their order field; no selector stays undefined", () => {
    const n = nodeHealthCheckFrom({
      metadata: { name: "esc" },
      spec: {
        escalatingRemediations: [
          { order: 2, timeout: "5m", remediationTemplate: tpl("FenceAgentsRemediationTemplate", "far") },
          { order: 1, timeout: "5m", remediationTemplate: tpl("SelfNodeRemediationTemplate", "snr") },
        ],
        pauseRequests: [],
      },
      status: { conditions: [{ type: "Disabled", status: "False" }] },
    });
    expect(n?.templates.map((t) => t.name)).toEqual(["snr", "far"]);
    expect(n).toMatchObject({ selector: undefined, paused: false, disabled: false });
  });

  it("ignores what is not an NHC with a name", () => {
    expect(nodeHealthCheckFrom({ spec: {} })).toBeUndefined();
    expect(nodeHealthCheckFrom(null)).toBeUndefined();
    expect(nodeHealthCheckFrom("x")).toBeUndefined();
  });
});

describe("machineHealthCheckFrom and machineFrom", () => {
  it("reads the MHC's namespace, template and its paused and strategy annotations", () => {
    expect(
      machineHealthCheckFrom({
        metadata: {
          name: "workers",
          namespace: "openshift-machine-api",
          annotations: {
            "cluster.x-k8s.io/paused": "",
            "machine.openshift.io/remediation-strategy": "external-baremetal",
          },
        },
        spec: { selector: { matchLabels: { role: "worker" } } },
      }),
    ).toEqual({
      kind: "MachineHealthCheck",
      namespace: "openshift-machine-api",
      name: "workers",
      selector: { matchLabels: { role: "worker" }, matchExpressions: [] },
      externalBaremetal: true,
      paused: true,
    });
    const withTemplate = machineHealthCheckFrom({
      metadata: { name: "w", namespace: "ns" },
      spec: { remediationTemplate: tpl("SelfNodeRemediationTemplate", "snr") },
    });
    expect(withTemplate).toMatchObject({ template: { kind: "SelfNodeRemediationTemplate" }, paused: false });
    expect(machineHealthCheckFrom({ metadata: { name: "no-namespace" } })).toBeUndefined();
  });

  it("links a Machine to the node its status.nodeRef names, and groups by node", () => {
    const m = (name: string, node?: string) => ({
      metadata: { name, namespace: "openshift-machine-api", labels: { role: "worker" } },
      status: node ? { nodeRef: { kind: "Node", name: node } } : {},
    });
    expect(machineFrom(m("m1", "node-a"))).toEqual({
      node: "node-a",
      machine: { namespace: "openshift-machine-api", name: "m1", labels: { role: "worker" } },
    });
    expect(machineFrom(m("provisioning"))).toBeUndefined();
    const byNode = machinesByNodeFrom([m("m1", "node-a"), m("m2", "node-a"), m("m3", "node-b"), m("m4")]);
    expect(Object.keys(byNode).sort()).toEqual(["node-a", "node-b"]);
    expect(byNode["node-a"]!.map((x) => x.name)).toEqual(["m1", "m2"]);
  });
});

describe("the RemediatorConflict condition", () => {
  const T0 = Date.parse("2026-01-01T00:00:00Z");
  const sel: RemediatorSelection[] = [
    {
      kind: "NodeHealthCheck",
      name: "nhc-workers",
      remediation: "SelfNodeRemediationTemplate/snr",
      state: "active",
      nodes: ["node-b"],
    },
  ];

  it("True with OtherRemediatorSelectsNodes naming the NHC and node; False with NoConflict", () => {
    expect(remediatorCondition(sel, 4, undefined, T0)).toEqual({
      type: "RemediatorConflict",
      status: "True",
      reason: "OtherRemediatorSelectsNodes",
      message: expect.stringContaining(
        "NodeHealthCheck/nhc-workers (remediation SelfNodeRemediationTemplate/snr) selects node-b",
      ),
      observedGeneration: 4,
      lastTransitionTime: "2026-01-01T00:00:00.000Z",
    });
    expect(remediatorCondition([], 4, undefined, T0)).toMatchObject({
      status: "False",
      reason: "NoConflict",
      message: NO_CONFLICT_MESSAGE,
    });
  });

  it("is rewritten when the list changes, keeps lastTransitionTime while the status stays", () => {
    const first = remediatorCondition(sel, 1, undefined, T0);
    const same = remediatorCondition(sel, 1, first, T0 + 9000);
    expect(sameRemediatorCondition(first, same)).toBe(true);
    const more = remediatorCondition([{ ...sel[0]!, nodes: ["node-b", "node-c"] }], 1, first, T0 + 9000);
    expect(sameRemediatorCondition(first, more)).toBe(false);
    expect(more.lastTransitionTime).toBe(first.lastTransitionTime);
    const gone = remediatorCondition([], 1, first, T0 + 9000);
    expect(gone.lastTransitionTime).toBe("2026-01-01T00:00:09.000Z");
    expect(sameRemediatorCondition(undefined, first)).toBe(false);
  });

  it("a Warning Event when a conflict appears or changes, a Normal one when it goes, none otherwise", () => {
    const none = remediatorCondition([], 1, undefined, T0);
    const one = remediatorCondition(sel, 1, none, T0);
    const two = remediatorCondition([...sel, { ...sel[0]!, name: "other" }], 1, one, T0);
    expect(remediatorEvent(undefined, none)).toBeUndefined();
    expect(remediatorEvent(none, one)).toEqual({ type: "Warning", reason: "RemediatorConflict" });
    expect(remediatorEvent(undefined, one)).toEqual({ type: "Warning", reason: "RemediatorConflict" });
    expect(remediatorEvent(one, two)).toEqual({ type: "Warning", reason: "RemediatorConflict" });
    expect(remediatorEvent(one, { ...one, observedGeneration: 2 })).toBeUndefined();
    expect(remediatorEvent(two, remediatorCondition([], 1, two, T0))).toEqual({
      type: "Normal",
      reason: "RemediatorConflictResolved",
    });
  });
});
