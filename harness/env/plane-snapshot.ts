// The shared control plane's reference state: a snapshot of every stored object right
// after start (once the API server's own bootstrap writes have settled), saved as JSON so
// every test process can read it; and the comparison of a current listing against it —
// objects the snapshot lacks, snapshot objects changed or gone — ignoring only what the
// API server keeps rewriting by itself (SELF_MANAGED, each with its reason). Read-only on
// the server: it lists, and must never write there.
import { readFileSync, writeFileSync } from "node:fs";
import { EnvError, sleep } from "./base.ts";
import { listEverything, objectKey, type StoredObject } from "./api-inventory.ts";
import type { KubeRest } from "./kube-rest.ts";

export interface PlaneSnapshot {
  /** When it was taken, ISO 8601. */
  takenAt: string;
  objects: StoredObject[];
}

/**
 * Objects the API server itself writes on its own schedule, left out of the comparison
 * (neither deleted as new, nor restored as changed or gone):
 */
const SELF_MANAGED: { why: string; match: (o: StoredObject) => boolean }[] = [
  {
    // kube-system/apiserver-<hash>: the server's identity Lease, renewed every 10 s by the
    // server (its renewTime and resourceVersion change on their own), and created anew,
    // under a new name, each time the server restarts.
    why: "kube-apiserver identity Lease",
    match: (o) =>
      o.res.group === "coordination.k8s.io" &&
      o.res.resource === "leases" &&
      o.namespace === "kube-system" &&
      o.body.metadata.labels?.["apiserver.kubernetes.io/identity"] === "kube-apiserver",
  },
  {
    // v1.<group>: the aggregator's autoregistration controller keeps one APIService per
    // group version a CRD serves (label value "true"; built-in groups have "onstart" and
    // stay compared), creating and deleting it as CRDs come and go: deleting it while its
    // CRD exists only makes the controller write it again.
    why: "APIService of a CRD's group version",
    match: (o) =>
      o.res.group === "apiregistration.k8s.io" &&
      o.body.metadata.labels?.["kube-aggregator.kubernetes.io/automanaged"] === "true",
  },
];

export const isSelfManaged = (o: StoredObject): boolean => SELF_MANAGED.some((s) => s.match(o));

/** Metadata the server sets on every write: not content. */
const VOLATILE_METADATA = [
  "resourceVersion",
  "managedFields",
  "generation",
  "creationTimestamp",
  "uid",
  "selfLink",
];

/** JSON with object keys sorted, so equal content gives equal text. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

/** The object's content: everything but the metadata the server stamps on each write. */
export function contentOf(o: StoredObject): string {
  const metadata: Record<string, unknown> = { ...o.body.metadata };
  for (const k of VOLATILE_METADATA) delete metadata[k];
  return canonical({ ...o.body, metadata });
}

export interface PlaneDiff {
  /** Present now, not in the snapshot: to delete. */
  extra: StoredObject[];
  /** In both, with other content: to put back. */
  changed: { want: StoredObject; have: StoredObject }[];
  /** In the snapshot, gone now: to create again. */
  missing: StoredObject[];
}

export const isClean = (d: PlaneDiff): boolean =>
  d.extra.length === 0 && d.changed.length === 0 && d.missing.length === 0;

/** How `current` differs from `snapshot` (self-managed objects left out). */
export function diffPlane(snapshot: PlaneSnapshot, current: StoredObject[]): PlaneDiff {
  const want = new Map(snapshot.objects.filter((o) => !isSelfManaged(o)).map((o) => [objectKey(o), o]));
  const diff: PlaneDiff = { extra: [], changed: [], missing: [] };
  const seen = new Set<string>();
  for (const have of current) {
    if (isSelfManaged(have)) continue;
    const key = objectKey(have);
    seen.add(key);
    const w = want.get(key);
    if (!w) diff.extra.push(have);
    else if (w.body.metadata.resourceVersion !== have.body.metadata.resourceVersion)
      // a restored object has a new resourceVersion but the snapshot's content
      if (contentOf(w) !== contentOf(have)) diff.changed.push({ want: w, have });
  }
  for (const [key, w] of want) if (!seen.has(key)) diff.missing.push(w);
  return diff;
}

/** Keys and resourceVersions of a listing, to tell whether two listings are the same. */
const fingerprint = (objs: StoredObject[]): string =>
  objs
    .filter((o) => !isSelfManaged(o))
    .map((o) => `${objectKey(o)}@${o.body.metadata.resourceVersion}`)
    .sort()
    .join("\n");

/**
 * What the server's bootstrap controller creates just after it reports ready. (On these
 * planes it writes no `kubernetes` Endpoints or EndpointSlice: none appear in 30 s.)
 */
const BOOTSTRAP = ["core/services/default/kubernetes"];

/**
 * Snapshot once the server's own start-up writes are over: two listings `quietMs` apart
 * equal, and the `kubernetes` Service present.
 */
export async function settledSnapshot(
  rest: KubeRest,
  opts: { quietMs?: number; timeoutMs?: number } = {},
): Promise<PlaneSnapshot> {
  const quietMs = opts.quietMs ?? 1000;
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let prev = await listEverything(rest);
  for (;;) {
    await sleep(quietMs);
    const cur = await listEverything(rest);
    const keys = new Set(cur.map(objectKey));
    if (fingerprint(prev) === fingerprint(cur) && BOOTSTRAP.every((k) => keys.has(k)))
      return { takenAt: new Date().toISOString(), objects: cur };
    if (Date.now() > deadline)
      throw new EnvError("shared control plane: its bootstrap objects did not settle for a snapshot");
    prev = cur;
  }
}

export function writeSnapshot(path: string, s: PlaneSnapshot): void {
  writeFileSync(path, JSON.stringify(s));
}

export function readSnapshot(path: string): PlaneSnapshot {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as PlaneSnapshot;
  } catch (err) {
    throw new EnvError(`shared control plane: cannot read its snapshot ${path}`, { cause: err });
  }
}
