// Renders knative/ with the real kustomize CLI (.cache/bin/kustomize, built by
// scripts/setup.sh from sigs.k8s.io/kustomize/kustomize/v5) and parses the multi-document
// YAML it prints, for the tests, the lab and the scripts that read the manifests. It must
// never re-implement any part of kustomize and never talks to a cluster: it only runs
// `kustomize build` on directories and reads files.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { loadAll } from "js-yaml";
import { BIN, ROOT } from "./env/base.ts";

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

export const KUSTOMIZE = join(BIN, "kustomize");
export const KNATIVE_DIR = join(ROOT, "knative");

/** Parses every non-empty YAML document of a string. */
export function parseYamlDocs(text: string, filename?: string): unknown[] {
  return loadAll(text, filename ? { filename } : {}).filter((d) => d !== null && d !== undefined);
}

/**
 * Parses every non-empty YAML document of a file. A few upstream CRDs (the OpenShift
 * Serverless operator's) continue quoted descriptions at the key's own indentation, which
 * js-yaml refuses and Go's YAML (the API server's, kubectl's, kustomize's) accepts: such a
 * file is read the way kubectl reads it, through kustomize (its objects, unchanged).
 */
export function readYamlDocs(path: string): unknown[] {
  const text = readFileSync(path, "utf8");
  try {
    return parseYamlDocs(text, path);
  } catch (err) {
    if ((err as Error).name !== "YAMLException") throw err;
    const dir = mkdtempSync(join(tmpdir(), "fastfence-yaml-"));
    try {
      writeFileSync(join(dir, "objects.yaml"), text);
      writeFileSync(join(dir, "kustomization.yaml"), "resources: [objects.yaml]\n");
      return render(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

export function groupOf(apiVersion: string): string {
  return apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";
}

/** A stable identity of an object: group/kind/namespace/name. */
export function objectId(o: KubeObject): string {
  return `${groupOf(o.apiVersion)}/${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
}

/** `kustomize build <dir>` as YAML text; throws with kustomize's own message on failure. */
export function buildYaml(dir: string): string {
  if (!existsSync(KUSTOMIZE)) throw new Error(`${KUSTOMIZE} is missing: run scripts/setup.sh kustomize`);
  try {
    return execFileSync(KUSTOMIZE, ["build", resolve(dir)], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`kustomize build ${dir}: ${(e.stderr || e.message).trim()}`, { cause: err });
  }
}

/** The objects `kustomize build <dir>` renders, in kustomize's output order. */
export function render(dir: string): KubeObject[] {
  return parseYamlDocs(buildYaml(dir), dir) as KubeObject[];
}

/**
 * Renders a kustomization made on the fly: `resources` and `components` (directories,
 * any path) as a user's own overlay would list them, e.g. an overlay plus an optional
 * component. The temporary kustomization names them by relative paths, as kustomize requires.
 */
export function renderWith(resources: string[], components: string[] = []): KubeObject[] {
  const dir = mkdtempSync(join(tmpdir(), "fastfence-kustomize-"));
  try {
    const rel = (p: string) => JSON.stringify(relative(dir, resolve(p)));
    writeFileSync(
      join(dir, "kustomization.yaml"),
      [
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        `resources: [${resources.map(rel).join(", ")}]`,
        `components: [${components.map(rel).join(", ")}]`,
        "",
      ].join("\n"),
    );
    return render(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
