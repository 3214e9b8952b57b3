// The demo's and the bench's charts, rendered to PNG by a real renderer (resvg, DejaVu Sans
// from npm): no text outside the canvas, no two texts on top of each other, a time axis in
// seconds, every scenario of the bench's RESULT in the chart beside the Kubernetes-only
// baseline and the peers' stated references with their source. Fixtures are RESULT lines
// that `make demo` and `make bench` printed (test/unit/lab/fixtures/, each with its source).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import {
  benchSummaryOf,
  benchSvg,
  type BenchSummary,
  type ScenarioSummary,
} from "../../../lab/bench-chart.ts";
import { timelineSvg } from "../../../lab/chart.ts";
import { demoSvg, type DemoResult } from "../../../lab/demo-chart.ts";
import { STATED_REFERENCES } from "../../../lab/peers.ts";
import { textWidth } from "../../../lab/svg-text.ts";
import { canvasOf, outside, overlapping, renderPng, textBoxes } from "./svg-fit.ts";

const fixture = <T>(name: string): { source: string; result: T }[] =>
  JSON.parse(readFileSync(join(import.meta.dirname, "fixtures", name), "utf8")) as {
    source: string;
    result: T;
  }[];
const DEMOS = fixture<DemoResult>("demo-results.json");
const BENCHES = fixture<{ scenarios: Record<string, unknown> }>("bench-results.json");

