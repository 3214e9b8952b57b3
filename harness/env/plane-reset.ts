// reset(): puts a shared harness API server back into the state of its snapshot
// (plane-snapshot.ts), whatever a test file did to it. Each round lists everything
// (discovery, so CRD-served types too), then deletes every object the snapshot lacks —
// admission policies and webhooks first (they could refuse the rest, and their removal is
// waited into force), namespaced objects before cluster-scoped ones, CRD instances before
// their CRDs, namespaces last — waits until each is really gone, and puts back every
// snapshot object changed (replaced by the snapshot's content) or gone (created again).
// It ends with a listing equal to the snapshot, or throws a PlaneResetError naming what
// it could not restore. It must never touch an object the snapshot has unchanged, nor
// the self-managed ones plane-snapshot.ts leaves out.
import type { KubeConfig } from "@kubernetes/client-node";
import { waitAdmissionDeletionsInForce } from "./admission-ready.ts";
import { EnvError } from "./base.ts";
import {
  collectionPath,
  isCrd,
  isNamespace,
  listEverything,
  mapLimit,
  objectKey,
  objectPath,
  type KubeObject,
  type StoredObject,
} from "./api-inventory.ts";
import type { KubeRest } from "./kube-rest.ts";
import { deleteAll, deleteForGood, waitGone, type ObjectFailure } from "./plane-delete.ts";
import { diffPlane, isClean, type PlaneDiff, type PlaneSnapshot } from "./plane-snapshot.ts";

/** The shared control plane could not be put back into its snapshot's state. */
export class PlaneResetError extends EnvError {
  /** "left <key>" (could not delete), "changed <key>", "gone <key>" (could not restore). */
  readonly unrestored: string[];
  /** The requests that failed in the last round. */
  readonly failures: ObjectFailure[];
  constructor(unrestored: string[], failures: ObjectFailure[]) {
    const shown = unrestored.slice(0, 12).join(", ");
    const more = unrestored.length > 12 ? ` and ${unrestored.length - 12} more` : "";
    const why = failures
      .slice(0, 6)
      .map((f) => `${f.key}: could not ${f.what} (HTTP ${f.status})`)
      .join("; ");
    super(
      `shared control plane: reset could not restore ${unrestored.length} object(s): ${shown}${more}` +
        (why ? ` [${why}]` : ""),
    );
    this.unrestored = unrestored;
    this.failures = failures;
  }
}

export interface ResetReport {
  ms: number;
  /** Listings made (1: the plane was already clean). */
  rounds: number;
  deleted: number;
  /** Snapshot objects replaced by their snapshot content. */
  restored: number;
  /** Snapshot objects created again. */
  recreated: number;
}

const ADMISSION_GROUP = "admissionregistration.k8s.io";
const isAdmission = (o: StoredObject): boolean => o.res.group === ADMISSION_GROUP;

/** The deletion phases, in order; each is waited gone before the next. */
const PHASES: ((o: StoredObject) => boolean)[] = [
  isAdmission,
  (o) => o.res.namespaced,
  (o) => !o.res.namespaced && !isNamespace(o) && !isCrd(o) && !isAdmission(o),
  isCrd,
  isNamespace,
];

/** Order of re-creation: namespaces, CRDs, other cluster-scoped objects, namespaced ones. */
const createRank = (o: StoredObject): number =>
  isNamespace(o) ? 0 : isCrd(o) ? 1 : o.res.namespaced ? 3 : 2;

/** The snapshot's body as a request body: no server-stamped metadata. */
function requestBody(want: StoredObject, resourceVersion?: string): KubeObject {
  const { uid: _u, creationTimestamp: _c, managedFields: _m, generation: _g, ...meta } = want.body.metadata;
  const { resourceVersion: _rv, deletionTimestamp: _d, deletionGracePeriodSeconds: _dg, ...rest } = meta;
  return {
    ...want.body,
    metadata: { ...rest, name: want.name, ...(resourceVersion ? { resourceVersion } : {}) },
  };
}

const ok = (status: number): boolean => status >= 200 && status < 300;
const canon = (v: unknown): string => JSON.stringify(v ?? null);

/** Write `want`'s status through /status if the stored one differs. */
async function putStatus(
  rest: KubeRest,
  want: StoredObject,
  stored: KubeObject,
): Promise<ObjectFailure | undefined> {
  if (!want.res.hasStatus || canon(stored.status) === canon(want.body.status)) return undefined;
  const r = await rest.request("PUT", objectPath(want, "status"), { ...stored, status: want.body.status });
  return ok(r.status) ? undefined : { key: objectKey(want), what: "put its status back", status: r.status };
}

