import { describe, expect, it } from "vitest";
import {
  describeError,
  formatDuration,
  coveredMs,
  formatTestTimes,
  mergeParts,
  type FileTime,
  type RunPart,
} from "../../../harness/test-times/report.ts";
import { runStamp } from "../../../harness/test-times/reporter.ts";

const file = (f: string, wallMs: number, total: number, extra: Partial<FileTime> = {}): FileTime => ({
  project: "integration",
  file: f,
  wallMs,
  state: "passed",
  cases: { total, passed: total, failed: 0, skipped: 0 },
  retries: 0,
  ...extra,
});

const unit: RunPart = {
  runId: "20261206-080000",
  projects: ["unit"],
  startedAt: 1_000,
  wallMs: 40_000,
  reason: "passed",
  files: [file("test/unit/a.test.ts", 300, 12, { project: "unit" })],
  envStarts: [],
};
const integration: RunPart = {
  runId: "20261206-080000",
  projects: ["integration"],
  startedAt: 50_000,
  wallMs: 700_000,
  reason: "failed",
  files: [
    file("test/integration/fast.test.ts", 9_000, 2),
    file("test/integration/slow.test.ts", 125_000, 4, {
      state: "failed",
      cases: { total: 4, passed: 2, failed: 1, skipped: 1 },
      retries: 1,
    }),
    file("test/integration/a|b.test.ts", 9_000, 1),
  ],
  envStarts: [
    {
      kind: "control-plane",
      detail: "apiserver",
      ms: 3_000,
      ok: true,
      at: 1,
      pid: 1,
      file: "test/integration/slow.test.ts",
    },
    {
      kind: "kafka",
      detail: "3 brokers",
      ms: 4_500,
      ok: true,
      at: 2,
      pid: 1,
      file: "test/integration/slow.test.ts",
    },
    {
      kind: "control-plane",
      detail: "apiserver",
      ms: 5_000,
      ok: false,
      at: 3,
      pid: 1,
      file: "test/integration/slow.test.ts",
    },
    {
      kind: "control-plane",
      detail: "apiserver",
      ms: 2_000,
      ok: true,
      at: 4,
      pid: 2,
      file: "test/integration/fast.test.ts",
    },
    { kind: "lab", detail: "3 nodes", ms: 60_000, ok: true, at: 5, pid: 3 },
  ],
};

