// Deleting objects for good on a bare harness API server, where no controller finishes a
// deletion: finalizers are stripped first (no controller would ever remove them), Pods go
// without a grace period (no kubelet confirms them), namespaces are finalized through
// their /finalize subresource (no namespace controller), and waitGone polls until each
// object is really gone, since the next test file may create the same name at once. A
// CRD keeps its own cleanup finalizer: the API server runs it in-process, and stripping
// it would leave the CRD's objects in etcd, to reappear with the next CRD of that name.
// Every failure is returned, named, never thrown half-way or ignored.
import { sleep } from "./base.ts";
import {
  isCrd,
  isNamespace,
  mapLimit,
  objectKey,
  objectPath,
  type KubeObject,
  type StoredObject,
} from "./api-inventory.ts";
import type { KubeRest } from "./kube-rest.ts";

/** What could not be done to one object, and why. */
export interface ObjectFailure {
  key: string;
  what: string;
  status: number;
}

const MERGE_PATCH = { "content-type": "application/merge-patch+json" };
const NO_GRACE = "?gracePeriodSeconds=0&propagationPolicy=Background";
const CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io";

/** Remove metadata.finalizers other than a CRD's own cleanup (none left: no request). */
async function stripFinalizers(rest: KubeRest, o: StoredObject): Promise<ObjectFailure | undefined> {
  const finalizers = o.body.metadata.finalizers ?? [];
  const keep = isCrd(o) ? finalizers.filter((f) => f === CRD_CLEANUP) : [];
  if (finalizers.length === keep.length) return undefined;
  const r = await rest.request(
    "PATCH",
    objectPath(o),
    { metadata: { finalizers: keep.length ? keep : null } },
    MERGE_PATCH,
  );
  if (r.status === 404 || (r.status >= 200 && r.status < 300)) return undefined;
  return { key: objectKey(o), what: "strip its finalizers", status: r.status };
}

/** A namespace marked for deletion is removed once its spec.finalizers are emptied. */
async function finalizeNamespace(rest: KubeRest, o: StoredObject): Promise<ObjectFailure | undefined> {
  const cur = await rest.request("GET", objectPath(o));
  if (cur.status === 404) return undefined;
  const ns = cur.body as KubeObject;
  if (cur.status !== 200 || !ns.metadata.deletionTimestamp)
    return { key: objectKey(o), what: "mark it for deletion", status: cur.status };
  const r = await rest.request("PUT", objectPath(o, "finalize"), { ...ns, spec: { finalizers: [] } });
  if (r.status === 404 || (r.status >= 200 && r.status < 300)) return undefined;
  return { key: objectKey(o), what: "finalize it", status: r.status };
}

/** Strip finalizers, delete (no grace period), and for a namespace finalize it. */
export async function deleteForGood(rest: KubeRest, o: StoredObject): Promise<ObjectFailure | undefined> {
  const stripped = await stripFinalizers(rest, o);
  if (stripped) return stripped;
  if (!o.body.metadata.deletionTimestamp) {
    const r = await rest.request("DELETE", `${objectPath(o)}${NO_GRACE}`);
    // 409: a namespace already terminating; finalized below
    const ok = r.status === 404 || r.status === 409 || (r.status >= 200 && r.status < 300);
    if (!ok) return { key: objectKey(o), what: "delete it", status: r.status };
  }
  return isNamespace(o) ? finalizeNamespace(rest, o) : undefined;
}

/** Delete all of `objs` (a few at a time); the failures. */
export async function deleteAll(rest: KubeRest, objs: readonly StoredObject[]): Promise<ObjectFailure[]> {
  const results = await mapLimit(objs, 8, (o) => deleteForGood(rest, o));
  return results.filter((f): f is ObjectFailure => f !== undefined);
}

/**
 * Poll until every one of `objs` is gone (404, or replaced by a new object of the same
 * name: another uid); the ones still there at `deadline`.
 */
export async function waitGone(
  rest: KubeRest,
  objs: readonly StoredObject[],
  deadline: number,
): Promise<ObjectFailure[]> {
  let left = [...objs];
  for (;;) {
    const still = await mapLimit(left, 8, async (o) => {
      const r = await rest.request("GET", objectPath(o));
      if (r.status === 404) return undefined;
      const uid = (r.body as KubeObject | undefined)?.metadata?.uid;
      if (r.status === 200 && uid !== o.body.metadata.uid) return undefined;
      return { o, status: r.status };
    });
    const pending = still.filter((s) => s !== undefined);
    if (pending.length === 0) return [];
    if (Date.now() > deadline)
      return pending.map((p) => ({ key: objectKey(p.o), what: "see it gone", status: p.status }));
    left = pending.map((p) => p.o);
    await sleep(100);
  }
}
