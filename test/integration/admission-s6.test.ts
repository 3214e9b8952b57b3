// Needs real kube-apiserver (+ etcd): admission checks confirmedBy against the requester.
// S6 enforced by the API server: the ValidatingAdmissionPolicy in knative/base/admission
// lets an identity set NodeFence status.confirmedBy only to itself, so no other identity
// can forge a "confirmed" incident for fence to act on — even with write access to
// NodeFence status. Later status writes that keep confirmedBy unchanged still pass.
import { CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api, CoreV1Api } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT, sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const NS = "fastfence-system";
const CONFIRM = `system:serviceaccount:${NS}:fastfence-confirm`;
const G = { group: "fastfence.io", version: "v1alpha1", plural: "nodefences", namespace: NS };

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...readManifests(join(ROOT, "knative/base/crds")),
    // this policy alone: the status-integrity policy (admission-nodefence-status.test.ts)
    // would refuse the admin below standing in for fence
    ...readManifests(join(ROOT, "knative/base/admission/confirmedby-policy.yaml")),
  ]);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
  // Both identities may write NodeFences and their status (as if RBAC had been too generous).
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: "nodefence-writer" },
      rules: [
        {
          apiGroups: ["fastfence.io"],
          resources: ["nodefences", "nodefences/status"],
          verbs: ["get", "list", "create", "update", "patch"],
        },
      ],
    },
  });
  const users = { confirm: CONFIRM, intruder: "mallory" };
  const clients: Record<string, CustomObjectsApi> = {};
  for (const [k, user] of Object.entries(users)) {
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: `nodefence-writer-${k}` },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "nodefence-writer" },
        subjects: [{ kind: "User", name: user, apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
    const ukc = new KubeConfig();
    ukc.loadFromFile(await cp.makeUserKubeconfig(user));
    clients[k] = ukc.makeApiClient(CustomObjectsApi);
  }
  await sleep(1500); // the policy's type checking and the bindings settle in the apiserver
  return {
    admin: kc.makeApiClient(CustomObjectsApi),
    confirm: clients.confirm!,
    intruder: clients.intruder!,
  };
});

async function create(api: CustomObjectsApi, name: string) {
  return (await api.createNamespacedCustomObject({
    ...G,
    body: {
      apiVersion: "fastfence.io/v1alpha1",
      kind: "NodeFence",
      metadata: { name },
      spec: { nodeName: "node-a", bootId: "b1" },
    },
  })) as { metadata: { resourceVersion: string } };
}

function status(confirmedBy: string, phase = "Confirmed") {
  return { phase, timestamps: {}, evidence: [], round: 0, attempts: [], confirmedBy };
}

async function writeStatus(api: CustomObjectsApi, name: string, st: object) {
  const cur = (await api.getNamespacedCustomObject({ ...G, name })) as Record<string, unknown>;
  return api.replaceNamespacedCustomObjectStatus({ ...G, name, body: { ...cur, status: st } });
}

describe("S6 admission policy: status.confirmedBy is the writer's own identity", () => {
  it("lets confirm record itself, and keeps later writes that do not change it", async () => {
    const { confirm, admin } = env();
    await create(confirm, "node-a-b1");
    await writeStatus(confirm, "node-a-b1", status(CONFIRM));
    // another stage (here: admin, standing in for fence) moves the phase on, confirmedBy unchanged
    await writeStatus(admin, "node-a-b1", status(CONFIRM, "Fencing"));
    const got = (await admin.getNamespacedCustomObject({ ...G, name: "node-a-b1" })) as {
      status: { phase: string; confirmedBy: string };
    };
    expect(got.status).toMatchObject({ phase: "Fencing", confirmedBy: CONFIRM });
  });

  it("denies another identity forging the confirm identity", async () => {
    const { intruder } = env();
    await create(intruder, "node-b-b1");
    const err = await writeStatus(intruder, "node-b-b1", status(CONFIRM)).then(
      () => undefined,
      (e: { code?: number; body?: string }) => e,
    );
    expect(err?.code).toBe(403);
    expect(String(err?.body)).toMatch(/confirmedBy may only be set to the writer's own identity/);
  });

  it("denies changing who confirmed an existing incident", async () => {
    const { confirm, intruder } = env();
    // an incident confirm has recorded itself on (its own: the cases run in any order)
    await create(confirm, "node-c-b1");
    await writeStatus(confirm, "node-c-b1", status(CONFIRM));
    const err = await writeStatus(intruder, "node-c-b1", status("mallory")).then(
      () => undefined,
      (e: { code?: number }) => e,
    );
    expect(err?.code).toBe(403);
  });
});
