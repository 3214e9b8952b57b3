// Needs real kube-apiserver (+ etcd): upstream NHC/MHC CRDs and typed 403s from RBAC.
// Living beside other remediators (issue 15, item 4), on a real kube-apiserver with the
// upstream NodeHealthCheck, MachineHealthCheck and Machine CRDs (third_party/crds) and
// fastfence's shipped RBAC (base, plus the openshift overlay's Role in
// openshift-machine-api), reading as the confirm and fence ServiceAccounts. Before the CRDs
// are installed there is no remediator and no error; an identity without the grant then
// gets a typed 403, never "none". An NHC that selects node-b with Self Node Remediation is
// a conflict on node-b only, and the FencingPolicy says so (RemediatorConflict=True naming
// it, one Warning Event); an NHC whose template is fastfence.io's is not; deleting the
// conflicting NHC turns the condition False. An MHC conflicts through the Machine whose
// status.nodeRef names the node.
import { CoreV1Api, CustomObjectsApi, type CoreV1Event } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { conflictMessage } from "../../core/remediators.ts";
import { applyObjects, readManifests, shippedAccessControl } from "../../harness/env/apply.ts";
import { ROOT, THIRD_PARTY_CRDS } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { Kube, KubeApiError } from "../../infra/kube/client.ts";
import { PolicyReader } from "../../infra/kube/policy.ts";
import { PolicyStatusReporter, type PolicyCondition } from "../../infra/kube/policy-status.ts";
import { RemediatorConflictReporter } from "../../infra/kube/remediator-status.ts";
import { MHC_API, MACHINE_API, NHC_API, RemediatorReader } from "../../infra/kube/remediators.ts";

const MAPI = "openshift-machine-api";
const FP = { group: "fastfence.io", version: "v1alpha1", plural: "fencingpolicies" };
const NODES = [
  { name: "node-a", labels: { pool: "a" } },
  { name: "node-b", labels: { pool: "b" } },
  { name: "node-c", labels: { pool: "c" } },
];
const SNR = {
  apiVersion: "self-node-remediation.medik8s.io/v1alpha1",
  kind: "SelfNodeRemediationTemplate",
  name: "self-node-remediation-automatic-strategy-template",
  namespace: "openshift-workload-availability",
};

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...shippedAccessControl(),
    { apiVersion: "v1", kind: "Namespace", metadata: { name: MAPI } },
    ...readManifests(join(ROOT, "knative/overlays/openshift/remediators-rbac.yaml")),
  ]);
  const core = kc.makeApiClient(CoreV1Api);
  for (const n of NODES) await core.createNode({ body: { metadata: { name: n.name, labels: n.labels } } });
  const as = (serviceAccount: string) =>
    serviceAccountKubeConfig(kc, { namespace: FASTFENCE_NAMESPACE, serviceAccount });
  return {
    kc,
    core,
    custom: kc.makeApiClient(CustomObjectsApi),
    confirm: new Kube(await as("fastfence-confirm")),
    fence: new Kube(await as("fastfence-fence")),
    detect: new Kube(await as("fastfence-detect")),
  };
});

async function installRemediatorCrds(): Promise<void> {
  await applyObjects(env().kc, [
    ...readManifests(join(THIRD_PARTY_CRDS, "remediation.medik8s.io")),
    ...readManifests(join(THIRD_PARTY_CRDS, "machine.openshift.io")),
  ]);
}

async function createNhc(name: string, pool: string, template: object): Promise<void> {
  await env().custom.createClusterCustomObject({
    ...NHC_API,
    body: {
      apiVersion: "remediation.medik8s.io/v1alpha1",
      kind: "NodeHealthCheck",
      metadata: { name },
      spec: { selector: { matchLabels: { pool } }, remediationTemplate: template, minHealthy: "51%" },
    },
  });
}

const policy = async () =>
  (await env().custom.getClusterCustomObject({ ...FP, name: "default" })) as {
    metadata: { generation: number; resourceVersion: string };
    status?: { conditions?: PolicyCondition[] };
  };
const condition = async (type: string) => (await policy()).status?.conditions?.find((c) => c.type === type);
const events = async (reason: string): Promise<CoreV1Event[]> =>
  (
    await env().core.listNamespacedEvent({
      namespace: "default",
      fieldSelector: `involvedObject.kind=FencingPolicy,involvedObject.name=default,reason=${reason}`,
    })
  ).items;

