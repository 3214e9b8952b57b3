// Needs real kube-apiserver (+ etcd): resourceVersion 409s and admission on the ledger Lease.
// The admission ledger on a real kube-apiserver with the manifests' RBAC and admission
// policies (knative/base/rbac, knative/base/admission): the shipped Lease is there empty;
// confirm's identity writes it through the product's adapter (infra/kube/admission-ledger.ts),
// guarded by resourceVersion — a write on a copy that is no longer current, and a second
// create, are 409s that change nothing; fence's identity (which may update every Lease of
// the namespace through RBAC) and the admin cannot change the ledger — they may only create
// the Lease empty and update its other fields (re-applying the manifests); a ledger confirm
// cannot parse is an error that names it, never an empty ledger.
import { CoordinationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { beforeEach, describe, expect, it } from "vitest";
import { ADMISSION_LEDGER_ANNOTATION, ADMISSION_LEDGER_LEASE } from "../../core/admission-ledger.ts";
import type { AdmittedEntry } from "../../core/decision.ts";
import { FastfenceError } from "../../core/errors.ts";
import { readLedger, writeLedger } from "../../infra/kube/admission-ledger.ts";
import { Kube, KubeApiError } from "../../infra/kube/client.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  const as = async (stage: string) =>
    serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount: `fastfence-${stage}` });
  const ids = { admin: kc, confirm: await as("confirm"), fence: await as("fence") };
  await sleep(1500); // the policies' type checking and bindings settle in the apiserver
  return ids;
});

const kube = (k: KubeConfig) => new Kube(k, { requestTimeoutMs: 5000 });
const T = "2026-12-01T00:00:00.000Z";
const entry = (node: string) => ({ node, at: T });

async function failure(p: Promise<unknown>): Promise<KubeApiError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof KubeApiError) return err;
    throw err;
  }
  throw new Error("the write was admitted");
}

/** Writes the ledger's annotation as `k` with the plain client (no product code involved). */
async function rawWrite(k: KubeConfig, value: string) {
  const api = k.makeApiClient(CoordinationV1Api);
  const cur = await api.readNamespacedLease({ name: ADMISSION_LEDGER_LEASE, namespace: NS });
  await api.replaceNamespacedLease({
    name: ADMISSION_LEDGER_LEASE,
    namespace: NS,
    body: { ...cur, metadata: { ...cur.metadata, annotations: { [ADMISSION_LEDGER_ANNOTATION]: value } } },
  });
}

/** The shipped Lease as the manifests have it (empty: no ledger annotation). */
const shippedLedger = () =>
  shippedAccessControl().filter((o) => o.kind === "Lease" && o.metadata?.name === ADMISSION_LEDGER_LEASE);

describe("the admission ledger (real API server, shipped RBAC and admission policies)", () => {
  // Each case starts from the Lease as shipped (the cases run in any order): the admin
  // deletes whatever an earlier case left and applies the shipped Lease again.
  beforeEach(async () => {
    const admin = env().admin.makeApiClient(CoordinationV1Api);
    await admin
      .deleteNamespacedLease({ name: ADMISSION_LEDGER_LEASE, namespace: NS })
      .catch((err: unknown) => {
        if ((err as { code?: number }).code !== 404) throw err;
      });
    const shipped = shippedLedger();
    expect(shipped).toHaveLength(1);
    await applyObjects(env().admin, shipped);
  });

  it("ships empty; confirm writes it guarded by resourceVersion; a stale write and a second create are 409s", async () => {
    const confirm = kube(env().confirm);
    const shipped = await readLedger(confirm, NS);
    expect(shipped.admitted).toEqual({});
    expect(shipped.resourceVersion).toBeTruthy();

    await writeLedger(confirm, NS, shipped.resourceVersion, { "node-a-1": entry("node-a") });
    const after = await readLedger(confirm, NS);
    expect(after.admitted).toEqual({ "node-a-1": entry("node-a") });

    // A confirmer that decided on the shipped copy loses, and nothing changes.
    const stale = await failure(
      writeLedger(confirm, NS, shipped.resourceVersion, { "node-b-1": entry("node-b") }),
    );
    expect(stale.status).toBe(409);
    expect((await readLedger(confirm, NS)).admitted).toEqual({ "node-a-1": entry("node-a") });

    // A confirmer whose view had no ledger tries to create one: AlreadyExists (409) under
    // the admin's RBAC, and confirm itself may not create Leases at all (403).
    const asAdmin = await failure(writeLedger(kube(env().admin), NS, undefined, {}));
    expect(asAdmin.status).toBe(409);
    const create = await failure(writeLedger(confirm, NS, undefined, { "node-b-1": entry("node-b") }));
    expect(create.status).toBe(403);
    expect((await readLedger(confirm, NS)).admitted).toEqual({ "node-a-1": entry("node-a") });
  });

  it("fence (RBAC update on every Lease of the namespace) and the admin cannot change the ledger", async () => {
    // confirm has admitted one incident: the ledger fence and the admin then try to change
    const confirm = kube(env().confirm);
    const shipped = await readLedger(confirm, NS);
    await writeLedger(confirm, NS, shipped.resourceVersion, { "node-a-1": entry("node-a") });
    for (const who of ["fence", "admin"] as const) {
      const k = kube(env()[who]);
      const cur = await readLedger(k, NS);
      const ledgers: Record<string, AdmittedEntry>[] = [{}, { "node-z-1": entry("node-z") }];
      for (const admitted of ledgers) {
        const err = await failure(writeLedger(k, NS, cur.resourceVersion, admitted));
        expect(err.status, who).toBe(403);
        expect(err.message).toMatch(/may only be changed by confirm/);
      }
    }
    // Re-applying the manifests (another field, the ledger left as it is) is allowed.
    const admin = env().admin.makeApiClient(CoordinationV1Api);
    const cur = await admin.readNamespacedLease({ name: ADMISSION_LEDGER_LEASE, namespace: NS });
    await admin.replaceNamespacedLease({
      name: ADMISSION_LEDGER_LEASE,
      namespace: NS,
      body: { ...cur, metadata: { ...cur.metadata, labels: { ...cur.metadata?.labels, reapplied: "yes" } } },
    });
    expect((await readLedger(kube(env().confirm), NS)).admitted).toEqual({ "node-a-1": entry("node-a") });
  });

  it("a deleted ledger may be created again empty, by anyone allowed to create Leases, not with entries", async () => {
    const admin = env().admin.makeApiClient(CoordinationV1Api);
    await admin.deleteNamespacedLease({ name: ADMISSION_LEDGER_LEASE, namespace: NS });
    const gone = await readLedger(kube(env().confirm), NS);
    expect(gone).toEqual({ admitted: {} });
    const withEntries = await failure(writeLedger(kube(env().admin), NS, undefined, { x: entry("node-x") }));
    expect(withEntries.status).toBe(403);
    await writeLedger(kube(env().admin), NS, undefined, {});
    expect((await readLedger(kube(env().confirm), NS)).admitted).toEqual({});
  });

  it("a ledger confirm cannot parse is an error naming it, never read as empty", async () => {
    const confirm = kube(env().confirm);
    await rawWrite(env().confirm, '{"node-a-1": {"node": "node-a"}}');
    const err = await readLedger(confirm, NS).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(FastfenceError);
    expect((err as FastfenceError).code).toBe("FF_INVALID_CONFIG");
    expect((err as FastfenceError).message).toContain(`${NS}/${ADMISSION_LEDGER_LEASE}`);
    await rawWrite(env().confirm, "{}");
    expect((await readLedger(confirm, NS)).admitted).toEqual({});
  });
});
