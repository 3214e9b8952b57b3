// Needs real kube-apiserver (+ etcd): the CRD's CEL rules run only inside the API server.
// Fencing levels are selected only by node name or by labels a kubelet cannot set on its own
// Node (issue 13): the FencingPolicy CRD generated from core/policy.ts carries a CEL rule,
// so a real kube-apiserver refuses a policy whose nodeSelector.matchLabels uses any other
// label, naming the field (what `kubectl apply` prints), and accepts one under
// node-restriction.kubernetes.io/. The timeout chain (core/policy.ts: BMC call < level ≤
// round < round + margin < Lease) is CEL in the same CRD: an inconsistent policy is refused
// at create with the fields named, with the message the zod reader gives for it.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { resolvePolicy, type FencingPolicySpecInput } from "../../core/policy.ts";

const G = { group: "fastfence.io", version: "v1alpha1", plural: "fencingpolicies" };

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
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

describe("FencingPolicy CRD: the timeout chain", () => {
  const spec = (timeouts: FencingPolicySpecInput["timeouts"], levelTimeoutMs?: number) => ({
    timeouts,
    fencing: {
      nodes: [
        {
          nodeSelector: { names: ["w0"] },
          levels: [{ ...level, ...(levelTimeoutMs !== undefined ? { timeoutMs: levelTimeoutMs } : {}) }],
        },
      ],
    },
  });
  const named = (name: string, s: object) => ({
    apiVersion: "fastfence.io/v1alpha1",
    kind: "FencingPolicy",
    metadata: { name },
    spec: s,
  });
  /** The zod reader's message for the same spec (the same words the API server must print). */
  const readerMessage = (s: FencingPolicySpecInput) => {
    try {
      resolvePolicy(s);
    } catch (err) {
      return (err as { issues: { message: string }[] }).issues[0]!.message;
    }
    throw new Error("the reader accepted it");
  };

  it.each([
    {
      name: "a lease not above the round plus its 5 s margin",
      s: spec({ powerOffTimeoutMs: 30_000, leaseDurationMs: 15_000 }),
      field: "spec.timeouts",
      names: ["timeouts.leaseDurationMs", "timeouts.powerOffTimeoutMs"],
    },
    {
      name: "a BMC call not below the round",
      s: spec({ bmcCallTimeoutMs: 30_000, powerOffTimeoutMs: 30_000 }),
      field: "spec.timeouts",
      names: ["timeouts.bmcCallTimeoutMs", "timeouts.powerOffTimeoutMs"],
    },
    {
      name: "a level longer than the round",
      s: spec({}, 40_000),
      field: "spec",
      names: ["fencing.nodes[].levels[].timeoutMs", "timeouts.powerOffTimeoutMs"],
    },
    {
      name: "a level not longer than one BMC call (defaults elsewhere)",
      s: spec({ bmcCallTimeoutMs: 8000 }, 8000),
      field: "spec",
      names: ["fencing.nodes[].levels[].timeoutMs", "timeouts.bmcCallTimeoutMs"],
    },
  ])("refuses $name, naming the fields", async ({ s, field, names }) => {
    const r = await create(named("chain", s));
    expect(r?.code).toBe(422);
    expect(r?.body).toContain(`${field}: Invalid value`);
    for (const n of names) expect(r?.body).toContain(n);
    expect(r?.body).toContain(readerMessage(s as FencingPolicySpecInput));
  });

  it("refuses a round above 240 s (the Knative timeouts are set above it)", async () => {
    const r = await create(named("long", spec({ powerOffTimeoutMs: 240_001, leaseDurationMs: 600_000 })));
    expect(r?.code).toBe(422);
    expect(r?.body).toContain("spec.timeouts.powerOffTimeoutMs");
  });

  it("accepts the defaults, and a chain set for a BMC that needs 8 s per call", async () => {
    expect(await create(named("defaults", spec(undefined)))).toBeUndefined();
    const slow = spec(
      { bmcCallTimeoutMs: 10_000, powerOffTimeoutMs: 60_000, leaseDurationMs: 70_000 },
      45_000,
    );
    expect(await create(named("slow-bmc", slow))).toBeUndefined();
  });
});