const REFUSES = "fastfence refuses nodes another remediator selects, and says so on the FencingPolicy";
// One story in steps, in the order written also under --sequence.shuffle: no remediator CRDs,
// then installed; an NHC's conflict reported and resolved on the FencingPolicy the second
// case creates; then an MHC's (its Event the second of the file).
describe(REFUSES, { shuffle: false }, () => {
  it("without the CRDs there is no remediator and no error; with them, a missing grant is a typed 403", async () => {
    const { confirm, detect } = env();
    const empty = { remediators: [], machinesByNode: {} };
    expect(await new RemediatorReader(confirm, { ttlMs: 0 }).snapshot(Date.now())).toEqual(empty);
    // detect has no grant at all: discovery, not the list's 403, says the APIs are absent.
    expect(await new RemediatorReader(detect, { ttlMs: 0 }).snapshot(Date.now())).toEqual(empty);

    await installRemediatorCrds();
    const err = await new RemediatorReader(detect, { ttlMs: 0 })
      .snapshot(Date.now())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).status).toBe(403);
    expect(await new RemediatorReader(confirm, { ttlMs: 0 }).snapshot(Date.now())).toEqual(empty);
  });

  it("an NHC with Self Node Remediation on node-b: conflict on node-b only, condition True naming it, False once it is deleted", async () => {
    const { custom, confirm, fence } = env();
    await custom.createClusterCustomObject({
      ...FP,
      body: {
        apiVersion: "fastfence.io/v1alpha1",
        kind: "FencingPolicy",
        metadata: { name: "default" },
        spec: {},
      },
    });
    const reader = new RemediatorReader(confirm, { ttlMs: 0 });
    const reporter = new RemediatorConflictReporter(confirm, { component: "confirm", instance: "confirm-a" });
    expect(await reporter.report(await reader.selections(NODES, Date.now()), Date.now())).toBe("written");
    expect(await condition("RemediatorConflict")).toMatchObject({ status: "False", reason: "NoConflict" });
    const beforeConflict = await policy(); // for the stale write below

    const cached = new RemediatorReader(confirm); // default TTL: 5 s
    const t0 = Date.now();
    expect(await cached.conflictsFor(NODES[1]!, t0)).toEqual([]);
    await createNhc("nhc-workers", "b", SNR);
    await createNhc("fastfence-a", "a", {
      apiVersion: "fastfence.io/v1alpha1",
      kind: "FastfenceRemediationTemplate",
      name: "fastfence",
      namespace: FASTFENCE_NAMESPACE,
    });
    expect(await cached.conflictsFor(NODES[1]!, t0 + 4000)).toEqual([]); // still the cached read
    expect(await cached.conflictsFor(NODES[1]!, t0 + 5000)).toHaveLength(1);

    const onB = await reader.conflictsFor(NODES[1]!, Date.now());
    expect(onB).toEqual([
      {
        kind: "NodeHealthCheck",
        name: "nhc-workers",
        remediation: "SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template",
        state: "active",
      },
    ]);
    expect(conflictMessage("node-b", onB)).toBe(
      "NodeHealthCheck/nhc-workers (remediation SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template) selects node-b",
    );
    expect(await reader.conflictsFor(NODES[0]!, Date.now())).toEqual([]); // fastfence's own template
    expect(
      await new RemediatorReader(fence, { ttlMs: 0, pageSize: 1 }).conflictsFor(NODES[1]!, Date.now()),
    ).toEqual(onB);

    const selections = await reader.selections(NODES, Date.now());
    expect(await reporter.report(selections, Date.now())).toBe("written");
    const c = await condition("RemediatorConflict");
    expect(c).toMatchObject({ status: "True", reason: "OtherRemediatorSelectsNodes" });
    expect(c!.message).toContain(
      "NodeHealthCheck/nhc-workers (remediation SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template) selects node-b",
    );
    expect(c!.message).not.toContain("fastfence-a");
    const warnings = await events("RemediatorConflict");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ type: "Warning", reportingComponent: "fastfence.io/confirm" });
    expect(warnings[0]!.message).toContain("NodeHealthCheck/nhc-workers");

    // Another replica sees the same: nothing to write, no second Event. A write based on
    // a stale read (one that still says NoConflict) loses to the resourceVersion guard.
    const other = new RemediatorConflictReporter(fence, { component: "fence", instance: "fence-a" });
    expect(await other.report(selections, Date.now())).toBe("unchanged");
    expect(await other.report(selections, Date.now(), beforeConflict as never)).toBe("lost-race");
    expect((await condition("RemediatorConflict"))!.status).toBe("True");
    expect(await events("RemediatorConflict")).toHaveLength(1);

    // The Valid condition is written beside it and neither overwrites the other.
    const valid = new PolicyReader(confirm, "default", 0, {
      reporter: new PolicyStatusReporter(confirm, { component: "confirm", instance: "confirm-a" }),
    });
    await valid.get(Date.now());
    await valid.settled();
    expect(await condition("Valid")).toMatchObject({ status: "True", reason: "SpecValid" });
    expect(await reporter.report(selections, Date.now())).toBe("unchanged");

    await custom.deleteClusterCustomObject({ ...NHC_API, name: "nhc-workers" });
    expect(await reader.conflictsFor(NODES[1]!, Date.now())).toEqual([]);
    expect(await reporter.report(await reader.selections(NODES, Date.now()), Date.now())).toBe("written");
    expect(await condition("RemediatorConflict")).toMatchObject({ status: "False", reason: "NoConflict" });
    expect(await events("RemediatorConflictResolved")).toHaveLength(1);
    expect(await condition("Valid")).toMatchObject({ status: "True" });
  });

  it("an MHC in openshift-machine-api conflicts on the node its Machine names; one elsewhere is not read", async () => {
    const { custom, confirm, fence } = env();
    await env().core.createNamespace({ body: { metadata: { name: "elsewhere" } } });
    const machine = async (namespace: string, name: string, node: string) => {
      await custom.createNamespacedCustomObject({
        ...MACHINE_API,
        namespace,
        body: {
          apiVersion: "machine.openshift.io/v1beta1",
          kind: "Machine",
          metadata: {
            name,
            namespace,
            labels: { "machine.openshift.io/cluster-api-machine-role": "worker" },
          },
          spec: {},
        },
      });
      const m = (await custom.getNamespacedCustomObject({ ...MACHINE_API, namespace, name })) as object;
      await custom.replaceNamespacedCustomObjectStatus({
        ...MACHINE_API,
        namespace,
        name,
        body: { ...m, status: { nodeRef: { kind: "Node", name: node } } },
      });
    };
    const mhc = (namespace: string, selector: object) =>
      custom.createNamespacedCustomObject({
        ...MHC_API,
        namespace,
        body: {
          apiVersion: "machine.openshift.io/v1beta1",
          kind: "MachineHealthCheck",
          metadata: { name: "workers", namespace },
          spec: { selector },
        },
      });
    await machine(MAPI, "m-c", "node-c");
    await mhc(MAPI, { matchLabels: { "machine.openshift.io/cluster-api-machine-role": "worker" } });
    await machine("elsewhere", "m-a", "node-a");
    await mhc("elsewhere", {});

    for (const kube of [confirm, fence]) {
      const reader = new RemediatorReader(kube, { ttlMs: 0 });
      expect(await reader.conflictsFor(NODES[2]!, Date.now())).toEqual([
        {
          kind: "MachineHealthCheck",
          name: "workers",
          namespace: MAPI,
          remediation: "machine deletion",
          state: "active",
          machine: `${MAPI}/m-c`,
        },
      ]);
      expect(await reader.conflictsFor(NODES[0]!, Date.now())).toEqual([]);
    }
    const reporter = new RemediatorConflictReporter(confirm, { component: "confirm", instance: "confirm-a" });
    const selections = await new RemediatorReader(confirm, { ttlMs: 0 }).selections(NODES, Date.now());
    expect(await reporter.report(selections, Date.now())).toBe("written");
    expect((await condition("RemediatorConflict"))!.message).toContain(
      `MachineHealthCheck/${MAPI}/workers (remediation machine deletion) selects node-c`,
    );
    expect(await events("RemediatorConflict")).toHaveLength(2);
  });
});
