// Renders a kustomization directory the way `kubectl kustomize` does, for the subset of
// kustomize that fastfence's manifests use: `resources` (files and directories holding a
// kustomization.yaml), `components` (directories holding a `kind: Component`
// kustomization, applied to the resources gathered so far, before the parent's own
// patches), `patches` (JSON merge patches that name their target by
// apiVersion/kind/metadata, and JSON 6902 operation lists with an explicit `target`) and
// `images`. Anything else in a kustomization.yaml is an error, never silently ignored, so
// this renderer and kustomize cannot disagree without a test noticing. Merge patches may
// not contain lists for built-in kinds (there kustomize merges lists by key; here they
// would be replaced). Reads files only; never talks to a cluster.
// CLI: node knative/render.ts knative/overlays/openshift > rendered.yaml
import { readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { loadAll, dump } from "js-yaml";

export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [key: string]: unknown;
};

interface PatchTarget {
  group?: string;
  version?: string;
  kind?: string;
  name?: string;
  namespace?: string;
}

interface Kustomization {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  components?: string[];
  patches?: { path?: string; patch?: string; target?: PatchTarget }[];
  images?: { name: string; newName?: string; newTag?: string; digest?: string }[];
}

type JsonOp = { op: "add" | "remove" | "replace" | "test"; path: string; value?: unknown };

export class RenderError extends Error {
  override name = "RenderError";
}