/** Replace a changed snapshot object with the snapshot's content (one being deleted is finished off). */
async function putBack(
  rest: KubeRest,
  want: StoredObject,
  have: StoredObject,
): Promise<ObjectFailure | undefined> {
  if (have.body.metadata.deletionTimestamp) return deleteForGood(rest, have); // created again next round
  const r = await rest.request(
    "PUT",
    objectPath(want),
    requestBody(want, have.body.metadata.resourceVersion),
  );
  if (!ok(r.status)) return { key: objectKey(want), what: "put it back", status: r.status };
  return putStatus(rest, want, r.body as KubeObject);
}

/** Create a gone snapshot object again (409: something else did; compared next round). */
async function recreate(rest: KubeRest, want: StoredObject): Promise<ObjectFailure | undefined> {
  const r = await rest.request("POST", collectionPath(want.res, want.namespace), requestBody(want));
  if (r.status === 409) return undefined;
  if (!ok(r.status)) return { key: objectKey(want), what: "create it again", status: r.status };
  return putStatus(rest, want, r.body as KubeObject);
}

const defined = <T>(xs: (T | undefined)[]): T[] => xs.filter((x): x is T => x !== undefined);

/** One round of repairs for `diff`; what failed. */
async function repair(
  rest: KubeRest,
  kubeConfig: KubeConfig,
  diff: PlaneDiff,
  deadline: number,
): Promise<ObjectFailure[]> {
  const failures: ObjectFailure[] = [];
  const assigned = new Set<StoredObject>();
  for (const [i, inPhase] of PHASES.entries()) {
    const objs = diff.extra.filter((o) => !assigned.has(o) && inPhase(o));
    objs.forEach((o) => assigned.add(o));
    if (objs.length === 0) continue;
    const failed = await deleteAll(rest, objs);
    const failedKeys = new Set(failed.map((f) => f.key));
    failures.push(
      ...failed,
      ...(await waitGone(
        rest,
        objs.filter((o) => !failedKeys.has(objectKey(o))),
        deadline,
      )),
    );
    if (i === 0) await waitAdmissionDeletionsInForce(kubeConfig); // stale policies could refuse the rest
  }
  failures.push(...defined(await mapLimit(diff.changed, 8, (c) => putBack(rest, c.want, c.have))));
  const missing = [...diff.missing].sort((a, b) => createRank(a) - createRank(b));
  for (const rank of [0, 1, 2, 3]) {
    const now = missing.filter((o) => createRank(o) === rank);
    failures.push(...defined(await mapLimit(now, 8, (o) => recreate(rest, o))));
  }
  const admissionRestored = [...diff.changed.map((c) => c.want), ...diff.missing].some(isAdmission);
  if (admissionRestored) await waitAdmissionDeletionsInForce(kubeConfig);
  return failures;
}

const describeDiff = (d: PlaneDiff): string[] => [
  ...d.extra.map((o) => `left ${objectKey(o)}`),
  ...d.changed.map((c) => `changed ${objectKey(c.want)}`),
  ...d.missing.map((o) => `gone ${objectKey(o)}`),
];

/**
 * Put the server back into `snapshot`'s state: repeat list, compare, repair until a
 * listing equals the snapshot; after `maxRounds` repairs or `timeoutMs`, a PlaneResetError.
 */
export async function resetPlane(
  rest: KubeRest,
  kubeConfig: KubeConfig,
  snapshot: PlaneSnapshot,
  opts: { timeoutMs?: number; maxRounds?: number } = {},
): Promise<ResetReport> {
  const t0 = performance.now();
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  const maxRounds = opts.maxRounds ?? 3;
  const report: ResetReport = { ms: 0, rounds: 0, deleted: 0, restored: 0, recreated: 0 };
  let failures: ObjectFailure[] = [];
  for (;;) {
    report.rounds++;
    const diff = diffPlane(snapshot, await listEverything(rest));
    if (isClean(diff)) return { ...report, ms: Math.round(performance.now() - t0) };
    if (report.rounds > maxRounds || Date.now() > deadline)
      throw new PlaneResetError(describeDiff(diff), failures);
    failures = await repair(rest, kubeConfig, diff, deadline);
    report.deleted += diff.extra.length;
    report.restored += diff.changed.length;
    report.recreated += diff.missing.length;
  }
}
