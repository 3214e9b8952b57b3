// The lab and the benches are test code that runs the product from the artifact: they may
// call the product only through app/ (loaded by harness/shipped-app.ts) and its pure
// modules, never through the CLI, so what they measure is what `fastfence run`/`source` run.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../../harness/env/base.ts";

describe("lab/ and bench/", () => {
  for (const dir of ["lab", "bench"])
    it(`${dir}/ imports nothing from cli/`, () => {
      const files = readdirSync(join(ROOT, dir)).filter((f) => f.endsWith(".ts"));
      expect(files.length).toBeGreaterThan(0);
      for (const f of files) {
        const src = readFileSync(join(ROOT, dir, f), "utf8");
        expect(src, `${dir}/${f}`).not.toMatch(/from "\.\.\/cli\//);
        expect(src, `${dir}/${f}`).not.toMatch(/import\("\.\.\/cli\//);
      }
    });
});
