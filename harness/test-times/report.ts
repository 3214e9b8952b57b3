// The test-time report of `make test`, from plain data: merges what each vitest invocation
// recorded (unit, examples, integration: one part each) with the harness's environment
// starts, and formats the Markdown table — wall time per test file, slowest first, its
// test cases, and where its environment starts went — plus the starts per kind. Pure: no
// I/O, no clock; harness/test-times/reporter.ts records the parts and scripts/test-times.ts
// reads and writes the files. It must never decide a test's outcome.
import type { EnvKind, EnvStartRecord } from "../env/start-times.ts";

/** Test cases of one file by result (a retried case counts once, by its final result). */
export interface CaseCounts {
  total: number;
  passed: number;
  failed: number;
  skipped: number;
}

/** One test file as one vitest invocation saw it. */
export interface FileTime {
  project: string;
  /** Relative to the checkout, e.g. test/integration/bus-kafka.test.ts. */
  file: string;
  /** From the file's set-up to its last afterAll (vitest's module diagnostic), ms. */
  wallMs: number;
  /** vitest's module state: passed, failed, skipped, … */
  state: string;
  cases: CaseCounts;
  /** Retries run for the file's cases (each retry is one more run of a case). */
  retries: number;
  /** Each case's own duration (the .json only: where a slow file spends its time). */
  caseTimes?: CaseTime[];
  /** A failed file's first errors: where (a case, a hook's suite, the file) and the message's first line. */
  failures?: FileFailure[];
}

/** One error of a failed file, as the end of the report shows it. */
export interface FileFailure {
  /** The failed case's full name, the suite whose hook failed, or "(file)" for the file's own errors. */
  where: string;
  /** The error's name and the first line of its message. */
  message: string;
}

/** One test case's name (describe path joined by " > "), final state and duration, ms. */
export interface CaseTime {
  name: string;
  state: string;
  ms: number;
}

/** An environment start, its file made relative to the checkout. */
export type EnvStart = Omit<EnvStartRecord, "file"> & { file?: string };

/** What one vitest invocation recorded. */
export interface RunPart {
  runId: string;
  /** The projects this invocation ran, e.g. ["integration"]. */
  projects: string[];
  /** Epoch ms. */
  startedAt: number;
  /** The invocation's wall time, ms. */
  wallMs: number;
  /** vitest's end reason: passed, failed, interrupted. */
  reason: string;
  files: FileTime[];
  envStarts: EnvStart[];
}

export interface KindTotal {
  kind: EnvKind;
  count: number;
  totalMs: number;
}

export interface FileRow extends FileTime {
  /** Environment starts recorded for this file, per kind, most total time first. */
  env: KindTotal[];
}

export interface KindRow extends KindTotal {
  /** Files that started it at least once. */
  files: number;
  p50Ms: number;
  maxMs: number;
  failed: number;
}

export interface TestTimes {
  runId: string;
  /** Oldest first; lanes of one run overlap (scripts/test-integration.ts). */
  invocations: { projects: string[]; startedAt: number; wallMs: number; reason: string }[];
  /** Slowest first. */
  files: FileRow[];
  /** Most total time first. */
  kinds: KindRow[];
  /** Starts recorded outside any known test file (collection time, a child without the file). */
  unattributedStarts: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return 0;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : Math.round((s[m - 1]! + s[m]!) / 2);
};

/** Merges the parts of one run (one part per vitest invocation). */
export function mergeParts(parts: RunPart[]): TestTimes {
  const starts = parts.flatMap((p) => p.envStarts);
  const byFile = new Map<string, EnvStart[]>();
  for (const s of starts) if (s.file) byFile.set(s.file, [...(byFile.get(s.file) ?? []), s]);
  const files: FileRow[] = parts
    .flatMap((p) => p.files)
    .map((f) => {
      const env: KindTotal[] = [];
      for (const s of byFile.get(f.file) ?? []) {
        const k = env.find((e) => e.kind === s.kind);
        if (k) {
          k.count++;
          k.totalMs += s.ms;
        } else env.push({ kind: s.kind, count: 1, totalMs: s.ms });
      }
      return { ...f, env: env.sort((a, b) => b.totalMs - a.totalMs) };
    })
    .sort((a, b) => b.wallMs - a.wallMs || a.file.localeCompare(b.file));
  const kinds = new Map<EnvKind, EnvStart[]>();
  for (const s of starts) kinds.set(s.kind, [...(kinds.get(s.kind) ?? []), s]);
  const known = new Set(files.map((f) => f.file));
  return {
    runId: parts[0]?.runId ?? "",
    invocations: [...parts]
      .sort((a, b) => a.startedAt - b.startedAt)
      .map((p) => ({ projects: p.projects, startedAt: p.startedAt, wallMs: p.wallMs, reason: p.reason })),
    files,
    kinds: [...kinds.entries()]
      .map(([kind, ss]) => ({
        kind,
        count: ss.length,
        totalMs: ss.reduce((n, s) => n + s.ms, 0),
        files: new Set(ss.map((s) => s.file).filter(Boolean)).size,
        p50Ms: median(ss.map((s) => s.ms)),
        maxMs: Math.max(...ss.map((s) => s.ms)),
        failed: ss.filter((s) => !s.ok).length,
      }))
      .sort((a, b) => b.totalMs - a.totalMs || a.kind.localeCompare(b.kind)),
    unattributedStarts: starts.filter((s) => !s.file || !known.has(s.file)).length,
  };
}

