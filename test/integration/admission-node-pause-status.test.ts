// Needs real kube-apiserver (+ etcd): a kubelet's nodes/status writes as admission sees them.
// Needs the real API server: whether a Node's metadata can be written through its status subresource, and whether the shipped admission policy sees that write, only a real kube-apiserver can say.
// A node's pause annotation (fastfence.io/paused, knative/base/admission/node-pause-policy.yaml)
// holds fencing of that node with no time bound, so a node (group system:nodes) may not set
// it on itself. A kubelet writes its own Node through two resources: `nodes` and
// `nodes/status` (its heartbeat of conditions); the API server keeps metadata changes made
// through the status subresource of a Node. Here node-b's own kubelet identity (the Node
// authorizer grants it patch on nodes/status) tries to set and remove the annotation
// through `nodes/status`, with the shipped CRDs, RBAC and admission policies. On 7091606
// the policy matched `nodes` only and the write was admitted; it now covers `nodes/status`.
import { CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { beforeEach, describe, expect, it } from "vitest";
import { refusal } from "./refusal.ts";
import { PAUSE_ANNOTATION } from "../../core/planned.ts";
import { Kube } from "../../infra/kube/client.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { kwokNodeObject } from "../../harness/kube/node.ts";

const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNode({ body: kwokNodeObject("node-b", "b0000000-bbbb") });
  const nk = new KubeConfig();
  nk.loadFromFile(await cp.makeUserKubeconfig("system:node:node-b", ["system:nodes"]));
  await sleep(1500); // the policies' type checking and the bindings settle in the apiserver
  return { core, nodeB: new Kube(nk, { requestTimeoutMs: 5000 }) };
});

/** node-b's kubelet patches its own Node's annotations through the status subresource. */
const patchStatus = (annotations: Record<string, string | null>) =>
  env().nodeB.call("patch own node status", (a) =>
    a.core.patchNodeStatus({ name: "node-b", body: { metadata: { annotations } } }, merge),
  );

const annotation = async (key = PAUSE_ANNOTATION) =>
  (await env().core.readNode({ name: "node-b" })).metadata?.annotations?.[key];

describe("a node's pause annotation through nodes/status", () => {
  // Each case starts with node-b not paused (the cases run in any order): the admin removes
  // an annotation an earlier case set.
  beforeEach(async () => {
    await env().core.patchNode(
      { name: "node-b", body: { metadata: { annotations: { [PAUSE_ANNOTATION]: null } } } },
      merge,
    );
  });

  it("the status subresource keeps metadata (premise): another annotation set through it is stored", async () => {
    expect(await refusal(patchStatus({ "example.com/other": "y" }))).toBeUndefined();
    expect(await annotation("example.com/other")).toBe("y");
  });

  it("node-b cannot set its own fastfence.io/paused through nodes/status (admitted on 7091606)", async () => {
    const r = await refusal(patchStatus({ [PAUSE_ANNOTATION]: "never fence me" }));
    expect(r?.status).toBe(403);
    expect(r?.message).toContain(
      "may not set, change or remove its own fastfence.io/paused annotation (system:node:node-b)",
    );
    expect(await annotation()).toBeUndefined();
  });

  it("nor remove one an admin set; its status heartbeat still passes", async () => {
    await env().core.patchNode(
      { name: "node-b", body: { metadata: { annotations: { [PAUSE_ANNOTATION]: "admin: PSU swap" } } } },
      merge,
    );
    const r = await refusal(patchStatus({ [PAUSE_ANNOTATION]: null }));
    expect(r?.status).toBe(403);
    expect(await annotation()).toBe("admin: PSU swap");
    // what a kubelet writes through nodes/status every few seconds: conditions, annotation unchanged
    const now = new Date();
    await env().nodeB.call("node status heartbeat", (a) =>
      a.core.patchNodeStatus(
        {
          name: "node-b",
          body: {
            status: {
              conditions: [
                {
                  type: "Ready",
                  status: "True",
                  reason: "KubeletReady",
                  lastHeartbeatTime: now,
                  lastTransitionTime: now,
                },
              ],
            },
          },
        },
        merge,
      ),
    );
    expect(await annotation()).toBe("admin: PSU swap");
  });
});
