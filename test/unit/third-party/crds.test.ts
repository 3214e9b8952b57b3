// The vendored upstream CRDs (third_party/crds) are unchanged copies with their source
// recorded: every file's git blob hash matches the row of SOURCES.md that names its
// upstream repository, release, commit, path and licence, and no file is there without a
// row (or a row without a file). Also: nothing in the repository reads a folder beside the
// checkout. Reads files only; it never changes them.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { execFileSync } from "node:child_process";
import { describe, expect, test } from "vitest";
import { readYamlDocs } from "../../../harness/kustomize.ts";

const ROOT = join(import.meta.dirname, "../../..");
const CRDS = join(ROOT, "third_party/crds");

interface SourceRow {
  file: string;
  repository: string;
  release: string;
  path: string;
  commit: string;
  licence: string;
  blob: string;
}

function sourceRows(): SourceRow[] {
  const lines = readFileSync(join(CRDS, "SOURCES.md"), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("| ") && !l.startsWith("| file "));
  return lines.map((l) => {
    const c = l
      .slice(1, -1)
      .split("|")
      .map((x) => x.trim());
    return {
      file: c[0]!,
      repository: c[1]!,
      release: c[2]!,
      path: c[3]!,
      commit: c[4]!,
      licence: c[5]!,
      blob: c[6]!,
    };
  });
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return yamlFiles(p);
    return /\.ya?ml$/.test(n) ? [relative(CRDS, p)] : [];
  });
}

/** git's blob id: sha1 of "blob <size>\0<content>". */
function gitBlobId(content: Buffer): string {
  return createHash("sha1")
    .update(Buffer.concat([Buffer.from(`blob ${content.length}\0`), content]))
    .digest("hex");
}

describe("third_party/crds", () => {
  const rows = sourceRows();

  test("every file has exactly one row and every row a file", () => {
    const files = yamlFiles(CRDS).sort();
    expect(files.length).toBeGreaterThan(0);
    expect(rows.map((r) => r.file).sort()).toEqual(files);
  });

  test.each(sourceRows().map((r) => [r.file, r] as const))(
    "%s is the unchanged upstream file, with its source recorded",
    (file, row) => {
      expect(row.repository).toMatch(/^[\w.-]+\/[\w.-]+$/);
      expect(row.release).not.toBe("");
      expect(row.path.endsWith(".yaml")).toBe(true);
      expect(row.commit).toMatch(/^[0-9a-f]{40}$/);
      expect(row.licence).toBe("Apache-2.0");
      expect(gitBlobId(readFileSync(join(CRDS, file)))).toBe(row.blob);
      // as kubectl parses it (a few upstream files are valid only to Go's YAML parser)
      const docs = readYamlDocs(join(CRDS, file)) as { kind?: string; apiVersion?: string }[];
      expect(docs).toHaveLength(1);
      const doc = docs[0]!;
      expect(doc.kind).toBe("CustomResourceDefinition");
      expect(doc.apiVersion).toBe("apiextensions.k8s.io/v1");
    },
  );

  test("the licence text the rows name is in the repository", () => {
    expect(readFileSync(join(ROOT, "third_party/licenses/Apache-2.0.txt"), "utf8")).toMatch(
      /Apache License\s+Version 2\.0/,
    );
  });
});

describe("the checkout stands on its own", () => {
  test("no tracked code, script or manifest names a folder beside the checkout", () => {
    const tracked = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" })
      .split("\0")
      .filter((f) => f && !f.startsWith("third_party/") && !f.endsWith(".md"));
    // A sibling "shared" folder (development machines have one; a clone does not) and absolute /work paths.
    const offenders = tracked.filter((f) => {
      const text = readFileSync(join(ROOT, f), "utf8");
      return /\.\.\/shared\b|["'`\s]\/work\//.test(text);
    });
    expect(offenders).toEqual([]);
  });
});
