// The integration lanes against the tree: every file a lane names exists, no file is in two
// lanes, the lab lane holds every lab-* file, and the lanes together take every file once.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LANE_GROUPS, LANES, namedFiles } from "../../../harness/test-lanes.ts";

const ROOT = join(import.meta.dirname, "../../..");
const files = readdirSync(join(ROOT, "test/integration"))
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => `test/integration/${f}`)
  .sort();

describe("integration lanes", () => {
  it("name only files that exist, each once", () => {
    const named = namedFiles();
    expect(named.filter((f) => !files.includes(f))).toEqual([]);
    expect(named.length).toBe(new Set(named).size);
  });

  it("put every lab file in the lab lane, which runs alone", () => {
    const lab = LANES.find((l) => l.name === "lab")!;
    expect(Object.keys(lab.files ?? {}).sort()).toEqual(files.filter((f) => f.includes("/lab-")));
    expect(LANE_GROUPS.filter((g) => g.includes("lab"))).toEqual([["lab"]]);
  });

  it("run every lane in exactly one group, and have one lane for the rest", () => {
    expect(LANE_GROUPS.flat().sort()).toEqual(LANES.map((l) => l.name).sort());
    expect(LANES.filter((l) => !l.files)).toHaveLength(1);
  });

  it("give every named file a reason", () => {
    for (const l of LANES) for (const [f, why] of Object.entries(l.files ?? {})) expect(why, f).not.toBe("");
  });
});
