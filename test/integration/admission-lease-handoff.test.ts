// Needs real kube-apiserver (+ etcd): hand-off RBAC, admission policies, guarded Lease writes.
// Leader hand-off (issue 46): after a proven power-off fence releases the Leases that the
// fenced node's processes held (infra/kube/lease-handoff.ts), and the API server, under the
// shipped RBAC and knative/base/admission/lease-handoff-policy.yaml, refuses that write to
// every other identity, for a holder on a live node, for a node not listed as fenced, and
// for anything but client-go's release. Here, on a real API server: a Lease held from a node
// without a fenced incident is never touched; another stage's identity and fence's writes for
// other Leases are refused with the policy's message; a Lease its holder renews between
// fence's read and write is not taken (409, read again, judged again); a `<node>_<uuid>`
// holder and a pod holder on the fenced node are released, with an Event; and the
// controller manager's own renewals pass, even with the fenced-nodes list gone; and after the
// policies and the list are removed and installed again (an uninstall and a reinstall), the
// hand-off is judged against the new list, not a cached old one (kubernetes/kubernetes#130887
// froze the cache of a ConfigMap param: why the param is a FencedNodeSet).
import {
  AdmissionregistrationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  type V1Lease,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { refusal } from "./refusal.ts";
import {
  FENCED_NODES,
  fencedNodeEntry,
  type FencedNodeEntry,
  HANDOFF_HOLDER_ANNOTATION,
  HANDOFF_INCIDENT_ANNOTATION,
  HANDOFF_NODE_ANNOTATION,
  type HandoffPlan,
} from "../../core/lease-handoff.ts";
import { DEFAULT_HANDOFF_LEASES } from "../../core/policy-lease-handoff.ts";
import { Kube, type KubeApis } from "../../infra/kube/client.ts";
import { LeaseHandoff } from "../../infra/kube/lease-handoff.ts";
import { MicroTime } from "../../infra/kube/lease.ts";
import { createLogger } from "../../infra/log.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";

const KS = "kube-system";
const KV = "kubevirt";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...shippedAccessControl(),
    { apiVersion: "v1", kind: "Namespace", metadata: { name: KV } },
    ...["node-a", "node-b", "node-c"].map((name) => ({ apiVersion: "v1", kind: "Node", metadata: { name } })),
  ] as Parameters<typeof applyObjects>[1]);
  const sa = (serviceAccount: string) => serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount });
  const fence = await sa("fastfence-fence");
  const remediate = await sa("fastfence-remediate-workloads");
  const kcmPath = await cp.makeUserKubeconfig("system:kube-controller-manager");
  const kcm = new KubeConfig(); // client cert of the controller manager's user (bootstrap RBAC)
  kcm.loadFromFile(kcmPath);
  await sleep(1500); // the policies' type checking and bindings settle in the apiserver
  return { kc, fence, remediate, kcm };
});

const log = createLogger("fence", { level: process.env.FASTFENCE_TEST_LOG ?? "warn" });
/** Epoch ms of a Lease time (the client gives a Date or the wire's string). */
const at = (v: unknown) => (v instanceof Date ? v.getTime() : Date.parse(String(v)));
const coord = (kc: KubeConfig) => kc.makeApiClient(CoordinationV1Api);
const read = (name: string, namespace = KS) => coord(env().kc).readNamespacedLease({ name, namespace });

/** A held Lease, as its holder's client-go would have written it, last renewed `agoMs` ago. */
async function held(name: string, holder: string, agoMs: number, namespace = KS): Promise<V1Lease> {
  const at = new MicroTime(Date.now() - agoMs);
  const body: V1Lease = {
    metadata: { name, namespace },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: 15,
      acquireTime: at,
      renewTime: at,
      leaseTransitions: 2,
    },
  };
  await coord(env().kc)
    .deleteNamespacedLease({ name, namespace })
    .catch(() => undefined);
  return coord(env().kc).createNamespacedLease({ namespace, body });
}

function plan(node: string, incident: string, provenAgoMs = 1000): HandoffPlan {
  return {
    node,
    incident,
    provenAt: new Date(Date.now() - provenAgoMs).toISOString(),
    leases: DEFAULT_HANDOFF_LEASES,
  };
}

