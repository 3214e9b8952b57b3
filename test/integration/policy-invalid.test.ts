// Needs real kube-apiserver (+ etcd): it serves an object stored under a looser CRD unchanged.
// An invalid FencingPolicy is loud and changes nothing (issue 14, item 4), on a real
// kube-apiserver with the shipped CRDs and RBAC, the reader running as the confirm
// ServiceAccount. The shipped CRD refuses most bad specs at apply time, so the test makes
// one that fails only when read the way it happens in a cluster: the object is written
// while a looser CRD is installed (here: spec preserve-unknown-fields, as an older or a
// hand-edited CRD would be) and then the shipped CRD is installed again; the API server
// keeps the stored object as it is and serves it. Then: the previous policy stays in force
// (a storm-guard decision made after the bad edit uses the old limit), the policy's
// `Valid` condition is False with reason InvalidSpec naming the field, one PolicyInvalid
// Event involves it, the metric says 0 and the log names the field; after a fix the
// condition is True again. A process that never read a valid policy still refuses
// (FF_INVALID_CONFIG), never falling back to the defaults.
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  type KubernetesObject,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import type { FastfenceError } from "../../core/errors.ts";
import type { FencingPolicySpecInput } from "../../core/policy.ts";
import { stormGuard } from "../../core/rules.ts";
import { applyObjects, readManifests, shippedAccessControl } from "../../harness/env/apply.ts";
import { ROOT, sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { Kube } from "../../infra/kube/client.ts";
import { PolicyReader } from "../../infra/kube/policy.ts";
import { PolicyStatusReporter, type PolicyCondition } from "../../infra/kube/policy-status.ts";
import { createLogger } from "../../infra/log.ts";
import { createFunctionMetrics } from "../../infra/metrics.ts";
import { waitFor } from "./pipeline-helpers.ts";

const G = { group: "fastfence.io", version: "v1alpha1", plural: "fencingpolicies" };
const CRD = "fencingpolicies.fastfence.io";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  const confirm = await serviceAccountKubeConfig(kc, {
    namespace: FASTFENCE_NAMESPACE,
    serviceAccount: "fastfence-confirm",
  });
  return {
    kc,
    confirm,
    custom: kc.makeApiClient(CustomObjectsApi),
    core: kc.makeApiClient(CoreV1Api),
    ext: kc.makeApiClient(ApiextensionsV1Api),
  };
});

/** A reader as host.ts builds it (no cache, so every get reads), with its log lines and metrics. */
function reader(kc: ReturnType<typeof env>["confirm"], replica: string) {
  const lines: Record<string, unknown>[] = [];
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  const log = createLogger("confirm", { level: "info", destination: dest });
  const metrics = createFunctionMetrics({ defaultMetrics: false });
  const kube = new Kube(kc);
  const r = new PolicyReader(kube, "default", 0, {
    log,
    metrics,
    reporter: new PolicyStatusReporter(kube, { component: "confirm", instance: replica, log }),
  });
  return { r, lines, metrics };
}

async function policyObject(): Promise<{
  metadata: { generation: number; resourceVersion: string };
  spec: unknown;
  status?: { conditions?: PolicyCondition[] };
}> {
  return (await env().custom.getClusterCustomObject({ ...G, name: "default" })) as never;
}

async function writeSpec(spec: FencingPolicySpecInput | Record<string, unknown>): Promise<void> {
  const cur = await policyObject();
  await env().custom.replaceClusterCustomObject({
    ...G,
    name: "default",
    body: {
      apiVersion: "fastfence.io/v1alpha1",
      kind: "FencingPolicy",
      metadata: { name: "default", resourceVersion: cur.metadata.resourceVersion },
      spec,
    },
  });
}

/** Installs `crd` over the current FencingPolicy CRD. */
async function replaceCrd(crd: V1CustomResourceDefinition | KubernetesObject): Promise<void> {
  const cur = await env().ext.readCustomResourceDefinition({ name: CRD });
  const body = structuredClone(crd) as KubernetesObject;
  body.metadata = { ...body.metadata, name: CRD, resourceVersion: cur.metadata!.resourceVersion! };
  await KubernetesObjectApi.makeApiClient(env().kc).replace(body);
}

/** Retries `fn` until the API server's view of the CRD caught up (422 until then). */
async function untilAccepted(what: string, fn: () => Promise<unknown>): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await fn();
      return;
    } catch (err) {
      if ((err as { code?: number }).code !== 422 || Date.now() > deadline)
        throw new Error(`${what}: ${String((err as { body?: unknown }).body ?? err)}`);
      await sleep(200);
    }
  }
}

const condition = async () => (await policyObject()).status?.conditions?.find((c) => c.type === "Valid");
const nodes = Array.from({ length: 10 }, (_, i) => ({
  name: `w${i}`,
  bootId: "b",
  labels: {},
  ready: "True" as const,
}));
const metricLine = async (m: ReturnType<typeof createFunctionMetrics>, name: string) =>
  (await m.registry.getSingleMetricAsString(name)).split("\n").find((l) => l.startsWith(`${name}{`));

