// What a harness API server holds: its resource types from aggregated discovery (core and
// every group, CRD-served ones included, each type once) and every stored object of every
// type that can be listed and deleted, with the paths to address each. A CRD-served type is
// listed in its storage version (no conversion: the CRDs' conversion webhooks do not run
// here, and the server takes seconds to give up on one), any other in its group's
// preferred version; when the server cannot answer in that one (HTTP 5xx), in the next
// version it serves. Used by the shared control plane's snapshot and reset. Read-only: it
// must never write.
import { EnvError } from "./base.ts";
import { KubeRestError, type KubeRest } from "./kube-rest.ts";

/** One resource type, in one of the versions it is served in. */
export interface ApiResource {
  group: string;
  /** The version this type is addressed in (its listing answered in it). */
  version: string;
  /** Every version it is served in, most preferred first. */
  versions: string[];
  /** Plural, e.g. "configmaps". */
  resource: string;
  kind: string;
  namespaced: boolean;
  /** It has a /status subresource (status is written there, not by a plain update). */
  hasStatus: boolean;
}

/** An object as stored; `body` carries apiVersion and kind (list items may lack them). */
export interface StoredObject {
  res: ApiResource;
  namespace?: string;
  name: string;
  body: KubeObject;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
    [k: string]: unknown;
  };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
}

interface DiscoveryResource {
  resource: string;
  responseKind?: { kind?: string };
  scope: "Cluster" | "Namespaced";
  verbs?: string[];
  subresources?: { subresource: string }[];
}
interface DiscoveryList {
  kind?: string;
  items?: {
    metadata?: { name?: string };
    versions?: { version: string; resources?: DiscoveryResource[] }[];
  }[];
}

const AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/**
 * Groups left out: events.k8s.io serves the very objects of core v1 `events` (listing both
 * would count each Event twice).
 */
const DUPLICATE_GROUPS = new Set(["events.k8s.io"]);

export const apiVersionOf = (r: ApiResource): string => (r.group ? `${r.group}/${r.version}` : r.version);

const prefixOf = (r: ApiResource): string =>
  r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;

/** The collection's path: cluster-wide, or within `namespace` for a namespaced type. */
export function collectionPath(r: ApiResource, namespace?: string): string {
  const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  return `${prefixOf(r)}${ns}/${r.resource}`;
}

/** One object's path, optionally a subresource of it ("status", "finalize"). */
export function objectPath(o: Pick<StoredObject, "res" | "namespace" | "name">, sub?: string): string {
  return `${collectionPath(o.res, o.namespace)}/${encodeURIComponent(o.name)}${sub ? `/${sub}` : ""}`;
}

export const isNamespace = (o: Pick<StoredObject, "res">): boolean =>
  o.res.group === "" && o.res.resource === "namespaces";
export const isCrd = (o: Pick<StoredObject, "res">): boolean =>
  o.res.group === "apiextensions.k8s.io" && o.res.resource === "customresourcedefinitions";

/** "group/resource/namespace/name", the identity snapshot and reset compare by. */
export const objectKey = (o: Pick<StoredObject, "res" | "namespace" | "name">): string =>
  `${o.res.group || "core"}/${o.res.resource}/${o.namespace ?? ""}/${o.name}`;

/** Every resource type that can be listed and deleted (stored objects, not virtual ones). */
export async function discoverResources(rest: KubeRest): Promise<ApiResource[]> {
  const lists = await Promise.all(
    ["/api", "/apis"].map((p) => rest.get<DiscoveryList>(p, { accept: AGGREGATED })),
  );
  const out: ApiResource[] = [];
  for (const list of lists) {
    if (list.kind !== "APIGroupDiscoveryList")
      throw new EnvError(`aggregated discovery not served (got kind ${String(list.kind)})`);
    for (const g of list.items ?? []) {
      const group = g.metadata?.name ?? "";
      const versions = g.versions ?? []; // in order of preference
      const preferred = versions[0];
      if (!preferred || DUPLICATE_GROUPS.has(group)) continue;
      for (const r of preferred.resources ?? []) {
        const verbs = r.verbs ?? [];
        if (!verbs.includes("list") || !verbs.includes("delete")) continue;
        out.push({
          group,
          version: preferred.version,
          versions: versions
            .filter((v) => (v.resources ?? []).some((x) => x.resource === r.resource))
            .map((v) => v.version),
          resource: r.resource,
          kind: r.responseKind?.kind ?? r.resource,
          namespaced: r.scope === "Namespaced",
          hasStatus: (r.subresources ?? []).some((s) => s.subresource === "status"),
        });
      }
    }
  }
  return out;
}

/** Every object of one type in its version `r.version`, all namespaces, following `continue` tokens. */
async function listIn(rest: KubeRest, r: ApiResource): Promise<StoredObject[]> {
  const out: StoredObject[] = [];
  let cont = "";
  do {
    const q = `?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ""}`;
    const page = await rest.get<{ items?: KubeObject[]; metadata?: { continue?: string } }>(
      `${collectionPath(r)}${q}`,
    );
    for (const item of page.items ?? []) {
      const body: KubeObject = { ...item, apiVersion: apiVersionOf(r), kind: r.kind };
      const namespace = r.namespaced ? item.metadata.namespace : undefined;
      out.push({ res: r, ...(namespace ? { namespace } : {}), name: item.metadata.name, body });
    }
    cont = page.metadata?.continue ?? "";
  } while (cont);
  return out;
}

/**
 * Every object of one type, in the first version the server can answer in; a 404 (a CRD
 * deleted since discovery: its type, and every object of it, is gone) is an empty list.
 */
async function listResource(rest: KubeRest, r: ApiResource): Promise<StoredObject[]> {
  let first: unknown;
  for (const version of r.versions) {
    try {
      return await listIn(rest, { ...r, version });
    } catch (err) {
      if (err instanceof KubeRestError && err.status === 404) return [];
      if (!(err instanceof KubeRestError && err.status >= 500)) throw err;
      first ??= err;
    }
  }
  throw first;
}

/** `fn` over `items`, at most `limit` at a time, results in input order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (t: T) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

interface CrdSpec {
  group?: string;
  names?: { plural?: string };
  versions?: { name: string; storage?: boolean }[];
}

/** `resources` with each CRD-served type addressed in its CRD's storage version first. */
function inStorageVersions(resources: ApiResource[], crds: StoredObject[]): ApiResource[] {
  const storage = new Map<string, string>();
  for (const c of crds) {
    const spec = c.body.spec as CrdSpec | undefined;
    const v = spec?.versions?.find((x) => x.storage)?.name;
    if (spec?.group && spec.names?.plural && v) storage.set(`${spec.group}/${spec.names.plural}`, v);
  }
  return resources.map((r) => {
    const v = storage.get(`${r.group}/${r.resource}`);
    return v && r.versions.includes(v)
      ? { ...r, version: v, versions: [v, ...r.versions.filter((x) => x !== v)] }
      : r;
  });
}

/** Every stored object of every listable, deletable type the server serves now. */
export async function listEverything(rest: KubeRest): Promise<StoredObject[]> {
  const resources = await discoverResources(rest);
  const crdType = resources.find((r) => isCrd({ res: r }));
  const crds = crdType ? await listResource(rest, crdType) : [];
  const others = inStorageVersions(
    resources.filter((r) => r !== crdType),
    crds,
  );
  return [...crds, ...(await mapLimit(others, 6, (r) => listResource(rest, r))).flat()];
}
