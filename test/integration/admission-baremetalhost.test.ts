// Needs real kube-apiserver (+ etcd): metal3's CRD, RBAC and admission as applied to each token.
// Needs the real API server: which BareMetalHost fields fence and recover may write is decided by the metal3 component's RBAC and the shipped admission policies, which only a real kube-apiserver evaluates.
// Issue "least privilege and proofs that cannot be bent", item 3.2: the metal3 component
// (knative/components/metal3/metal3-rbac.yaml) gives fence and recover patch on
// BareMetalHosts, for the reboot.metal3.io/fastfence-<incident> hold. With their own
// ServiceAccount tokens, against metal3's real CRD (third_party/crds/metal3.io) and the
// shipped RBAC and admission policies, each tries what a stolen token would: point
// spec.bmc.address at a listener of its own (the BMC password goes there when the host is
// fenced, and that listener's "Off" is believed), swap spec.bmc.credentialsName, set
// spec.bmc.disableCertificateVerification (a discovered level silently stops checking the
// BMC's certificate), power the host off through spec.online. The hold itself
// (KubeMetal3Api.hold / release, what fence and recover genuinely write) must still pass.
// On 6f7efbe every one of those writes was admitted.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { refusal } from "./refusal.ts";
import { KubeMetal3Api, rebootAnnotationKey, type BareMetalHostLike } from "../../infra/bmc/metal3.ts";
import { Kube } from "../../infra/kube/client.ts";
import { applyObjects, readManifests, shippedAccessControl } from "../../harness/env/apply.ts";
import { ROOT, THIRD_PARTY_CRDS } from "../../harness/env/base.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";

const HOST_NS = "baremetal-operator-system"; // the metal3 component's namespace
const BMH = { group: "metal3.io", version: "v1alpha1", plural: "baremetalhosts" };
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const ADDRESS = "redfish+https://192.0.2.10/redfish/v1/Systems/1";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, [
    ...readManifests(join(THIRD_PARTY_CRDS, "metal3.io")),
    { apiVersion: "v1", kind: "Namespace", metadata: { name: HOST_NS } },
    ...shippedAccessControl(),
    ...readManifests(
      join(ROOT, "knative/components/metal3"),
      (o) => o.kind === "Role" || o.kind === "RoleBinding",
    ),
  ]);
  const custom = kc.makeApiClient(CustomObjectsApi);
  await custom.createNamespacedCustomObject({
    ...BMH,
    namespace: HOST_NS,
    body: {
      apiVersion: "metal3.io/v1alpha1",
      kind: "BareMetalHost",
      metadata: { name: "worker-0" },
      spec: { online: true, bmc: { address: ADDRESS, credentialsName: "worker-0-bmc" } },
    },
  });
  const as = async (serviceAccount: string) =>
    new Kube(await serviceAccountKubeConfig(kc, { namespace: FASTFENCE_NAMESPACE, serviceAccount }), {
      requestTimeoutMs: 5000,
    });
  await sleep(1500); // the policies' type checking and the bindings settle in the apiserver
  return { custom, fence: await as("fastfence-fence"), recover: await as("fastfence-recover") };
});

const host = async () =>
  (await env().custom.getNamespacedCustomObject({
    ...BMH,
    namespace: HOST_NS,
    name: "worker-0",
  })) as BareMetalHostLike & {
    spec: {
      online?: boolean;
      bmc: { address: string; credentialsName: string; disableCertificateVerification?: boolean };
    };
  };

const patchHost = (kube: Kube, body: object) =>
  kube.call("patch baremetalhost", (a) =>
    a.custom.patchNamespacedCustomObject({ ...BMH, namespace: HOST_NS, name: "worker-0", body }, merge),
  );

const forged: { what: string; body: object; stored: () => Promise<boolean> }[] = [
  {
    what: "spec.bmc.address pointed at another listener",
    body: { spec: { bmc: { address: "redfish+https://203.0.113.66/redfish/v1/Systems/1" } } },
    stored: async () => (await host()).spec.bmc.address !== ADDRESS,
  },
  {
    what: "spec.bmc.credentialsName swapped",
    body: { spec: { bmc: { credentialsName: "someone-elses-bmc" } } },
    stored: async () => (await host()).spec.bmc.credentialsName !== "worker-0-bmc",
  },
  {
    what: "spec.bmc.disableCertificateVerification set",
    body: { spec: { bmc: { disableCertificateVerification: true } } },
    stored: async () => (await host()).spec.bmc.disableCertificateVerification === true,
  },
  {
    what: "spec.online turned off",
    body: { spec: { online: false } },
    stored: async () => (await host()).spec.online === false,
  },
  {
    what: "a reboot.metal3.io hold that is not fastfence's",
    body: { metadata: { annotations: { "reboot.metal3.io/someone": "{}" } } },
    stored: async () => (await host()).metadata?.annotations?.["reboot.metal3.io/someone"] !== undefined,
  },
];

describe("what fence and recover may write to a BareMetalHost", () => {
  for (const who of ["fence", "recover"] as const)
    for (const f of forged)
      it(`${who}: ${f.what} is refused (admitted on 6f7efbe)`, async () => {
        const r = await refusal(patchHost(env()[who], f.body));
        expect(r?.status).toBe(403);
        expect(r?.message).toContain(`fastfence-${who} may write only the reboot.metal3.io/fastfence-`);
        expect(await f.stored()).toBe(false);
      });

  it("fence sets the incident's hold and recover clears it (what they genuinely write)", async () => {
    const key = rebootAnnotationKey("nf-worker-0-1");
    await new KubeMetal3Api(env().fence).hold({ namespace: HOST_NS, name: "worker-0" }, "nf-worker-0-1");
    expect((await host()).metadata?.annotations?.[key]).toBe(JSON.stringify({ mode: "hard" }));
    const released = await new KubeMetal3Api(env().recover, { namespaces: [HOST_NS] }).releaseIncident(
      "nf-worker-0-1",
      true,
    );
    expect(released).toEqual([`${HOST_NS}/worker-0`]);
    expect((await host()).metadata?.annotations?.[key]).toBeUndefined();
    expect((await host()).spec.bmc.address).toBe(ADDRESS);
  });
});