/** Set FASTFENCE_SVG_PNG_DIR to keep the PNGs for a look. */
function keep(name: string, png: Buffer): void {
  const dir = process.env.FASTFENCE_SVG_PNG_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.png`), png);
}

/** Renders the chart and checks that all of its text is on the canvas and legible. */
function expectFits(name: string, svg: string): void {
  const canvas = canvasOf(svg);
  const { png, width, height } = renderPng(svg);
  keep(name, png);
  expect(png.subarray(1, 4).toString()).toBe("PNG");
  expect({ width, height }).toEqual(canvas);
  const boxes = textBoxes(svg);
  expect(boxes.length).toBeGreaterThan(5);
  expect(outside(boxes, canvas)).toEqual([]);
  expect(overlapping(boxes)).toEqual([]);
  // The layout's own estimate of each text's width is never below what the renderer draws.
  const attrs = [...svg.matchAll(/<text\b([^>]*)>/g)].map((m) => m[1]!);
  boxes.forEach((b, i) => {
    const size = Number(/font-size="(\d+)"/.exec(attrs[i]!)?.[1] ?? 12);
    const bold = attrs[i]!.includes('font-weight="bold"');
    expect(b.width, b.text).toBeLessThanOrEqual(textWidth(b.text, size, bold));
  });
}

/** The time axis: tick labels in seconds, increasing from left to right. */
function expectSecondsAxis(svg: string): void {
  const ticks = [
    ...svg.matchAll(/<text x="([\d.]+)" y="[\d.]+" text-anchor="middle" fill="#555">([\d.]+) s<\/text>/g),
  ];
  expect(ticks.length).toBeGreaterThanOrEqual(3);
  const xs = ticks.map((t) => Number(t[1]));
  const vs = ticks.map((t) => Number(t[2]));
  expect([...xs].sort((a, b) => a - b)).toEqual(xs);
  expect([...vs].sort((a, b) => a - b)).toEqual(vs);
  expect(svg).toMatch(/seconds from the/);
}

describe("demo chart", () => {
  test.each(DEMOS.map((d, i) => [i, d.source, d.result] as const))(
    "demo %i (%s) fits its canvas",
    (i, _, r) => {
      const svg = demoSvg(r);
      expectFits(`demo-${i}`, svg);
      expectSecondsAxis(svg);
      expect(svg).toContain("workloads released");
      expect(svg).toContain("released goal 4 s");
    },
  );

  test("a demo whose StatefulSet pod ran, with goals close to the milestones", () => {
    const svg = demoSvg({
      ...DEMOS[0]!.result,
      releasedMs: 4010,
      replacementRunningMs: 5990,
      statefulReplacementMs: 61_234,
    });
    expectFits("demo-stateful", svg);
    expect(svg).toContain("StatefulSet pod (RWO) Running");
  });

  test("the chaos timeline (one row per seed) fits too", () => {
    const rows = Array.from({ length: 12 }, (_, i) => ({
      label: `seed ${i + 1} node-${"abc"[i % 3]}`,
      ms: 2_000 + i * 3_700,
    }));
    expectFits(
      "chaos",
      timelineSvg(
        "chaos: release of the broken node per seed",
        rows,
        [],
        "seconds from the schedule's start",
      ),
    );
  });
});

const scenarioGroups = (svg: string) =>
  new Set([...svg.matchAll(/<g data-scenario="([^"]+)">/g)].map((m) => m[1]));

describe("bench chart", () => {
  test.each(BENCHES.map((b, i) => [i, b.source, b.result] as const))(
    "bench %i (%s): fits, every scenario run, the baseline and the references",
    (i, _, result) => {
      const sum = benchSummaryOf(result.scenarios);
      const svg = benchSvg(sum);
      expectFits(`bench-${i}`, svg);
      expectSecondsAxis(svg);
      expect(svg).toContain("(log scale)");
      expect(scenarioGroups(svg)).toEqual(new Set(Object.keys(sum.scenarios)));
      for (const name of Object.keys(sum.scenarios)) expect(svg).toContain(`>${name}: `);
      for (const r of STATED_REFERENCES) {
        expect(svg).toContain(`data-reference="${r.id}"`);
        expect(svg).toContain(`${r.stated}: ${r.what} [${r.source}]`);
      }
      for (const peer of ["Pacemaker", "NodeHealthCheck"]) expect(svg).toContain(peer);
      expect(svg).toContain("Sources: the Peers section of docs/lab.md.");
      expect(svg).toContain('data-baseline="kubernetes"');
      if (sum.baseline)
        expect(svg).toMatch(/Deployment pod Running: p50 350 s \(measured 35.0 s at defaults ÷10, ×10\)/);
      else expect(svg).toContain("not measured in this run");
    },
  );

  test("every scenario of a result shows, power loss and failures included", () => {
    const p = (p50: number, max = p50 * 2) => ({ n: 5, p50, p95: max, p99: max, max });
    const run = (o: Partial<ScenarioSummary>): ScenarioSummary => ({
      trials: 5,
      detectedMs: p(820),
      confirmedMs: p(1_100),
      powerOffConfirmedMs: p(1_600),
      releasedMs: p(2_100, 9_800),
      replacementRunningMs: p(2_300, 11_000),
      safetyViolations: 0,
      trialsWithHealthyNodeFenced: 0,
      ...o,
    });
    const sum: BenchSummary = {
      scenarios: {
        crash: run({ trials: 40 }),
        hang: run({}),
        partition: run({}),
        "power-loss": run({ faulted: true, releasedMs: { n: 4, p50: 7_900, p99: 8_400, max: 8_400 } }),
        "partial-partition-api": run({
          faulted: false,
          detectedMs: { n: 1, p50: 900 },
          releasedMs: { n: 0 },
        }),
        "function-crash": run({ faulted: false, trialsWithHealthyNodeFenced: 1, safetyViolations: 1 }),
        "a-scenario-with-a-rather-long-name-nobody-expected": run({
          releasedMs: { n: 0 },
          replacementRunningMs: { n: 0 },
        }),
        "partial-partition": {
          trials: 0,
          faulted: false,
          safetyViolations: 0,
          trialsWithHealthyNodeFenced: 0,
        },
      },
      baseline: {
        trials: 3,
        scale: 10,
        replacementRunningMsMeasured: [35_000, 48_800, null],
        replacementRunningMsAtRealDefaults: [350_000, 488_000, null],
        statefulReplacementMsMeasured: [null, null, 118_000],
      },
    };
    const svg = benchSvg(sum);
    expectFits("bench-all-scenarios", svg);
    expect(scenarioGroups(svg)).toEqual(new Set(Object.keys(sum.scenarios)));
    expect(svg).toContain("power-loss: 5 trials, 0 safety violations");
    expect(svg).toContain("(1 not released)");
    expect(svg).toContain("a healthy node was fenced in 1 of 5 trials");
    expect(svg).toContain("no node fenced in 5 trials, as it should be (suspected in 1, never confirmed)");
    expect(svg).toContain("not released in any of 5 trials");
    expect(svg).toContain("no trial completed");
    expect(svg).toContain("RWO pod not replaced while followed in 2 of 3 trials");
  });
});