describe("an invalid FencingPolicy is loud and the last valid one stays in force", () => {
  it("keeps the previous policy, sets Valid=False with the field, records one Event, metric 0; Valid=True after a fix", async () => {
    const { custom, core, confirm } = env();
    // A valid policy that lets nothing be fenced automatically.
    await custom.createClusterCustomObject({
      ...G,
      body: {
        apiVersion: "fastfence.io/v1alpha1",
        kind: "FencingPolicy",
        metadata: { name: "default" },
        spec: { stormGuard: { maxConcurrentFenced: 0 } },
      },
    });
    const a = reader(confirm, "confirm-a");
    const p1 = await a.r.get(Date.now());
    expect(p1.stormGuard.maxConcurrentFenced).toBe(0);
    await a.r.settled();
    expect(await condition()).toMatchObject({ status: "True", reason: "SpecValid", observedGeneration: 1 });

    // The bad edit: quorum 1 (S2 forbids it) with a looser storm guard, written while a
    // CRD without a spec schema is installed; then the shipped CRD comes back.
    const shipped = readManifests(join(ROOT, "knative/base/crds/fencingpolicy.yaml"))[0]!;
    const loose = structuredClone(
      await env().ext.readCustomResourceDefinition({ name: CRD }),
    ) as V1CustomResourceDefinition;
    loose.spec.versions[0]!.schema!.openAPIV3Schema!.properties!.spec = {
      type: "object",
      x_kubernetes_preserve_unknown_fields: true,
    };
    await replaceCrd(loose);
    const bad = { corroboration: { quorum: 1 }, stormGuard: { maxConcurrentFenced: 5 } };
    await untilAccepted("write the invalid spec under the loose CRD", () => writeSpec(bad));
    await replaceCrd(shipped);
    // The shipped CRD is live again once it refuses the same spec on a new object.
    await waitFor(
      "the shipped CRD refusing quorum 1",
      async () => {
        try {
          await custom.createClusterCustomObject({
            ...G,
            dryRun: "All",
            body: {
              apiVersion: "fastfence.io/v1alpha1",
              kind: "FencingPolicy",
              metadata: { name: "x" },
              spec: bad,
            },
          });
          return undefined;
        } catch (err) {
          return (err as { code?: number }).code === 422 ? true : undefined;
        }
      },
      20_000,
      200,
    );
    expect(((await policyObject()).spec as typeof bad).corroboration.quorum).toBe(1); // stored as written

    // A decision after the bad edit uses the previous policy: the storm guard still blocks.
    const p2 = await a.r.get(Date.now());
    expect(p2.corroboration.quorum).toBe(2);
    expect(p2.stormGuard.maxConcurrentFenced).toBe(0);
    expect(stormGuard("w1", [], nodes, Date.now(), p2)).toMatchObject({ ok: false, reason: "StormGuard" });
    await a.r.settled();

    const c = await condition();
    expect(c).toMatchObject({ status: "False", reason: "InvalidSpec", observedGeneration: 2 });
    expect(c!.message).toContain("spec.corroboration.quorum");
    expect(c!.message).toContain("generation 1");
    // Reading again (other events, another replica) reports nothing new: one Event.
    const b = reader(confirm, "confirm-b");
    await b.r.get(Date.now()).then(
      () => expect.unreachable("a fresh process has no valid policy to keep"),
      (err: FastfenceError) => expect(err.code).toBe("FF_INVALID_CONFIG"),
    );
    await b.r.settled();
    await a.r.get(Date.now());
    await a.r.settled();
    const events = async (reason: string) =>
      (
        await core.listNamespacedEvent({
          namespace: "default",
          fieldSelector: `involvedObject.kind=FencingPolicy,involvedObject.name=default,reason=${reason}`,
        })
      ).items;
    const invalid = await events("PolicyInvalid");
    expect(invalid).toHaveLength(1);
    expect(invalid[0]).toMatchObject({ type: "Warning", reportingComponent: "fastfence.io/confirm" });
    expect(invalid[0]!.message).toContain("spec.corroboration.quorum");
    expect(await metricLine(a.metrics, "fastfence_policy_valid")).toBe(
      'fastfence_policy_valid{policy="default"} 0',
    );
    expect(await metricLine(a.metrics, "fastfence_policy_invalid_total")).toBe(
      'fastfence_policy_invalid_total{policy="default"} 1',
    );
    const errors = a.lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ policy: "default", generation: 2, inForceGeneration: 1 });
    expect(String(errors[0]!.issues)).toContain("spec.corroboration.quorum");

    // The fix takes effect, and the condition says so.
    await writeSpec({ stormGuard: { maxConcurrentFenced: 5 } });
    const p3 = await a.r.get(Date.now());
    expect(p3.stormGuard.maxConcurrentFenced).toBe(5);
    expect(stormGuard("w1", [], nodes, Date.now(), p3)).toEqual({ ok: true });
    await a.r.settled();
    expect(await condition()).toMatchObject({ status: "True", reason: "SpecValid", observedGeneration: 3 });
    expect(await events("PolicyValid")).toHaveLength(1);
    expect(await metricLine(a.metrics, "fastfence_policy_valid")).toBe(
      'fastfence_policy_valid{policy="default"} 1',
    );
  });
});
