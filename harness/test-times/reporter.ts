// The vitest reporter behind the test-time report (registered in vitest.config.ts beside
// vitest's own): at the end of a run it writes one part — every test file's wall time,
// state and test cases, and the environment starts the harness recorded for it — to
// .cache/reports/test-times-parts/<run>/. Under `make test` (FASTFENCE_TEST_RUN set) the
// parts of unit, examples and integration are merged and printed by scripts/test-times.ts;
// a vitest run on its own writes its own .cache/reports/test-times-<run>.md/.json and
// prints where. It only observes: it must never change a test's outcome, fail the run (an
// error writing the report is printed, not thrown) or add work while tests run.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { Reporter, TestModule, TestRunEndReason, Vitest } from "vitest/node";
import { ENV_TIMES_VAR, type EnvStartRecord } from "../env/start-times.ts";
import {
  describeError,
  formatTestTimes,
  mergeParts,
  type CaseCounts,
  type CaseTime,
  type FileFailure,
  type FileTime,
  type RunPart,
} from "./report.ts";

/** Set by `make test` for every vitest invocation of one run (scripts/test-times.ts merges them). */
export const RUN_VAR = "FASTFENCE_TEST_RUN";

/** 20261206-074512 (UTC): sorts by time, safe in a file name. */
export function runStamp(at: Date): string {
  return at
    .toISOString()
    .replace(/\.\d+Z$/, "")
    .replace(/[-:]/g, "")
    .replace("T", "-");
}

export function partsDir(root: string, runId: string): string {
  return join(root, ".cache/reports/test-times-parts", runId);
}

/** Writes the run's .md and .json under .cache/reports; returns the .md path and its text. */
export function writeReport(root: string, parts: RunPart[]): { path: string; text: string } {
  const times = mergeParts(parts);
  const base = join(root, ".cache/reports", `test-times-${times.runId}`);
  const text = formatTestTimes(times);
  writeFileSync(`${base}.json`, `${JSON.stringify(times, null, 2)}\n`);
  writeFileSync(`${base}.md`, text);
  return { path: `${base}.md`, text };
}

/** At most this many errors recorded per file. */
const RECORDED_FAILURES = 10;

/** The file's own errors, its suites' hook errors and its failed cases' errors, in that order. */
function failuresOf(m: TestModule): FileFailure[] {
  const out: FileFailure[] = m.errors().map((e) => ({ where: "(file)", message: describeError(e) }));
  for (const s of m.children.allSuites())
    out.push(...s.errors().map((e) => ({ where: s.fullName, message: describeError(e) })));
  for (const t of m.children.allTests()) {
    const r = t.result();
    if (r.state === "failed")
      out.push(...r.errors.map((e) => ({ where: t.fullName, message: describeError(e) })));
  }
  return out.slice(0, RECORDED_FAILURES);
}

function fileTime(root: string, m: TestModule): FileTime {
  const d = m.diagnostic();
  const cases: CaseCounts = { total: 0, passed: 0, failed: 0, skipped: 0 };
  const caseTimes: CaseTime[] = [];
  let retries = 0;
  for (const t of m.children.allTests()) {
    cases.total++;
    const state = t.result().state;
    caseTimes.push({ name: t.fullName, state, ms: Math.round(t.diagnostic()?.duration ?? 0) });
    if (state === "passed") cases.passed++;
    else if (state === "failed") cases.failed++;
    else if (state === "skipped") cases.skipped++;
    retries += t.diagnostic()?.retryCount ?? 0;
  }
  return {
    project: m.project.name,
    file: relative(root, m.moduleId),
    wallMs: Math.round(
      d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration,
    ),
    state: m.state(),
    cases,
    retries,
    caseTimes,
    ...(m.state() === "failed" || cases.failed > 0 ? { failures: failuresOf(m) } : {}),
  };
}

function readStarts(root: string, path: string): EnvStartRecord[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .flatMap((l) => {
      try {
        const r = JSON.parse(l) as EnvStartRecord;
        return [{ ...r, ...(r.file ? { file: relative(root, r.file) } : {}) }];
      } catch {
        return [];
      }
    });
}

export default class TestTimesReporter implements Reporter {
  private root = process.cwd();
  private runId = "";
  private own = false;
  private envFile = "";
  private startedAt = 0;

  onInit(vitest: Vitest): void {
    try {
      this.root = vitest.config.root;
      this.own = !process.env[RUN_VAR];
      this.runId = process.env[RUN_VAR] || runStamp(new Date());
      const dir = partsDir(this.root, this.runId);
      mkdirSync(dir, { recursive: true });
      // The harness appends its starts here; the test processes inherit the variable.
      this.envFile = join(dir, `env-${process.pid}.jsonl`);
      process.env[ENV_TIMES_VAR] = this.envFile;
    } catch (err) {
      console.error(`test times: not recorded (${String(err)})`);
    }
  }

  onTestRunStart(): void {
    this.startedAt = Date.now();
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, _errors: unknown, reason: TestRunEndReason): void {
    if (!this.envFile) return;
    try {
      const files = modules.map((m) => fileTime(this.root, m));
      const part: RunPart = {
        runId: this.runId,
        projects: [...new Set(files.map((f) => f.project))].sort(),
        startedAt: this.startedAt,
        wallMs: Date.now() - this.startedAt,
        reason,
        files,
        envStarts: readStarts(this.root, this.envFile),
      };
      const dir = partsDir(this.root, this.runId);
      writeFileSync(
        join(dir, `${part.projects.join("+") || "none"}-${process.pid}.json`),
        JSON.stringify(part),
      );
      if (this.own) {
        const { path } = writeReport(this.root, [part]);
        console.log(`test times (slowest file first): ${relative(process.cwd(), path)}`);
      }
    } catch (err) {
      console.error(`test times: not written (${String(err)})`);
    }
  }
}
