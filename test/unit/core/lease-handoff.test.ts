// The leader hand-off's pure rules (core/lease-handoff.ts, core/policy-lease-handoff.ts,
// functions/fence/handoff.pure.ts): which holder runs on which node, when a Lease may be
// released, what the release writes, what the policy asks for, what fence returns after a
// proven power-off; and that the shipped admission policy and RBAC name the same annotations,
// ConfigMap and Leases as the code (they cannot drift apart).
import { readFileSync } from "node:fs";
import { loadAll } from "js-yaml";
import { describe, expect, it, test } from "vitest";
import {
  FENCED_NODES,
  FencedNodeEntrySchema,
  HANDOFF_HOLDER_ANNOTATION,
  HANDOFF_INCIDENT_ANNOTATION,
  HANDOFF_NODE_ANNOTATION,
  fencedNodeEntry,
  handoffEntries,
  handoffPlan,
  holderForm,
  judge,
  releaseWrite,
  summarize,
  type JudgeInput,
  type LeaseRead,
} from "../../../core/lease-handoff.ts";
import { DEFAULT_HANDOFF_LEASES, LeaseHandoffSettingsSchema } from "../../../core/policy-lease-handoff.ts";
import { resolvePolicy } from "../../../core/policy.ts";
import { handoffActions, onHandoffResult } from "../../../functions/fence/handoff.pure.ts";
import { confirmed } from "../../scenarios/fixtures.ts";

const PROVEN = "2026-12-06T10:00:10.000Z";
const lease = (holder: string | undefined, renewTime = "2026-12-06T10:00:02.500000Z"): LeaseRead => ({
  namespace: "kube-system",
  name: "kube-controller-manager",
  resourceVersion: "42",
  ...(holder !== undefined ? { holder } : {}),
  renewTime,
});
const j = (l: LeaseRead, podNode?: string | null): JudgeInput => ({
  lease: l,
  node: "node-a",
  provenAt: PROVEN,
  ...(podNode !== undefined ? { podNode } : {}),
});

describe("holderForm: how a holder identity places its process", () => {
  test.each([
    ["node-a_2f1c9e7a-0000-4000-8000-000000000001", { kind: "host", host: "node-a" }],
    ["master-0.example.com_uuid", { kind: "host", host: "master-0.example.com" }],
    ["virt-controller-7d9f-abcde", { kind: "pod", pod: "virt-controller-7d9f-abcde" }],
    ["", undefined],
    [undefined, undefined],
  ] as const)("%s", (holder, form) => expect(holderForm(holder)).toEqual(form));
});

describe("judge: may this Lease be released for fenced node-a?", () => {
  const table: [string, JudgeInput, true | string][] = [
    ["kcm holder on node-a, renewed before the proof", j(lease("node-a_u1")), true],
    ["kcm holder on node-b", j(lease("node-b_u1")), "OtherNode"],
    ["hostname only shares a prefix with the node", j(lease("node-ab_u1")), "OtherNode"],
    ["FQDN hostname of node-a: not the node's name, left alone", j(lease("node-a.lab_u1")), "OtherNode"],
    ["no holder (already released)", j(lease(undefined)), "NoHolder"],
    ["empty holder", j(lease("")), "NoHolder"],
    [
      "renewed after the proof: a live process",
      j(lease("node-a_u1", "2026-12-06T10:00:11.000000Z")),
      "RenewedAfterProof",
    ],
    ["renewed at the very moment of the proof", j(lease("node-a_u1", PROVEN)), "RenewedAfterProof"],
    [
      "never renewed (no renewTime)",
      j({ ...lease("node-a_u1"), renewTime: undefined } as LeaseRead),
      "RenewedAfterProof",
    ],
    ["pod holder bound to node-a", j(lease("virt-controller-x"), "node-a"), true],
    ["pod holder bound to node-b", j(lease("virt-controller-x"), "node-b"), "OtherNode"],
    ["pod holder whose pod is gone", j(lease("virt-controller-x"), null), "Unmapped"],
    ["pod holder whose pod is not bound", j(lease("virt-controller-x"), ""), "Unmapped"],
    ["pod holder not looked up", j(lease("virt-controller-x")), "Unmapped"],
    [
      "pod holder on node-a but renewed after the proof",
      j(lease("virt-controller-x", "2026-12-06T10:01:00Z"), "node-a"),
      "RenewedAfterProof",
    ],
  ];
  test.each(table)("%s", (_n, input, want) => {
    const v = judge(input);
    if (want === true) expect(v).toEqual({ release: true });
    else expect(v).toMatchObject({ release: false, code: want });
  });
});

