// Needs real kube-apiserver (+ etcd): RBAC and admission on each stage's Node writes.
// Needs the real API server: what remediate-workloads, recover and fence may write to a Node is decided by RBAC and the shipped admission policies, which only a real kube-apiserver evaluates.
// Issue "least privilege and proofs that cannot be bent", item 3.1: remediate-workloads and
// recover hold update/patch on every Node (RBAC cannot restrict fields). Each tries, with its
// own ServiceAccount token against the shipped CRDs, RBAC and admission policies, what a
// stolen token would: taint a running node out-of-service with no proven power-off (Kubernetes
// then releases its workloads itself), relabel a node into another node's FencingPolicy entry
// (node-restriction.kubernetes.io/…), drop a node from the probe ring (fastfence.io/probe-address),
// cordon it, add another NoExecute taint, forge the fenced-off fact. What each stage genuinely
// writes (infra/kube/nodes.ts setTaint, both its paths) must still pass: fence sets
// fastfence.io/fenced-off after the proven power-off, remediate-workloads then adds the
// out-of-service taint, recover removes it. On 6f7efbe every forged write was admitted.
import {
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Taint,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { refusal } from "./refusal.ts";
import { FENCED_OFF_ANNOTATION } from "../../core/fenced-off.ts";
import { PROBE_ADDRESS_ANNOTATION } from "../../core/probe-address.ts";
import { Kube } from "../../infra/kube/client.ts";
import { NodeOps, OUT_OF_SERVICE_TAINT } from "../../infra/kube/nodes.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { kwokNodeObject } from "../../harness/kube/node.ts";

const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const OOS = OUT_OF_SERVICE_TAINT.key;

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNode({ body: kwokNodeObject("node-a", "boot-a") });
  await core.createNode({ body: kwokNodeObject("node-b", "boot-b") });
  const now = new Date();
  // node-b runs, but its kubelet stopped reporting: NotReady, the state a release waits for
  await core.patchNodeStatus(
    {
      name: "node-b",
      body: {
        status: {
          conditions: [
            {
              type: "Ready",
              status: "False",
              reason: "KubeletNotReady",
              lastHeartbeatTime: now,
              lastTransitionTime: now,
            },
          ],
        },
      },
    },
    merge,
  );
  const as = async (serviceAccount: string) =>
    new Kube(await serviceAccountKubeConfig(kc, { namespace: FASTFENCE_NAMESPACE, serviceAccount }), {
      requestTimeoutMs: 5000,
    });
  const nk = new KubeConfig();
  nk.loadFromFile(await cp.makeUserKubeconfig("system:node:node-b", ["system:nodes"]));
  await sleep(1500); // the policies' type checking and the bindings settle in the apiserver
  return {
    core,
    admin: new Kube(kc, { requestTimeoutMs: 5000 }),
    remediate: await as("fastfence-remediate-workloads"),
    recover: await as("fastfence-recover"),
    fence: await as("fastfence-fence"),
    nodeB: new Kube(nk, { requestTimeoutMs: 5000 }),
  };
});

type Who = "remediate" | "recover";

const read = (name = "node-b") => env().core.readNode({ name });
const patch = (kube: Kube, body: object, name = "node-b") =>
  kube.call(`patch node ${name}`, (a) => a.core.patchNode({ name, body }, merge));
const taintsOf = async (name = "node-b") => (await read(name)).spec?.taints ?? [];

/** The admin puts node-b back as it was: no taints, not cordoned, labels and annotations as created. */
async function reset(): Promise<void> {
  await patch(env().admin, {
    metadata: {
      labels: { "node-restriction.kubernetes.io/bmc": null },
      annotations: { [PROBE_ADDRESS_ANNOTATION]: null, [FENCED_OFF_ANNOTATION]: null },
    },
    spec: { taints: null, unschedulable: null },
  });
}

const anotherTaint: V1Taint = { key: "example.com/evict", value: "now", effect: "NoExecute" };

/** Each forged write: what it sends, and how to see whether it was stored. */
const forged: { what: string; write: (k: Kube) => Promise<unknown>; stored: () => Promise<boolean> }[] = [
  {
    what: "the out-of-service taint on a running NotReady node with no proven power-off (setTaint)",
    write: (k) => new NodeOps(k).setTaint("node-b", OUT_OF_SERVICE_TAINT, true),
    stored: async () => (await taintsOf()).some((t) => t.key === OOS),
  },
  {
    what: "the label node-restriction.kubernetes.io/bmc=node-a (node-b into node-a's FencingPolicy entry)",
    write: (k) => patch(k, { metadata: { labels: { "node-restriction.kubernetes.io/bmc": "node-a" } } }),
    stored: async () => (await read()).metadata?.labels?.["node-restriction.kubernetes.io/bmc"] === "node-a",
  },
  {
    what: `the annotation ${PROBE_ADDRESS_ANNOTATION} (probes go elsewhere: node-b looks dead, or alive)`,
    write: (k) => patch(k, { metadata: { annotations: { [PROBE_ADDRESS_ANNOTATION]: "192.0.2.1:10250" } } }),
    stored: async () => (await read()).metadata?.annotations?.[PROBE_ADDRESS_ANNOTATION] !== undefined,
  },
  {
    what: "a cordon (spec.unschedulable)",
    write: (k) => patch(k, { spec: { unschedulable: true } }),
    stored: async () => (await read()).spec?.unschedulable === true,
  },
  {
    what: "another NoExecute taint (evicts node-b's pods)",
    write: (k) => patch(k, { spec: { taints: [anotherTaint] } }),
    stored: async () => (await taintsOf()).some((t) => t.key === anotherTaint.key),
  },
  {
    what: `the fenced-off fact ${FENCED_OFF_ANNOTATION} itself`,
    write: (k) => patch(k, { metadata: { annotations: { [FENCED_OFF_ANNOTATION]: "nf-node-b-x/boot-b" } } }),
    stored: async () => (await read()).metadata?.annotations?.[FENCED_OFF_ANNOTATION] !== undefined,
  },
];

