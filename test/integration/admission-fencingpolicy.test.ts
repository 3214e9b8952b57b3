// Fencing levels are selected only by node name or by labels a kubelet cannot set on its own
// Node (issue 13): the FencingPolicy CRD generated from core/policy.ts carries a CEL rule,
// so a real kube-apiserver refuses a policy whose nodeSelector.matchLabels uses any other
// label, naming the field (what `kubectl apply` prints), and accepts one under
// node-restriction.kubernetes.io/.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT, startControlPlane } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const G = { group: "fastfence.io", version: "v1alpha1", plural: "fencingpolicies" };

const env = withEnv(async (scope) => {
  const cp = scope.add(await startControlPlane());
  await applyObjects(cp.kubeConfig, readManifests(join(ROOT, "knative/base/crds")));
  return { custom: cp.kubeConfig.makeApiClient(CustomObjectsApi) };
});

const policy = (name: string, matchLabels: Record<string, string>) => ({
  apiVersion: "fastfence.io/v1alpha1",
  kind: "FencingPolicy",
  metadata: { name },
  spec: {
    fencing: {
      nodes: [
        { nodeSelector: { names: ["w0"] }, levels: [level] },
        { nodeSelector: { matchLabels }, levels: [level] },
      ],
    },
  },
});
const level = { driver: "ipmi", address: "ipmi://192.0.2.1:623", credentialsSecret: "bmc" };

async function create(body: object): Promise<{ code: number; body: string } | undefined> {
  try {
    await env().custom.createClusterCustomObject({ ...G, body });
    return undefined;
  } catch (err) {
    const e = err as { code?: number; body?: string };
    return { code: e.code ?? 0, body: String(e.body) };
  }
}

describe("FencingPolicy CRD: nodeSelector.matchLabels only under node-restriction.kubernetes.io/", () => {
  it.each(["kubernetes.io/hostname", "node-role.kubernetes.io/worker", "example.com/rack"])(
    "refuses a policy selecting on %s, naming the field",
    async (key) => {
      const r = await create(policy("bad", { [key]: "x" }));
      expect(r?.code).toBe(422);
      expect(r?.body).toContain("spec.fencing.nodes[1].nodeSelector.matchLabels");
      expect(r?.body).toContain(
        "only labels under node-restriction.kubernetes.io/ may select fencing levels",
      );
    },
  );

  it("accepts a policy selecting by name and by a node-restriction.kubernetes.io/ label", async () => {
    expect(await create(policy("good", { "node-restriction.kubernetes.io/bmc": "rack-1" }))).toBeUndefined();
  });
});