describe("the release is client-go's", () => {
  it("clears the holder, 1 s, both times now, and names node, incident and the holder cleared", () => {
    const plan = { node: "node-a", incident: "nf-a", provenAt: PROVEN, leases: [] };
    const w = releaseWrite(plan, lease("node-a_u1"), "2026-12-06T10:00:11.123456Z");
    expect(w.spec).toEqual({
      leaseDurationSeconds: 1,
      acquireTime: "2026-12-06T10:00:11.123456Z",
      renewTime: "2026-12-06T10:00:11.123456Z",
    });
    expect(w.spec).not.toHaveProperty("holderIdentity");
    expect(w.annotations).toEqual({
      [HANDOFF_NODE_ANNOTATION]: "node-a",
      [HANDOFF_INCIDENT_ANNOTATION]: "nf-a",
      [HANDOFF_HOLDER_ANNOTATION]: "node-a_u1",
    });
    expect(fencedNodeEntry("nf-a", PROVEN)).toEqual({ incident: "nf-a", provenAt: PROVEN });
    expect(FencedNodeEntrySchema.parse(fencedNodeEntry("nf-a", PROVEN))).toEqual({
      incident: "nf-a",
      provenAt: PROVEN,
    });
  });
});

describe("the policy's leaseHandoff", () => {
  it("is on by default with the controller manager, schedulers and KubeVirt's Leases", () => {
    const s = resolvePolicy({}).leaseHandoff;
    expect(s.enabled).toBe(true);
    expect(handoffEntries(s)).toEqual(DEFAULT_HANDOFF_LEASES);
    expect(DEFAULT_HANDOFF_LEASES).toContainEqual({
      namespace: "openshift-kube-scheduler",
      name: "kube-scheduler",
    });
    expect(DEFAULT_HANDOFF_LEASES).toContainEqual({ namespace: "openshift-cnv", name: "virt-controller" });
  });
  it("adds an operator's own Leases to the defaults; off hands off nothing", () => {
    const own = { namespace: "apps", matchLabels: { team: "db" } };
    const s = resolvePolicy({ leaseHandoff: { additionalLeases: [own] } }).leaseHandoff;
    expect(handoffEntries(s)).toEqual([...DEFAULT_HANDOFF_LEASES, own]);
    expect(handoffEntries(resolvePolicy({ leaseHandoff: { enabled: false } }).leaseHandoff)).toEqual([]);
    expect(
      handoffPlan(resolvePolicy({ leaseHandoff: { enabled: false } }).leaseHandoff, "i", "n", PROVEN),
    ).toBeUndefined();
    expect(handoffPlan(s, "i", "n", undefined)).toBeUndefined();
  });
  it("an entry names one Lease or selects by labels, never both or neither", () => {
    const bad = (e: object) => LeaseHandoffSettingsSchema.safeParse({ leases: [e] }).success;
    expect(bad({ namespace: "a", name: "x" })).toBe(true);
    expect(bad({ namespace: "a", matchLabels: { k: "v" } })).toBe(true);
    expect(bad({ namespace: "a", name: "x", matchLabels: { k: "v" } })).toBe(false);
    expect(bad({ namespace: "a" })).toBe(false);
    expect(bad({ name: "x" })).toBe(false);
    const labels = (n: number) => Object.fromEntries([...Array(n).keys()].map((i) => [`k${i}`, "v"]));
    expect(bad({ namespace: "a", matchLabels: labels(8) })).toBe(true);
    expect(bad({ namespace: "a", matchLabels: labels(9) })).toBe(false);
  });
});