/** Wall time covered by the invocations together: overlapping lanes count once. */
export function coveredMs(spans: { startedAt: number; wallMs: number }[]): number {
  let total = 0;
  let end = -Infinity;
  for (const s of [...spans].sort((a, b) => a.startedAt - b.startedAt)) {
    const to = s.startedAt + s.wallMs;
    if (to <= end) continue;
    total += to - Math.max(s.startedAt, end);
    end = to;
  }
  return total;
}

/** 450 ms, 12.3 s, 4 m 05 s. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const s = Math.round(ms / 1_000);
  return `${Math.floor(s / 60)} m ${String(s % 60).padStart(2, "0")} s`;
}

const cell = (s: string): string => s.replace(/\|/g, "\\|");

/** The report as Markdown: totals, the per-file table (slowest first), the starts per kind. */
export function formatTestTimes(t: TestTimes): string {
  const sum = t.files.reduce((n, f) => n + f.wallMs, 0);
  const cases = t.files.reduce(
    (c, f) => ({
      total: c.total + f.cases.total,
      passed: c.passed + f.cases.passed,
      failed: c.failed + f.cases.failed,
      skipped: c.skipped + f.cases.skipped,
    }),
    { total: 0, passed: 0, failed: 0, skipped: 0 },
  );
  const wall = coveredMs(t.invocations);
  const lines = [
    `# Test times, run ${t.runId}`,
    "",
    `${t.files.length} file${t.files.length === 1 ? "" : "s"}, ${cases.total} test cases (${cases.passed} passed, ${cases.failed} failed, ${cases.skipped} skipped).`,
    `vitest wall time ${formatDuration(wall)}: ` +
      t.invocations
        .map(
          (i) =>
            `${i.projects.join("+")} ${formatDuration(i.wallMs)}${i.reason === "passed" ? "" : ` (${i.reason})`}`,
        )
        .join(", ") +
      ".",
    "",
    "| # | file | project | wall | share | cases | passed/failed/skipped | environment starts |",
    "| ---: | --- | --- | ---: | ---: | ---: | --- | --- |",
    ...t.files.map((f, i) => {
      const share = sum > 0 ? `${((100 * f.wallMs) / sum).toFixed(1)} %` : "–";
      const env = f.env.map((e) => `${e.kind} ${e.count}× ${formatDuration(e.totalMs)}`).join(", ") || "–";
      const retried = f.retries ? `, ${f.retries} retr${f.retries === 1 ? "y" : "ies"}` : "";
      return `| ${i + 1} | ${cell(f.file)} | ${f.project} | ${formatDuration(f.wallMs)} | ${share} | ${f.cases.total} | ${f.cases.passed}/${f.cases.failed}/${f.cases.skipped}${retried} | ${env} |`;
    }),
  ];
  if (t.kinds.length) {
    lines.push(
      "",
      "Environment starts per kind (a pipeline-cluster start includes its own control-plane, kafka and kwok starts, also counted under those kinds):",
      "",
      "| kind | starts | files | total | p50 | max | failed |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
      ...t.kinds.map(
        (k) =>
          `| ${k.kind} | ${k.count} | ${k.files} | ${formatDuration(k.totalMs)} | ${formatDuration(k.p50Ms)} | ${formatDuration(k.maxMs)} | ${k.failed} |`,
      ),
    );
  }
  if (t.unattributedStarts)
    lines.push("", `${t.unattributedStarts} start(s) ran outside a known test file (not in the file rows).`);
  lines.push(...failedFiles(t.files));
  return `${lines.join("\n")}\n`;
}

/** What describeError reads of an error vitest serialized. */
export interface ErrorLike {
  name?: string;
  message?: string;
  cause?: unknown;
}

const MESSAGE_CHARS = 300;

/** "EnvError: control plane failed to start ← Error: spawn ENOENT": each message's first line, causes after. */
export function describeError(err: ErrorLike): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; depth < 3 && e && typeof e === "object"; depth++) {
    const { name, message } = e as ErrorLike;
    const first = String(message ?? "")
      .split("\n")[0]!
      .replace(/^Caused by: /, "")
      .trim();
    parts.push(name && name !== "Error" ? `${name}: ${first}` : first || String(name ?? "error"));
    e = (e as ErrorLike).cause;
  }
  const text = parts.join(" ← ");
  return text.length > MESSAGE_CHARS ? `${text.slice(0, MESSAGE_CHARS - 1)}…` : text;
}

/** At most this many errors shown per failed file (the .json keeps what the reporter recorded). */
const SHOWN_FAILURES = 3;

/**
 * The failed files and their first errors, last in the report: the end of a CI log is
 * what a reader sees first, and a file that failed in a hook shows no failed case above.
 */
function failedFiles(files: FileRow[]): string[] {
  const failed = files.filter((f) => f.state === "failed" || f.cases.failed > 0);
  if (failed.length === 0) return [];
  const out = ["", `Failed files (${failed.length}):`, ""];
  for (const f of [...failed].sort((a, b) => a.file.localeCompare(b.file))) {
    out.push(
      `- ${f.file} (${f.project}): ${f.cases.failed} failed, ${f.cases.skipped} skipped of ${f.cases.total}`,
    );
    const shown = (f.failures ?? []).slice(0, SHOWN_FAILURES);
    for (const e of shown) out.push(`  - ${e.where}: ${e.message}`);
    const more = (f.failures?.length ?? 0) - shown.length;
    if (more > 0) out.push(`  - and ${more} more`);
    if (shown.length === 0) out.push("  - (no error recorded: see the vitest output above)");
  }
  return out;
}