const messages: Record<Who, RegExp> = {
  // the fact itself is refused by both policies; the API server names one of them
  remediate:
    /fastfence-remediate-workloads may only add the out-of-service taint|only fence may set or change/,
  recover: /fastfence-recover may only remove the out-of-service taint|only fence may set or change/,
};

describe("what remediate-workloads and recover may write to a Node", () => {
  for (const who of ["remediate", "recover"] as const)
    for (const f of forged)
      it(`${who}: ${f.what} is refused (admitted on 6f7efbe)`, async () => {
        await reset();
        const r = await refusal(f.write(env()[who]));
        expect(r?.status).toBe(403);
        expect(r?.message).toMatch(messages[who]);
        expect(await f.stored()).toBe(false);
      });
});

describe("the fenced-off fact and the out-of-service taint", () => {
  const fact = (value: string | null, kube: Kube = env().fence) =>
    patch(kube, { metadata: { annotations: { [FENCED_OFF_ANNOTATION]: value } } });

  it("fence sets the fact naming node-b's current boot (403 by RBAC on 6f7efbe: fence could not write Nodes)", async () => {
    await reset();
    expect(await refusal(fact("nf-node-b-1/boot-b"))).toBeUndefined();
    expect((await read()).metadata?.annotations?.[FENCED_OFF_ANNOTATION]).toBe("nf-node-b-1/boot-b");
  });

  it("fence may not name another boot, nor touch anything else on the Node", async () => {
    const r = await refusal(fact("nf-node-b-1/boot-old"));
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("current boot");
    const l = await refusal(
      patch(env().fence, { metadata: { labels: { "node-restriction.kubernetes.io/bmc": "x" } } }),
    );
    expect(l?.status).toBe(403);
    const t = await refusal(new NodeOps(env().fence).setTaint("node-b", OUT_OF_SERVICE_TAINT, true));
    expect(t?.status).toBe(403);
  });

  it("no one but fence sets the fact: node-b's kubelet through nodes/status is refused", async () => {
    await reset();
    const r = await refusal(
      env().nodeB.call("patch own node status", (a) =>
        a.core.patchNodeStatus(
          { name: "node-b", body: { metadata: { annotations: { [FENCED_OFF_ANNOTATION]: "x/boot-b" } } } },
          merge,
        ),
      ),
    );
    expect(r?.status).toBe(403);
    expect(r?.message).toContain(`only fence may set or change ${FENCED_OFF_ANNOTATION}`);
    const admin = await refusal(fact("x/boot-b", env().admin));
    expect(admin?.status).toBe(403);
  });

  it("with the fact: remediate-workloads adds the taint (both setTaint paths), recover removes it", async () => {
    await reset();
    await fact("nf-node-b-1/boot-b");
    const ops = new NodeOps(env().remediate);
    // no taints list yet: the JSON-patch append is refused (422), the read-modify-write replaces
    expect(await ops.setTaint("node-b", OUT_OF_SERVICE_TAINT, true)).toBe(true);
    expect((await taintsOf()).map((t) => t.key)).toEqual([OOS]);
    expect(await new NodeOps(env().recover).setTaint("node-b", OUT_OF_SERVICE_TAINT, false)).toBe(true);
    expect(await taintsOf()).toEqual([]);
    // with a taints list: the one-request append
    await patch(env().admin, { spec: { taints: [{ key: "example.com/keep", effect: "NoSchedule" }] } });
    expect(await ops.setTaint("node-b", OUT_OF_SERVICE_TAINT, true)).toBe(true);
    expect((await taintsOf()).map((t) => t.key)).toEqual(["example.com/keep", OOS]);
    // remediate-workloads may not take it off, recover may not put it on
    const off = await refusal(ops.setTaint("node-b", OUT_OF_SERVICE_TAINT, false));
    expect(off?.status).toBe(403);
    expect(await new NodeOps(env().recover).setTaint("node-b", OUT_OF_SERVICE_TAINT, false)).toBe(true);
    const on = await refusal(new NodeOps(env().recover).setTaint("node-b", OUT_OF_SERVICE_TAINT, true));
    expect(on?.status).toBe(403);
    expect((await taintsOf()).map((t) => t.key)).toEqual(["example.com/keep"]);
  });

  it("a fact of an ended boot does not count: the node rebooted, the taint is refused", async () => {
    await reset();
    await fact("nf-node-b-1/boot-b");
    await env().core.patchNodeStatus(
      {
        name: "node-b",
        body: { status: { nodeInfo: { ...(await read()).status!.nodeInfo!, bootID: "boot-b2" } } },
      },
      merge,
    );
    try {
      const r = await refusal(new NodeOps(env().remediate).setTaint("node-b", OUT_OF_SERVICE_TAINT, true));
      expect(r?.status).toBe(403);
      expect(r?.message).toContain(FENCED_OFF_ANNOTATION);
      expect(await taintsOf()).toEqual([]);
    } finally {
      await env().core.patchNodeStatus(
        {
          name: "node-b",
          body: { status: { nodeInfo: { ...(await read()).status!.nodeInfo!, bootID: "boot-b" } } },
        },
        merge,
      );
    }
  });
});
