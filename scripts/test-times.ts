// `make test`'s last words: merges the test-time parts that the unit, examples and
// integration vitest runs of one `make test` wrote (harness/test-times/reporter.ts) into
// .cache/reports/test-times-<run>.md and .json, and prints the table: wall time per test
// file, slowest first, its test cases and its environment starts, then the starts per
// kind. Reads and writes only under .cache/reports; it must never change an exit status
// of the tests (make keeps theirs) and exits 0 when there is nothing to report.
// Usage: node scripts/test-times.ts [RUN]   (default: $FASTFENCE_TEST_RUN, else the newest run)
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { RunPart } from "../harness/test-times/report.ts";
import { partsDir, RUN_VAR, writeReport } from "../harness/test-times/reporter.ts";

const ROOT = join(import.meta.dirname, "..");
const all = join(ROOT, ".cache/reports/test-times-parts");
const runId =
  process.argv[2] ?? process.env[RUN_VAR] ?? (existsSync(all) ? readdirSync(all).sort().at(-1) : undefined);
const dir = runId ? partsDir(ROOT, runId) : "";
const names = dir && existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".json")) : [];
if (names.length === 0) {
  console.log(`test times: nothing recorded${runId ? ` for run ${runId}` : ""}`);
} else {
  const parts = names.map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")) as RunPart);
  const { path, text } = writeReport(ROOT, parts);
  console.log(`\n${text}\n(${relative(process.cwd(), path)} and .json)`);
}