/** The fenced-nodes FencedNodeSet as the install ships it (empty). */
const fencedNodeSet = () => shippedAccessControl().find((o) => o.kind === FENCED_NODES.kind)!;
const setRef = { group: FENCED_NODES.group, version: FENCED_NODES.version, plural: FENCED_NODES.plural };
type FencedNodeSet = KubernetesObject & { spec?: { nodes?: Record<string, FencedNodeEntry> } };
const readSet = (kc = env().kc) =>
  kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
    ...setRef,
    namespace: NS,
    name: FENCED_NODES.name,
  }) as Promise<FencedNodeSet>;

/**
 * Lists `node` as fenced by `incident` (power-off proven `agoMs` ago), as fence does, so the
 * fenced-nodes rule passes a release of a Lease renewed before that and a case sees only the
 * rule it tests refuse (when two policies refuse, the API server names one of them).
 */
async function listFenced(node: string, incident: string, agoMs = 1000): Promise<void> {
  const set = await readSet(env().fence);
  const entry = fencedNodeEntry(incident, new Date(Date.now() - agoMs).toISOString());
  await env()
    .fence.makeApiClient(CustomObjectsApi)
    .replaceNamespacedCustomObject({
      ...setRef,
      namespace: NS,
      name: FENCED_NODES.name,
      body: { ...set, spec: { ...set.spec, nodes: { ...set.spec?.nodes, [node]: entry } } },
    });
  await sleep(1000); // the policy's param informer sees it
}

const handoff = (kube = new Kube(env().fence, { requestTimeoutMs: 5000 })) =>
  new LeaseHandoff(kube, { namespace: NS, log, component: "fence", instance: "fence-test" });

/** The release fence would write for `plan` on the Lease as read (what the policy must judge). */
function releaseBody(l: V1Lease, node: string, incident: string): V1Lease {
  const now = new MicroTime(Date.now());
  const spec = { ...l.spec, leaseDurationSeconds: 1, acquireTime: now, renewTime: now };
  delete spec.holderIdentity;
  return {
    ...l,
    metadata: {
      ...l.metadata,
      annotations: {
        [HANDOFF_NODE_ANNOTATION]: node,
        [HANDOFF_INCIDENT_ANNOTATION]: incident,
        [HANDOFF_HOLDER_ANNOTATION]: l.spec?.holderIdentity ?? "",
      },
    },
    spec,
  };
}

const replace = (kc: KubeConfig, body: V1Lease) =>
  coord(kc).replaceNamespacedLease({
    name: body.metadata!.name!,
    namespace: body.metadata!.namespace!,
    body,
  });

async function handedOffEvents(incident: string): Promise<string[]> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const evs = await env().kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: NS });
    const msgs = evs.items
      .filter((e) => e.reason === "LeaseHandedOff" && e.involvedObject.name === incident)
      .map((e) => e.message ?? "");
    if (msgs.length || Date.now() > deadline) return msgs;
    await sleep(100);
  }
}