describe("test-time report", () => {
  it("formats durations in ms, s, and m s", () => {
    expect(formatDuration(450)).toBe("450 ms");
    expect(formatDuration(12_340)).toBe("12.3 s");
    expect(formatDuration(245_000)).toBe("4 m 05 s");
  });

  it("lists the files slowest first, with their cases and starts per kind", () => {
    const t = mergeParts([integration, unit]);
    expect(t.files.map((f) => f.file)).toEqual([
      "test/integration/slow.test.ts",
      "test/integration/a|b.test.ts",
      "test/integration/fast.test.ts",
      "test/unit/a.test.ts",
    ]);
    expect(t.files[0]!.env).toEqual([
      { kind: "control-plane", count: 2, totalMs: 8_000 },
      { kind: "kafka", count: 1, totalMs: 4_500 },
    ]);
    expect(t.invocations.map((i) => i.projects[0])).toEqual(["unit", "integration"]);
    expect(t.kinds[0]).toEqual({
      kind: "lab",
      count: 1,
      totalMs: 60_000,
      files: 0,
      p50Ms: 60_000,
      maxMs: 60_000,
      failed: 0,
    });
    expect(t.kinds[1]).toEqual({
      kind: "control-plane",
      count: 3,
      totalMs: 10_000,
      files: 2,
      p50Ms: 3_000,
      maxMs: 5_000,
      failed: 1,
    });
    expect(t.unattributedStarts).toBe(1);
  });

  it("counts overlapping lanes' wall time once", () => {
    const lane = (startedAt: number, wallMs: number): RunPart => ({ ...integration, startedAt, wallMs });
    // unit 1–41 s; two lanes at once 50–750 s and 60–400 s; the labs 750–800 s
    const md = formatTestTimes(
      mergeParts([unit, lane(50_000, 700_000), lane(60_000, 340_000), lane(750_000, 50_000)]),
    );
    expect(md).toContain(
      "vitest wall time 13 m 10 s: unit 40.0 s, integration 11 m 40 s (failed), integration 5 m 40 s (failed), integration 50.0 s (failed).",
    );
    expect(coveredMs([])).toBe(0);
    expect(
      coveredMs([
        { startedAt: 0, wallMs: 10 },
        { startedAt: 2, wallMs: 3 },
        { startedAt: 20, wallMs: 5 },
      ]),
    ).toBe(15);
  });

  it("prints the Markdown table", () => {
    const md = formatTestTimes(mergeParts([unit, integration]));
    const lines = md.split("\n");
    expect(lines[0]).toBe("# Test times, run 20261206-080000");
    expect(md).toContain("4 files, 19 test cases (17 passed, 1 failed, 1 skipped).");
    expect(md).toContain("vitest wall time 12 m 20 s: unit 40.0 s, integration 11 m 40 s (failed).");
    const rows = lines.filter((l) => /^\| \d+ \|/.test(l));
    expect(rows).toEqual([
      "| 1 | test/integration/slow.test.ts | integration | 2 m 05 s | 87.2 % | 4 | 2/1/1, 1 retry | control-plane 2× 8.0 s, kafka 1× 4.5 s |",
      "| 2 | test/integration/a\\|b.test.ts | integration | 9.0 s | 6.3 % | 1 | 1/0/0 | – |",
      "| 3 | test/integration/fast.test.ts | integration | 9.0 s | 6.3 % | 2 | 2/0/0 | control-plane 1× 2.0 s |",
      "| 4 | test/unit/a.test.ts | unit | 300 ms | 0.2 % | 12 | 12/0/0 | – |",
    ]);
    expect(md).toContain("| control-plane | 3 | 2 | 10.0 s | 3.0 s | 5.0 s | 1 |");
    expect(md).toContain("1 start(s) ran outside a known test file");
  });

  it("ends with the failed files and their first errors, a hook's failure among them", () => {
    const hookFailed = file("test/integration/hook.test.ts", 5_000, 6, {
      state: "failed",
      cases: { total: 6, passed: 0, failed: 0, skipped: 6 },
      failures: [
        {
          where: "shared plane",
          message: "EnvError: control plane failed to start ← Error: listen EADDRINUSE",
        },
      ],
    });
    const silent = file("test/integration/silent.test.ts", 1_000, 1, {
      state: "failed",
      cases: { total: 1, passed: 0, failed: 0, skipped: 1 },
    });
    const many = file("test/integration/many.test.ts", 1_000, 5, {
      state: "failed",
      cases: { total: 5, passed: 0, failed: 5, skipped: 0 },
      failures: [1, 2, 3, 4, 5].map((i) => ({ where: `case ${i}`, message: `AssertionError: ${i}` })),
    });
    const md = formatTestTimes(
      mergeParts([{ ...integration, files: [hookFailed, file("x.test.ts", 1, 1), silent, many] }]),
    );
    const tail = md.trimEnd().split("\n").slice(-11);
    expect(tail).toEqual([
      "Failed files (3):",
      "",
      "- test/integration/hook.test.ts (integration): 0 failed, 6 skipped of 6",
      "  - shared plane: EnvError: control plane failed to start ← Error: listen EADDRINUSE",
      "- test/integration/many.test.ts (integration): 5 failed, 0 skipped of 5",
      "  - case 1: AssertionError: 1",
      "  - case 2: AssertionError: 2",
      "  - case 3: AssertionError: 3",
      "  - and 2 more",
      "- test/integration/silent.test.ts (integration): 0 failed, 1 skipped of 1",
      "  - (no error recorded: see the vitest output above)",
    ]);
    expect(formatTestTimes(mergeParts([unit]))).not.toContain("Failed files");
  });

  it("describes an error by each message's first line, causes after, bounded", () => {
    const cause = { name: "Error", message: "listen EADDRINUSE: 127.0.0.1:4001\n    at x" };
    expect(describeError({ name: "EnvError", message: "control plane failed to start", cause })).toBe(
      "EnvError: control plane failed to start ← listen EADDRINUSE: 127.0.0.1:4001",
    );
    expect(describeError({ message: "x".repeat(400) })).toHaveLength(300);
    expect(describeError({ name: "TypeError" })).toBe("TypeError: ");
  });

  it("an empty run prints a table without rows", () => {
    const md = formatTestTimes(mergeParts([]));
    expect(md).toContain("0 files, 0 test cases");
    expect(md).not.toContain("per kind");
  });

  it("names a run by its UTC time", () => {
    expect(runStamp(new Date("2026-12-06T07:45:12.345Z"))).toBe("20261206-074512");
  });
});
