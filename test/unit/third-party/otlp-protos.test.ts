// The vendored OTLP protobuf definitions (third_party/opentelemetry-proto) are unchanged
// copies with their source recorded: every .proto file's git blob hash matches its row in
// SOURCES.md, and no file is there without a row (or a row without a file). Reads only.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, test } from "vitest";

const DIR = join(import.meta.dirname, "../../../third_party/opentelemetry-proto");

function protoFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) return protoFiles(p);
    return n.endsWith(".proto") ? [relative(DIR, p)] : [];
  });
}

/** git's blob id: sha1 of "blob <size>\0<content>". */
function gitBlobId(content: Buffer): string {
  return createHash("sha1")
    .update(Buffer.concat([Buffer.from(`blob ${content.length}\0`), content]))
    .digest("hex");
}

const rows = new Map(
  readFileSync(join(DIR, "SOURCES.md"), "utf8")
    .split("\n")
    .filter((l) => l.startsWith("| opentelemetry/"))
    .map((l) => {
      const c = l
        .slice(1, -1)
        .split("|")
        .map((x) => x.trim());
      return [c[0]!, c[3]!] as const;
    }),
);

describe("third_party/opentelemetry-proto", () => {
  test("every file has a row and every row a file", () => {
    expect(protoFiles(DIR).sort()).toEqual([...rows.keys()].sort());
  });
  test.each([...rows])("%s is the recorded upstream blob", (file, blob) => {
    expect(gitBlobId(readFileSync(join(DIR, file)))).toBe(blob);
  });
});
