// Every integration file says in its first line why it cannot be a unit test: which real
// servers, emulators, tools or the lab it needs, and what of them the test relies on, as
// `// Needs real <parts>: <why>.` on one line of at most 100 characters.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../../..");
const DIR = join(ROOT, "test/integration");
const NEEDS = /^\/\/ Needs real .+: .+\.$/;
const files = readdirSync(DIR, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".test.ts"))
  .sort();
const firstLine = (f: string) => readFileSync(join(DIR, f), "utf8").split("\n", 1)[0]!;

describe("integration files say what they need", () => {
  it("finds the integration files", () => {
    expect(files.length).toBeGreaterThan(0);
  });

  it("start with one `// Needs real <parts>: <why>.` line", () => {
    const lacking = files.filter((f) => !NEEDS.test(firstLine(f))).map((f) => `test/integration/${f}`);
    expect(lacking, "files whose line 1 is not `// Needs real <parts>: <why>.`").toEqual([]);
  });

  it("keep that line within 100 characters", () => {
    const long = files.filter((f) => firstLine(f).length > 100).map((f) => `test/integration/${f}`);
    expect(long, "files whose Needs line is longer than 100 characters").toEqual([]);
  });
});
