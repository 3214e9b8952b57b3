// Needs real kube-apiserver (+ etcd): reset() restores what the server itself stores.
// The shared control plane's reset() (harness/env/plane-reset.ts), on the run's shared
// kube-apiserver: after a file has created objects of every kind the integration files
// create (a Node, a namespace with a ConfigMap held by a finalizer, a ServiceAccount and a
// Pod bound to the Node, a CRD with instances, a ValidatingAdmissionPolicy and its
// binding, a ClusterRole and its binding, Leases, an Event), changed snapshot objects and
// deleted one, reset() leaves a listing equal to the snapshot, and the same names can be
// created again at once (the policy's refusal is no longer in force). On an untouched
// plane it is a no-op, and fast. When it cannot finish, it says what is left.
import { describe, expect, it } from "vitest";
import type { KubernetesObject } from "@kubernetes/client-node";
import { listEverything, objectKey } from "../../harness/env/api-inventory.ts";
import { applyObjects } from "../../harness/env/apply.ts";
import { KubeRest, KubeRestError } from "../../harness/env/kube-rest.ts";
import { PlaneResetError, resetPlane } from "../../harness/env/plane-reset.ts";
import { contentOf, isSelfManaged, type PlaneSnapshot } from "../../harness/env/plane-snapshot.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const rest = new KubeRest(cp.server, cp.pki);
  scope.add({ stop: async () => rest.close() });
  return { cp, rest };
});

/** key → content of every object but the self-managed ones. */
const contents = (objs: PlaneSnapshot["objects"]) =>
  new Map(objs.filter((o) => !isSelfManaged(o)).map((o) => [objectKey(o), contentOf(o)]));

async function expectSnapshotState(): Promise<void> {
  const { cp, rest } = env();
  const now = contents(await listEverything(rest));
  const want = contents(cp.snapshot.objects);
  expect([...now.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [k, c] of want) expect(now.get(k), k).toBe(c);
}

const NS = "reset-ns";
const REFUSED = "reset-refused";
const widget = (name: string, namespace: string): KubernetesObject & { spec: object } => ({
  apiVersion: "reset.example.com/v1",
  kind: "Widget",
  metadata: { name, namespace, finalizers: ["reset.example.com/hold"] },
  spec: { size: 3 },
});

/** Objects of every kind the integration files create, in an order that can be applied. */
function fileObjects(): KubernetesObject[] {
  const o = (x: object) => x as KubernetesObject;
  return [
    o({ apiVersion: "v1", kind: "Node", metadata: { name: "reset-node" } }),
    o({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } }),
    o({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "reset-cm", namespace: NS, finalizers: ["reset.example.com/hold"] },
      data: { a: "1" },
    }),
    o({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "reset-sa", namespace: NS } }),
    o({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "reset-pod", namespace: NS },
      spec: { nodeName: "reset-node", containers: [{ name: "c", image: "registry.invalid/none:0" }] },
    }),
    o({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "widgets.reset.example.com" },
      spec: {
        group: "reset.example.com",
        names: { plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList" },
        scope: "Namespaced",
        versions: [
          {
            name: "v1",
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: "object",
                properties: { spec: { type: "object", properties: { size: { type: "integer" } } } },
              },
            },
          },
        ],
      },
    }),
    o({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "reset-role" },
      rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get"] }],
    }),
    o({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "reset-binding" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "reset-role" },
      subjects: [{ kind: "User", name: "reset-user", apiGroup: "rbac.authorization.k8s.io" }],
    }),
    o({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "reset-node", namespace: "kube-node-lease" },
      spec: { holderIdentity: "reset-node", leaseDurationSeconds: 40 },
    }),
    o({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "reset-lease", namespace: NS },
      spec: { holderIdentity: "someone" },
    }),
    o({
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "reset-event", namespace: "default" },
      involvedObject: { kind: "Node", name: "reset-node" },
      reason: "Testing",
      message: "an event a file leaves behind",
      type: "Normal",
    }),
    o({
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: "reset-policy" },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"] },
          ],
        },
        validations: [
          { expression: `object.metadata.name != '${REFUSED}'`, message: "refused by reset-policy" },
        ],
      },
    }),
    o({
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: "reset-policy" },
      spec: { policyName: "reset-policy", validationActions: ["Deny"] },
    }),
  ];
}