describe("fence after a proven power-off", () => {
  const inc = confirmed("a", 0, { phase: "Fencing", round: 1 });
  it("asks for the hand-off of the policy's Leases for the incident's node, with the proof's time", () => {
    expect(handoffActions(inc, resolvePolicy({}), PROVEN)).toEqual([
      {
        kind: "handOffLeases",
        plan: { node: "a", incident: inc.metadata.name, provenAt: PROVEN, leases: DEFAULT_HANDOFF_LEASES },
      },
    ]);
    expect(handoffActions(inc, resolvePolicy({ leaseHandoff: { enabled: false } }), PROVEN)).toEqual([]);
  });
  it("decides on the outcomes: nothing more to do, and says what happened", () => {
    const d = onHandoffResult({
      kind: "leasesHandedOff",
      node: "a",
      incident: inc.metadata.name,
      results: [
        { namespace: "kube-system", name: "kube-scheduler", outcome: "released", holder: "a_u" },
        { namespace: "kubevirt", name: "virt-controller", outcome: "skipped", code: "OtherNode" },
        { namespace: "kube-system", name: "kube-controller-manager", outcome: "failed", code: "Conflict" },
      ],
    });
    expect(d.actions).toEqual([]);
    expect(d.outcome).toEqual({
      kind: "processed",
      detail:
        "lease hand-off for a: released kube-system/kube-scheduler; failed kube-system/kube-controller-manager; 1 left alone",
    });
    expect(summarize("a", [])).toBe("lease hand-off for a: nothing released; 0 left alone");
  });
});

describe("the shipped policy and RBAC name what the code writes", () => {
  const read = (f: string) => readFileSync(new URL(`../../../${f}`, import.meta.url), "utf8");
  const policy = read("knative/base/admission/lease-handoff-policy.yaml");
  it("annotations and the fenced-nodes FencedNodeSet (a custom resource as the param)", () => {
    for (const key of [HANDOFF_NODE_ANNOTATION, HANDOFF_INCIDENT_ANNOTATION, HANDOFF_HOLDER_ANNOTATION])
      expect(policy).toContain(`"${key}"`);
    const docs = loadAll(policy) as {
      kind: string;
      apiVersion: string;
      metadata: { name: string };
      spec?: { paramKind?: { apiVersion: string; kind: string }; paramRef?: { name: string } };
    }[];
    const { group, version, kind, name } = FENCED_NODES;
    expect(docs.filter((d) => d.kind === kind).map((d) => [d.apiVersion, d.metadata.name])).toEqual([
      [`${group}/${version}`, name],
    ]);
    // No built-in kind as a param: kubernetes/kubernetes#130887 freezes its cache.
    const kinds = docs.flatMap((d) => (d.spec?.paramKind ? [d.spec.paramKind] : []));
    expect(kinds).toEqual([{ apiVersion: `${group}/${version}`, kind }]);
    expect(docs.flatMap((d) => (d.spec?.paramRef ? [d.spec.paramRef.name] : []))).toEqual([name]);
    expect(docs.some((d) => d.kind === "ConfigMap")).toBe(false);
  });
  it("RBAC grants the default Leases by name", () => {
    const rbac = loadAll(read("knative/base/rbac/lease-handoff.yaml")) as {
      kind: string;
      rules?: { resources: string[]; resourceNames?: string[] }[];
    }[];
    const role = rbac.find((d) => d.kind === "ClusterRole")!;
    const names = role.rules!.find((r) => r.resources.includes("leases"))!.resourceNames!;
    for (const e of DEFAULT_HANDOFF_LEASES) expect(names).toContain(e.name);
  });
});
