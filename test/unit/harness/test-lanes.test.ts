// The integration lanes against the tree: every file a group names exists, no file is in two
// groups, the lab group holds every file that brings up a lab (by its name or its source) in
// a lane of its own that runs alone, and the lanes together run every group once (a group
// split in shards: each shard once).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GROUPS, LANES, namedFiles } from "../../../harness/test-lanes.ts";

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

  it("put every file that brings up a lab in the lab group, whose lane holds nothing else and runs alone", () => {
    const lab = GROUPS.find((g) => g.project === "integration-lab")!;
    const bringsUpLab = (f: string) =>
      f.includes("/lab-") || /\blab up\b|Lab\.up\(|lab-driver/.test(readFileSync(join(ROOT, f), "utf8"));
    expect(files.filter(bringsUpLab)).toContain("test/integration/standalone-checkout.test.ts");
    expect(Object.keys(lab.files ?? {}).sort()).toEqual(files.filter(bringsUpLab));
    expect(LANES.filter((l) => l.projects.includes(lab.project))).toEqual([
      { name: "lab", projects: ["integration-lab"], alone: true },
    ]);
  });

  it("run every group in exactly one lane, or in shards 1..n of one count, and have one group for the rest", () => {
    expect([...new Set(LANES.flatMap((l) => l.projects))].sort()).toEqual(
      GROUPS.map((g) => g.project).sort(),
    );
    for (const g of GROUPS) {
      const lanes = LANES.filter((l) => l.projects.includes(g.project));
      if (lanes.length === 1 && !lanes[0]!.shard) continue;
      expect(
        lanes.every((l) => l.projects.length === 1 && !l.alone),
        g.project,
      ).toBe(true);
      const count = lanes[0]!.shard?.count;
      expect(
        lanes.map((l) => l.shard),
        g.project,
      ).toEqual(lanes.map((_, i) => ({ index: i + 1, count })));
      expect(count, g.project).toBe(lanes.length);
    }
    expect(GROUPS.filter((g) => !g.files)).toHaveLength(1);
  });

  it("split the light group in two shards beside the heavy lane", () => {
    const light = LANES.filter((l) => l.projects.includes("integration"));
    expect(light.map((l) => [l.name, l.shard, !!l.alone])).toEqual([
      ["light-1", { index: 1, count: 2 }, false],
      ["light-2", { index: 2, count: 2 }, false],
    ]);
  });

  it("give every named file a reason", () => {
    for (const g of GROUPS) for (const [f, why] of Object.entries(g.files ?? {})) expect(why, f).not.toBe("");
  });
});
