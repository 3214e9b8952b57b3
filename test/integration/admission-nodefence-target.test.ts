// Needs real kube-apiserver (+ etcd): CRD transition rules and admission on NodeFence targets.
// Needs the real API server: only a real kube-apiserver runs the NodeFence CRD's validation and the shipped RBAC and admission policies as each identity.
// An incident's target cannot be bent (issue "least privilege and proofs that cannot be
// bent", finding 1): spec.nodeName and spec.bootId name the node and the boot the incident
// was created for, and every stage acts on them (remediate-workloads releases the node the
// spec names, fence powers it off). With the shipped CRDs, RBAC and admission policies,
// every identity that may write NodeFences — the confirm, fence, remediate-workloads and
// recover ServiceAccounts (their own tokens, their shipped RBAC only) and an operator with
// exactly the RBAC docs/rbac.md prints — tries to point an existing incident at another
// node or another boot, with every verb its RBAC gives it (update; patch where granted).
// Before the fix (7091606) all 14 writes were admitted; the CRD's transition rules on spec
// (core/incident.ts NODEFENCE_TARGET_RULES) now refuse each with 422 and the rule's message,
// while the writes the product makes (status, an operator's request) still pass. Their
// labels fastfence.io/node and fastfence.io/boot-id (14 of 14 rewrites admitted on 0abf280)
// are kept by knative/base/admission/nodefence-target-labels-policy.yaml (403).
import { KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { refusal } from "./refusal.ts";
import {
  BOOT_ID_LABEL,
  emptyStatus,
  NODE_LABEL,
  NODEFENCE_TARGET_RULES,
  newIncident,
  transition,
  type NodeFence,
} from "../../core/incident.ts";
import { Kube } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { OPERATOR_GROUP, operatorRbacFromDocs } from "../../harness/kube/operator-rbac.ts";

const G = { group: "fastfence.io", version: "v1alpha1", plural: "nodefences", namespace: NS };
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const STAGES = ["confirm", "fence", "remediate-workloads", "recover"] as const;
type Writer = (typeof STAGES)[number] | "operator";
/** The verbs on nodefences each writer's shipped RBAC grants (docs/rbac.md). */
const VERBS: Record<Writer, readonly ("update" | "patch")[]> = {
  confirm: ["update", "patch"],
  fence: ["update"],
  "remediate-workloads": ["update"],
  recover: ["update"],
  operator: ["update", "patch"],
};
const FIELDS = { nodeName: "node-healthy", bootId: "boot-other" } as const;
type Field = keyof typeof FIELDS;

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [...shippedAccessControl(), ...operatorRbacFromDocs()]);
  const kube = (k: KubeConfig) => new Kube(k, { requestTimeoutMs: 5000 });
  const kubes = {} as Record<Writer, Kube>;
  for (const s of STAGES)
    kubes[s] = kube(await serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount: `fastfence-${s}` }));
  const alice = new KubeConfig();
  alice.loadFromFile(await cp.makeUserKubeconfig("alice", [OPERATOR_GROUP]));
  kubes.operator = kube(alice);
  await sleep(1500); // the policies' type checking and the bindings settle in the apiserver
  return { kubes, admin: new IncidentStore(kube(kc), NS) };
});

let seq = 0;
/** A new incident for a node of its own: created by confirm, or by the operator with a request. */
async function incident(creator: "confirm" | "operator"): Promise<string> {
  const node = `node-${++seq}`;
  const inc = newIncident(node, `boot-${seq}`, emptyStatus());
  if (creator === "confirm") {
    await new IncidentStore(env().kubes.confirm, NS).create(inc);
    return inc.metadata.name;
  }
  const { status: _none, ...body } = inc;
  const at = new Date().toISOString();
  await env().kubes.operator.call("create nodefence", (a) =>
    a.custom.createNamespacedCustomObject({
      ...G,
      body: { ...body, spec: { ...body.spec, operatorRequest: { by: "alice", reason: "NIC flapping", at } } },
    }),
  );
  return inc.metadata.name;
}

/** `who` sets spec.<field> of incident `name` to `value` with `verb`. */
function bend(who: Writer, verb: "update" | "patch", name: string, field: Field, value: string) {
  return env().kubes[who].call(`${verb} nodefence ${name}`, async (a) => {
    if (verb === "patch")
      return a.custom.patchNamespacedCustomObject({ ...G, name, body: { spec: { [field]: value } } }, merge);
    const cur = (await a.custom.getNamespacedCustomObject({ ...G, name })) as NodeFence;
    return a.custom.replaceNamespacedCustomObject({
      ...G,
      name,
      body: { ...cur, spec: { ...cur.spec, [field]: value } },
    });
  });
}