/** Create everything of fileObjects() and the CRD's instances (one in a snapshot namespace). */
async function createFileObjects(): Promise<void> {
  const kc = env().cp.kubeConfig;
  await applyObjects(kc, fileObjects()); // waits: the CRD Established, the policy in force
  await applyObjects(kc, [widget("w1", NS), widget("w2", "default")]);
}

/** A ConfigMap create in `default`; its HTTP status. */
async function createConfigMap(name: string): Promise<number> {
  const r = await env().rest.request("POST", "/api/v1/namespaces/default/configmaps", {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name },
  });
  return r.status;
}

const MERGE = { headers: { "content-type": "application/merge-patch+json" } };

describe("shared control plane: reset()", () => {
  it("on an untouched plane is a no-op, and fast", async () => {
    const r = await env().cp.reset();
    console.log(`reset of an untouched plane: ${r.ms} ms (${r.rounds} listing)`);
    expect(r).toMatchObject({ rounds: 1, deleted: 0, restored: 0, recreated: 0 });
    expect(r.ms).toBeLessThan(3000);
    await expectSnapshotState();
  });

  it("removes what a file created and puts back what it changed or deleted", async () => {
    const { cp, rest } = env();
    await createFileObjects();
    expect(await createConfigMap(REFUSED)).toBe(422); // premise: the policy is in force
    // snapshot objects: a namespace labelled, a bootstrap ClusterRole's rules changed, a
    // bootstrap ClusterRoleBinding deleted
    await rest.expect(
      "PATCH",
      "/api/v1/namespaces/default",
      { metadata: { labels: { touched: "yes" } } },
      MERGE,
    );
    const viewer = "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:public-info-viewer";
    await rest.expect("PATCH", viewer, { rules: [{ nonResourceURLs: ["/x"], verbs: ["get"] }] }, MERGE);
    await rest.expect(
      "DELETE",
      "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:public-info-viewer",
    );

    const r = await cp.reset();
    console.log(`reset after a file: ${r.ms} ms, ${JSON.stringify(r)}`);
    expect(r.deleted).toBeGreaterThanOrEqual(fileObjects().length + 2);
    expect(r).toMatchObject({ restored: 2, recreated: 1 });
    await expectSnapshotState();
    for (const path of [`/api/v1/namespaces/${NS}`, "/api/v1/nodes/reset-node"]) {
      const gone = await rest.get(path).catch((err: unknown) => err);
      expect(gone).toBeInstanceOf(KubeRestError);
      expect((gone as KubeRestError).status).toBe(404);
    }
  });

  it("leaves nothing in force: the same names can be created again at once", async () => {
    // a file's objects, and their reset, of its own first (the cases run in any order)
    await createFileObjects();
    expect(await createConfigMap(REFUSED)).toBe(422);
    await env().cp.reset();
    expect(await createConfigMap(REFUSED)).toBe(201); // the policy's deletion is in force
    await createFileObjects();
    expect(await createConfigMap(REFUSED)).toBe(422);
    const r = await env().cp.reset();
    expect(r.deleted).toBeGreaterThan(0);
    await expectSnapshotState();
  });

  it("throws a PlaneResetError naming what it could not restore", async () => {
    const { cp, rest } = env();
    expect(await createConfigMap("reset-leftover")).toBe(201);
    const err = await resetPlane(rest, cp.kubeConfig, cp.snapshot, { maxRounds: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlaneResetError);
    expect((err as PlaneResetError).unrestored).toEqual(["left core/configmaps/default/reset-leftover"]);
    await cp.reset();
    await expectSnapshotState();
  });
});
