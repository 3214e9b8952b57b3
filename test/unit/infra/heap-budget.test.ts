// The V8 heap below every shipped container's memory limit (infra/heap-budget.ts; docs/tuning.md
// "Memory: the V8 heap below the container's limit"): the rule on plain data, then every
// overlay under knative/overlays, alone and with every component under knative/components,
// rendered with the real kustomize. A fastfence container (an image of quay.io/fastfence/)
// without NODE_OPTIONS' heap flags, or whose heap does not leave the native headroom below
// its memory limit, fails here, named with its object and overlay.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KNATIVE_DIR, render, renderWith, type KubeObject } from "../../../harness/kustomize.ts";
import {
  heapBudgetProblem,
  memoryQuantityMiB,
  nativeHeadroomMiB,
  v8HeapFlags,
} from "../../../infra/heap-budget.ts";

interface Container {
  name: string;
  image?: string;
  env?: { name: string; value?: string }[];
  resources?: { limits?: { memory?: string } };
}

/** Every container of a pod-bearing object (workloads, Knative Services, CronJobs, Pods). */
function containersOf(o: KubeObject): Container[] {
  const spec = o.spec as Record<string, unknown> | undefined;
  const pods = [
    (spec?.template as { spec?: unknown } | undefined)?.spec,
    (
      (spec?.jobTemplate as { spec?: { template?: { spec?: unknown } } } | undefined)?.spec?.template as
        { spec?: unknown } | undefined
    )?.spec,
    o.kind === "Pod" ? spec : undefined,
  ] as ({ containers?: Container[]; initContainers?: Container[] } | undefined)[];
  return pods.flatMap((p) => [...(p?.containers ?? []), ...(p?.initContainers ?? [])]);
}

const isFastfence = (c: Container) =>
  /(^|\/)fastfence\/fastfence[^/]*$/.test((c.image ?? "").split(/[:@]/)[0]!);

describe("the heap rule on plain data", () => {
  it("reads memory quantities in MiB", () => {
    expect(memoryQuantityMiB("256Mi")).toBe(256);
    expect(memoryQuantityMiB("1Gi")).toBe(1024);
    expect(memoryQuantityMiB("268435456")).toBe(256);
    expect(memoryQuantityMiB("lots")).toBeUndefined();
  });
  it("leaves max(128 MiB, 25 %) outside the heap", () => {
    expect(nativeHeadroomMiB(256)).toBe(128);
    expect(nativeHeadroomMiB(1024)).toBe(256);
  });
  it("counts the young generation as three semi-spaces", () => {
    expect(v8HeapFlags("--max-old-space-size=112 --max-semi-space-size=4")).toEqual({
      oldSpaceMiB: 112,
      semiSpaceMiB: 4,
      heapMiB: 124,
    });
    expect(v8HeapFlags("--max-old-space-size=112")).toEqual({ missing: ["--max-semi-space-size"] });
  });
  it("refuses a missing limit, missing flags, and a heap that eats the headroom", () => {
    const ok = "--max-old-space-size=112 --max-semi-space-size=4";
    expect(heapBudgetProblem({ memoryLimit: "256Mi", nodeOptions: ok })).toBeUndefined();
    expect(heapBudgetProblem({ nodeOptions: ok })).toBe("no memory limit");
    expect(heapBudgetProblem({ memoryLimit: "256Mi" })).toMatch(/no NODE_OPTIONS/);
    expect(heapBudgetProblem({ memoryLimit: "256Mi", nodeOptions: "--max-old-space-size=100" })).toMatch(
      /lacks --max-semi-space-size/,
    );
    // the image's old default: a 192 MiB old space under a 192Mi limit
    expect(
      heapBudgetProblem({
        memoryLimit: "192Mi",
        nodeOptions: "--max-old-space-size=192 --max-semi-space-size=1",
      }),
    ).toMatch(/195 MiB exceeds memory limit 192Mi − headroom 128 MiB = 64 MiB/);
  });
});

const OVERLAYS = readdirSync(join(KNATIVE_DIR, "overlays"));
const COMPONENTS = readdirSync(join(KNATIVE_DIR, "components"));
const renders: [string, () => KubeObject[]][] = OVERLAYS.flatMap((o) => {
  const dir = join(KNATIVE_DIR, "overlays", o);
  return [
    [o, () => render(dir)] as [string, () => KubeObject[]],
    [
      `${o} + components ${COMPONENTS.join(", ")}`,
      () =>
        renderWith(
          [dir],
          COMPONENTS.map((c) => join(KNATIVE_DIR, "components", c)),
        ),
    ] as [string, () => KubeObject[]],
  ];
});

describe("every shipped fastfence container sets its V8 heap below its memory limit", () => {
  it("renders at least the vanilla and openshift overlays", () => {
    expect(OVERLAYS).toEqual(expect.arrayContaining(["vanilla", "openshift"]));
  });
  it.each(renders)("%s", (_name, objects) => {
    const seen: string[] = [];
    const problems: string[] = [];
    for (const o of objects())
      for (const c of containersOf(o).filter(isFastfence)) {
        const where = `${o.kind} ${o.metadata.name} container ${c.name}`;
        seen.push(where);
        const problem = heapBudgetProblem({
          ...(c.resources?.limits?.memory !== undefined ? { memoryLimit: c.resources.limits.memory } : {}),
          ...(c.env?.some((e) => e.name === "NODE_OPTIONS")
            ? { nodeOptions: c.env.find((e) => e.name === "NODE_OPTIONS")!.value ?? "" }
            : {}),
        });
        if (problem) problems.push(`${where}: ${problem}`);
      }
    // the five stages and the event source at least
    expect(seen.length, seen.join("; ")).toBeGreaterThanOrEqual(6);
    expect(problems).toEqual([]);
  });
});