const CASES = (Object.keys(VERBS) as Writer[]).flatMap((who) =>
  VERBS[who].flatMap((verb) => (Object.keys(FIELDS) as Field[]).map((field) => [who, verb, field] as const)),
);

const MESSAGE: Record<Field, string> = {
  nodeName: NODEFENCE_TARGET_RULES[0].message,
  bootId: NODEFENCE_TARGET_RULES[1].message,
};

describe("NodeFence target: spec.nodeName and spec.bootId of an existing incident", () => {
  it.each(CASES)(
    "%s (%s) changing spec.%s is refused with 422 and the rule's message",
    async (who, verb, field) => {
      const name = await incident(who === "operator" ? "operator" : "confirm");
      const before = await env().admin.get(name);
      const r = await refusal(bend(who, verb, name, field, FIELDS[field]));
      expect(r?.status).toBe(422);
      expect(r?.message).toContain(MESSAGE[field]);
      const stored = await env().admin.get(name);
      expect(stored?.spec).toEqual(before?.spec);
    },
  );

  it("the writes the product makes still pass: status, and an operator's request on an open incident", async () => {
    const name = await incident("confirm");
    const store = new IncidentStore(env().kubes.confirm, NS);
    const cur = await store.get(name);
    const st = transition(emptyStatus(), "Suspected", new Date().toISOString(), {});
    await store.writeStatus(name, cur!.metadata.resourceVersion!, st);
    const at = new Date().toISOString();
    await env().kubes.operator.call("request fencing", (a) =>
      a.custom.patchNamespacedCustomObject(
        { ...G, name, body: { spec: { operatorRequest: { by: "alice", reason: "NIC flapping", at } } } },
        merge,
      ),
    );
    const stored = await env().admin.get(name);
    expect(stored?.spec.operatorRequest?.by).toBe("alice");
    expect(stored?.status?.phase).toBe("Suspected");
  });
});

const LABELS = { [NODE_LABEL]: "node-healthy", [BOOT_ID_LABEL]: "boot-other" } as const;
const LABEL_CASES = (Object.keys(VERBS) as Writer[]).flatMap((who) =>
  VERBS[who].flatMap((verb) =>
    (Object.keys(LABELS) as (keyof typeof LABELS)[]).map((l) => [who, verb, l] as const),
  ),
);

/** `who` sets the incident's label `key` to `value` with `verb`. */
function relabel(who: Writer, verb: "update" | "patch", name: string, key: string, value: string) {
  return env().kubes[who].call(`${verb} nodefence ${name}`, async (a) => {
    if (verb === "patch")
      return a.custom.patchNamespacedCustomObject(
        { ...G, name, body: { metadata: { labels: { [key]: value } } } },
        merge,
      );
    const cur = (await a.custom.getNamespacedCustomObject({ ...G, name })) as NodeFence;
    return a.custom.replaceNamespacedCustomObject({
      ...G,
      name,
      body: { ...cur, metadata: { ...cur.metadata, labels: { ...cur.metadata.labels, [key]: value } } },
    });
  });
}

describe("NodeFence target labels: fastfence.io/node and fastfence.io/boot-id of an existing incident", () => {
  it.each(LABEL_CASES)(
    "%s (%s) changing label %s is refused with 403 and the policy's message",
    async (who, verb, key) => {
      const name = await incident(who === "operator" ? "operator" : "confirm");
      const before = await env().admin.get(name);
      const r = await refusal(relabel(who, verb, name, key, LABELS[key]));
      expect(r?.status).toBe(403);
      expect(r?.message).toContain(
        `the labels fastfence.io/node and fastfence.io/boot-id of NodeFence ${name} name the node and boot it was created for and cannot be changed`,
      );
      expect((await env().admin.get(name))?.metadata.labels).toEqual(before?.metadata.labels);
    },
  );

  it("other labels may still change", async () => {
    const name = await incident("confirm");
    await relabel("confirm", "patch", name, "example.com/team", "storage");
    expect((await env().admin.get(name))?.metadata.labels?.["example.com/team"]).toBe("storage");
  });
});