describe("leader hand-off on the real API server", () => {
  it("releases a <node>_<uuid> holder on the fenced node as client-go does, with an Event", async () => {
    const before = await held("kube-controller-manager", "node-a_0b6f2c1e-1111-4c1a-9a55-000000000001", 5000);
    const rs = await handoff().handOff(plan("node-a", "nf-node-a-1"));
    expect(rs).toContainEqual(
      expect.objectContaining({ name: "kube-controller-manager", outcome: "released" }),
    );
    const after = await read("kube-controller-manager");
    expect(after.spec?.holderIdentity ?? "").toBe("");
    expect(after.spec?.leaseDurationSeconds).toBe(1);
    expect(after.spec?.leaseTransitions).toBe(2);
    expect(at(after.spec?.renewTime)).toBe(at(after.spec?.acquireTime));
    expect(at(after.spec?.renewTime)).toBeGreaterThan(at(before.spec?.renewTime)); // never backdated
    expect(after.metadata?.annotations?.[HANDOFF_NODE_ANNOTATION]).toBe("node-a");
    expect((await readSet()).spec?.nodes?.["node-a"]?.incident).toBe("nf-node-a-1");
    expect((await handedOffEvents("nf-node-a-1")).join("\n")).toContain(
      "kube-system/kube-controller-manager",
    );
  });

  it("releases a pod holder whose pod runs on the fenced node, and no other", async () => {
    const core = env().kc.makeApiClient(CoreV1Api);
    for (const [name, nodeName] of [
      ["virt-controller-7d9f-aaaaa", "node-a"],
      ["virt-operator-5c4b-bbbbb", "node-b"],
    ])
      await core.createNamespacedPod({
        namespace: KV,
        body: {
          metadata: { name },
          spec: { nodeName, containers: [{ name: "c", image: "registry.invalid/x:none" }] },
        },
      });
    await held("virt-controller", "virt-controller-7d9f-aaaaa", 5000, KV);
    const other = await held("virt-operator", "virt-operator-5c4b-bbbbb", 5000, KV);
    const rs = await handoff().handOff(plan("node-a", "nf-node-a-2"));
    expect(rs).toContainEqual(expect.objectContaining({ name: "virt-controller", outcome: "released" }));
    expect(rs).toContainEqual(
      expect.objectContaining({ name: "virt-operator", outcome: "skipped", code: "OtherNode" }),
    );
    expect((await read("virt-controller", KV)).spec?.holderIdentity ?? "").toBe("");
    expect((await read("virt-operator", KV)).metadata?.resourceVersion).toBe(other.metadata?.resourceVersion);
  });

  it("never touches a Lease held from a node without a fenced incident", async () => {
    const l = await held("kube-scheduler", "node-b_0b6f2c1e-2222-4c1a-9a55-000000000002", 5000);
    const rs = await handoff().handOff(plan("node-a", "nf-node-a-3"));
    expect(rs).toContainEqual(
      expect.objectContaining({ name: "kube-scheduler", outcome: "skipped", code: "OtherNode" }),
    );
    expect((await read("kube-scheduler")).metadata?.resourceVersion).toBe(l.metadata?.resourceVersion);
  });

  it("refuses fence's release of a holder on another node than the one it names", async () => {
    await listFenced("node-a", "nf-node-a-1");
    const l = await held("kube-scheduler", "node-b_0b6f2c1e-3333-4c1a-9a55-000000000003", 5000);
    const r = await refusal(replace(env().fence, releaseBody(l, "node-a", "nf-node-a-1")));
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("for a holder on the fenced node it names");
    expect((await read("kube-scheduler")).spec?.holderIdentity).toBe(l.spec?.holderIdentity);
  });

  it("refuses fence's release for a node not listed as fenced (a live node)", async () => {
    const l = await held("kube-scheduler", "node-c_0b6f2c1e-4444-4c1a-9a55-000000000004", 5000);
    const r = await refusal(replace(env().fence, releaseBody(l, "node-c", "nf-node-c-1")));
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("when node node-c is listed as fenced by incident nf-node-c-1");
    expect((await read("kube-scheduler")).spec?.holderIdentity).toBe(l.spec?.holderIdentity);
  });

  it("refuses fence's release of a Lease renewed after the power-off was proven", async () => {
    await handoff().handOff(plan("node-a", "nf-node-a-4", 60_000)); // node-a listed, proven a minute ago
    const l = await held("kube-scheduler", "node-a_0b6f2c1e-5555-4c1a-9a55-000000000005", 1000);
    const r = await refusal(replace(env().fence, releaseBody(l, "node-a", "nf-node-a-4")));
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("last renewed before that power-off was proven");
  });

  it("refuses fence anything but the release: taking the Lease for itself", async () => {
    await listFenced("node-a", "nf-node-a-4");
    const l = await held("kube-scheduler", "node-a_0b6f2c1e-6666-4c1a-9a55-000000000006", 5000);
    const body = releaseBody(l, "node-a", "nf-node-a-4");
    body.spec = { ...body.spec, holderIdentity: "fence-0" };
    const r = await refusal(replace(env().fence, body));
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("fence may only release Lease kube-system/kube-scheduler as client-go does");
  });

  it("refuses the hand-off write to another stage's identity", async () => {
    const l = await held("kube-controller-manager", "node-a_0b6f2c1e-7777-4c1a-9a55-000000000007", 5000);
    const r = await refusal(replace(env().remediate, releaseBody(l, "node-a", "nf-node-a-1")));
    expect(r?.status).toBe(403);
    expect((await read("kube-controller-manager")).spec?.holderIdentity).toBe(l.spec?.holderIdentity);
  });

  it("does not take a Lease its holder renews between fence's read and write (guard)", async () => {
    const holder = "node-a_0b6f2c1e-8888-4c1a-9a55-000000000008";
    await held("kube-controller-manager", holder, 5000);
    let renewed: V1Lease | undefined;
    // The holder renews right before fence's write: a real renewal on the real API server.
    class RenewFirst extends Kube {
      override async call<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
        if (what.startsWith("release lease kube-system/kube-controller-manager") && !renewed) {
          const cur = await read("kube-controller-manager");
          renewed = await replace(env().kc, {
            ...cur,
            spec: { ...cur.spec, renewTime: new MicroTime(Date.now()) },
          });
        }
        return super.call(what, fn);
      }
    }
    const rs = await handoff(new RenewFirst(env().fence, { requestTimeoutMs: 5000 })).handOff(
      plan("node-a", "nf-node-a-5"),
    );
    expect(renewed).toBeDefined();
    expect(rs).toContainEqual(
      expect.objectContaining({
        name: "kube-controller-manager",
        outcome: "skipped",
        code: "RenewedAfterProof",
      }),
    );
    const after = await read("kube-controller-manager");
    expect(after.spec?.holderIdentity).toBe(holder);
    expect(after.metadata?.resourceVersion).toBe(renewed!.metadata?.resourceVersion);
  });

  it("leaves the controller manager's own leader election alone, even without the fenced-nodes list", async () => {
    const l = await held("kube-controller-manager", "node-b_0b6f2c1e-9999-4c1a-9a55-000000000009", 1000);
    const renew = async () => {
      const cur = await coord(env().kcm).readNamespacedLease({
        name: "kube-controller-manager",
        namespace: KS,
      });
      return replace(env().kcm, { ...cur, spec: { ...cur.spec, renewTime: new MicroTime(Date.now()) } });
    };
    expect((await renew()).spec?.holderIdentity).toBe(l.spec?.holderIdentity);
    await env()
      .kc.makeApiClient(CustomObjectsApi)
      .deleteNamespacedCustomObject({ ...setRef, namespace: NS, name: FENCED_NODES.name });
    try {
      await sleep(500);
      expect((await renew()).spec?.holderIdentity).toBe(l.spec?.holderIdentity);
    } finally {
      // Back as the install ships it (empty), for the cases after this one in a shuffled
      // order: hand-offs record their node in it, and the policy reads it.
      await applyObjects(env().kc, [fencedNodeSet()]);
      await sleep(1000);
    }
  });

  it("judges against the list as it is after the policies are removed and installed again", async () => {
    const adm = env().kc.makeApiClient(AdmissionregistrationV1Api);
    const custom = env().kc.makeApiClient(CustomObjectsApi);
    await listFenced("node-a", "nf-node-a-6"); // in the list the API server may have cached
    const installed = shippedAccessControl().filter(
      (o) =>
        o.kind === FENCED_NODES.kind ||
        (o.kind?.startsWith("ValidatingAdmissionPolicy") && o.metadata?.name?.includes("fenced")),
    );
    // Uninstall: every binding of the param kind, the policies, then the list.
    for (const o of installed.filter((o) => o.kind === "ValidatingAdmissionPolicyBinding"))
      await adm.deleteValidatingAdmissionPolicyBinding({ name: o.metadata!.name! });
    for (const o of installed.filter((o) => o.kind === "ValidatingAdmissionPolicy"))
      await adm.deleteValidatingAdmissionPolicy({ name: o.metadata!.name! });
    await sleep(2500); // the API server's policy source drops the param kind (it ticks each second)
    await custom.deleteNamespacedCustomObject({ ...setRef, namespace: NS, name: FENCED_NODES.name });
    // Install again, as shipped: the list empty, the policies and bindings.
    await applyObjects(env().kc, [
      ...installed.filter((o) => o.kind === FENCED_NODES.kind),
      ...installed.filter((o) => o.kind === "ValidatingAdmissionPolicy"),
      ...installed.filter((o) => o.kind === "ValidatingAdmissionPolicyBinding"),
    ]);
    await sleep(1500);
    // A release for the incident listed before the uninstall is refused: the new list is empty.
    const old = await held("kube-scheduler", "node-a_0b6f2c1e-aaaa-4c1a-9a55-00000000000a", 5000);
    const r = await refusal(replace(env().fence, releaseBody(old, "node-a", "nf-node-a-6")));
    expect(r?.status).toBe(403);
    expect(r?.message).toContain("when node node-a is listed as fenced by incident nf-node-a-6");
    // And fence's hand-off for a new incident, listed in the new list, goes through.
    await held("kube-controller-manager", "node-a_0b6f2c1e-bbbb-4c1a-9a55-00000000000b", 5000);
    const rs = await handoff().handOff(plan("node-a", "nf-node-a-7"));
    expect(rs).toContainEqual(
      expect.objectContaining({ name: "kube-controller-manager", outcome: "released" }),
    );
    expect((await readSet()).spec?.nodes?.["node-a"]?.incident).toBe("nf-node-a-7");
  });
});