const ALLOWED_KEYS = new Set(["apiVersion", "kind", "resources", "components", "patches", "images"]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Parses every non-empty YAML document of a file. */
export function readYamlDocs(path: string): unknown[] {
  return loadAll(readFileSync(path, "utf8"), { filename: path }).filter((d) => d !== null && d !== undefined);
}

function asKubeObject(doc: unknown, from: string): KubeObject {
  if (!isObject(doc) || typeof doc.apiVersion !== "string" || typeof doc.kind !== "string")
    throw new RenderError(`${from}: a document without apiVersion/kind`);
  const md = doc.metadata;
  if (!isObject(md) || typeof md.name !== "string" || !md.name)
    throw new RenderError(`${from}: ${doc.kind} without metadata.name`);
  return doc as KubeObject;
}

export function groupOf(apiVersion: string): string {
  return apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";
}

/** A stable identity of an object: group/kind/namespace/name. */
export function objectId(o: KubeObject): string {
  return `${groupOf(o.apiVersion)}/${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
}

/** Built-in API groups: kustomize's strategic merge differs from a JSON merge for their lists. */
function isBuiltinGroup(group: string): boolean {
  return group === "" || !group.includes(".") || group.endsWith(".k8s.io");
}

function matches(o: KubeObject, t: PatchTarget): boolean {
  const [g, v] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
  return (
    (t.group === undefined || t.group === g) &&
    (t.version === undefined || t.version === v) &&
    (t.kind === undefined || t.kind === o.kind) &&
    (t.name === undefined || t.name === o.metadata.name) &&
    (t.namespace === undefined || t.namespace === (o.metadata.namespace ?? ""))
  );
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function containsArray(v: unknown): boolean {
  if (Array.isArray(v)) return true;
  return isObject(v) && Object.values(v).some(containsArray);
}

function decodePointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw new RenderError(`JSON pointer "${path}" must start with /`);
  return path
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/** RFC 6902 add/remove/replace/test on a copy of `doc`. */
export function applyJsonPatch(doc: unknown, ops: JsonOp[]): unknown {
  const root = { v: structuredClone(doc) } as Record<string, unknown>;
  for (const op of ops) {
    const keys = ["v", ...decodePointer(op.path)];
    let parent: unknown = root;
    for (const k of keys.slice(0, -1)) {
      const next = Array.isArray(parent) ? parent[Number(k)] : isObject(parent) ? parent[k] : undefined;
      if (next === undefined) throw new RenderError(`JSON patch ${op.op} ${op.path}: path does not exist`);
      parent = next;
    }
    const last = keys[keys.length - 1]!;
    if (Array.isArray(parent)) {
      const idx = last === "-" ? parent.length : Number(last);
      if (!Number.isInteger(idx) || idx < 0 || idx > parent.length)
        throw new RenderError(`JSON patch ${op.path}: bad index`);
      if (op.op === "add") parent.splice(idx, 0, structuredClone(op.value));
      else if (idx >= parent.length) throw new RenderError(`JSON patch ${op.op} ${op.path}: no such element`);
      else if (op.op === "remove") parent.splice(idx, 1);
      else if (op.op === "replace") parent[idx] = structuredClone(op.value);
      else if (JSON.stringify(parent[idx]) !== JSON.stringify(op.value))
        throw new RenderError(`JSON patch test ${op.path} failed`);
    } else if (isObject(parent)) {
      if (op.op === "add") parent[last] = structuredClone(op.value);
      else if (!(last in parent)) throw new RenderError(`JSON patch ${op.op} ${op.path}: no such member`);
      else if (op.op === "remove") delete parent[last];
      else if (op.op === "replace") parent[last] = structuredClone(op.value);
      else if (JSON.stringify(parent[last]) !== JSON.stringify(op.value))
        throw new RenderError(`JSON patch test ${op.path} failed`);
    } else throw new RenderError(`JSON patch ${op.op} ${op.path}: parent is not a container`);
  }
  return root.v;
}

function podSpecs(o: KubeObject): Record<string, unknown>[] {
  const spec = o.spec;
  const tmpl = isObject(spec) && isObject(spec.template) ? spec.template : undefined;
  return tmpl && isObject(tmpl.spec) ? [tmpl.spec] : [];
}

function applyImages(o: KubeObject, images: NonNullable<Kustomization["images"]>): void {
  for (const ps of podSpecs(o)) {
    for (const key of ["containers", "initContainers"]) {
      const list = ps[key];
      if (!Array.isArray(list)) continue;
      for (const c of list) {
        if (!isObject(c) || typeof c.image !== "string") continue;
        const m = /^(.*?)(?::([^:/@]+))?(?:@(.+))?$/.exec(c.image)!;
        const img = images.find((i) => i.name === m[1]);
        if (!img) continue;
        const name = img.newName ?? m[1];
        c.image = img.digest ? `${name}@${img.digest}` : `${name}:${img.newTag ?? m[2] ?? "latest"}`;
      }
    }
  }
}

/**
 * Renders the kustomization in `dir` (a directory holding kustomization.yaml). A Component
 * (kind: Component) is rendered onto `base`: the objects it adds and patches go with those
 * it was given, as kustomize applies a component listed under `components`.
 */
export function render(dir: string, base: readonly KubeObject[] = []): KubeObject[] {
  const abs = resolve(dir);
  const file = join(abs, "kustomization.yaml");
  const [doc] = readYamlDocs(file);
  if (!isObject(doc)) throw new RenderError(`${file}: empty`);
  const k = doc as Kustomization;
  for (const key of Object.keys(k)) {
    if (!ALLOWED_KEYS.has(key))
      throw new RenderError(`${file}: "${key}" is not supported by knative/render.ts`);
  }
  const isComponent = k.kind === "Component";
  if (isComponent && k.apiVersion !== "kustomize.config.k8s.io/v1alpha1")
    throw new RenderError(`${file}: a Component is kustomize.config.k8s.io/v1alpha1`);
  if (!isComponent && base.length) throw new RenderError(`${file}: only a Component renders onto objects`);
  let objects: KubeObject[] = [...base];
  for (const r of k.resources ?? []) {
    const p = join(abs, r);
    if (statSync(p).isDirectory()) objects.push(...render(p));
    else objects.push(...readYamlDocs(p).map((d) => asKubeObject(d, p)));
  }
  for (const c of k.components ?? []) {
    const p = join(abs, c);
    const [cdoc] = readYamlDocs(join(p, "kustomization.yaml"));
    if (!isObject(cdoc) || cdoc.kind !== "Component")
      throw new RenderError(`${file}: components: ${c} is not a kind: Component kustomization`);
    objects = render(p, objects);
  }
  const seen = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (seen.has(id)) throw new RenderError(`${file}: ${id} appears twice`);
    seen.add(id);
  }
  for (const p of k.patches ?? []) {
    const where = p.path ? join(abs, p.path) : `${file} (inline patch)`;
    const docs = p.path ? readYamlDocs(join(abs, p.path)) : (loadAll(p.patch ?? "") as unknown[]);
    if (docs.length !== 1) throw new RenderError(`${where}: a patch must be exactly one document`);
    const body = docs[0];
    if (Array.isArray(body)) {
      if (!p.target) throw new RenderError(`${where}: a JSON 6902 patch needs a target`);
      const hits = objects.filter((o) => matches(o, p.target!));
      if (!hits.length) throw new RenderError(`${where}: target matches nothing`);
      objects = objects.map((o) =>
        hits.includes(o) ? asKubeObject(applyJsonPatch(o, body as JsonOp[]), where) : o,
      );
    } else {
      const patch = asKubeObject(body, where);
      const target: PatchTarget = p.target ?? {
        group: groupOf(patch.apiVersion),
        kind: patch.kind,
        name: patch.metadata.name,
        ...(patch.metadata.namespace ? { namespace: patch.metadata.namespace } : {}),
      };
      if (isBuiltinGroup(groupOf(patch.apiVersion)) && containsArray(patch))
        throw new RenderError(
          `${where}: merge patches of built-in kinds must not contain lists (use a JSON 6902 patch)`,
        );
      const hits = objects.filter((o) => matches(o, target));
      if (!hits.length) throw new RenderError(`${where}: target matches nothing`);
      objects = objects.map((o) => (hits.includes(o) ? asKubeObject(mergePatch(o, patch), where) : o));
    }
  }
  if (k.images?.length) for (const o of objects) applyImages(o, k.images);
  return objects;
}

/** The rendered objects as one multi-document YAML stream. */
export function toYaml(objects: KubeObject[]): string {
  return objects.map((o) => dump(o, { noRefs: true, lineWidth: -1 })).join("---\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = process.argv[2];
  if (!dir) {
    console.error("usage: node knative/render.ts <kustomization dir>");
    process.exit(2);
  }
  process.stdout.write(toYaml(render(dir)));
}

export const KNATIVE_DIR = dirname(new URL(import.meta.url).pathname);
