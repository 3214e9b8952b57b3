// `make test-integration`: the integration files in lanes (harness/test-lanes.ts says which
// file is where and why), one vitest invocation per lane, each lane one file at a time:
// the heavy lane (pipeline clusters, Kafka faults) beside the light lane's two shards (the
// rest), then the lab lane alone.
// Each line of output is prefixed with its lane; the exit status is 1 when any lane
// failed. FASTFENCE_TEST_LANES=1 runs the lanes one after the other (a loaded machine, a
// bisection). Run on its own (not under `make test`), it prints the lanes' test-time table
// at the end. It must never run two files of one lane at once or hide a lane's failure.
// Usage: node scripts/test-integration.ts [vitest args, e.g. --sequence.shuffle --sequence.seed=7]
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { LANES, type Lane } from "../harness/test-lanes.ts";
import { RUN_VAR, runStamp } from "../harness/test-times/reporter.ts";

const ROOT = join(import.meta.dirname, "..");
const VITEST = join(ROOT, "node_modules/vitest/vitest.mjs");
const extra = process.argv.slice(2);
const sequential = process.env.FASTFENCE_TEST_LANES === "1";
// The lanes' test-time parts belong to one run: `make test`'s, or this one's (merged at the end).
const ownRun = !process.env[RUN_VAR];
if (ownRun) process.env[RUN_VAR] = runStamp(new Date());

/** Runs one lane's vitest; resolves with its exit status (1 when killed by a signal). */
function runLane(lane: Lane, prefix: string): Promise<number> {
  return new Promise((resolve) => {
    const projects = lane.projects.flatMap((p) => ["--project", p]);
    const shard = lane.shard ? [`--shard=${lane.shard.index}/${lane.shard.count}`] : [];
    const child = spawn(
      process.execPath,
      [VITEST, "run", "--passWithNoTests", ...projects, ...shard, ...extra],
      {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    for (const [from, to] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ] as const) {
      const lines = createInterface({ input: from, crlfDelay: Infinity });
      lines.on("line", (line) => to.write(`${prefix}${line}\n`));
    }
    child.on("error", (err) => {
      console.error(`${prefix}could not start vitest: ${err.message}`);
      resolve(1);
    });
    child.on("close", (code) => resolve(code ?? 1));
  });
}

const started = Date.now();
const together = sequential ? [] : LANES.filter((l) => !l.alone);
const oneByOne = LANES.filter((l) => !together.includes(l));
const order = [...together, ...oneByOne];
console.log(
  `== integration: lanes ${[together.map((l) => l.name).join(" + "), ...oneByOne.map((l) => l.name)].filter(Boolean).join(", then ")}`,
);
const codes: number[] = [];
codes.push(...(await Promise.all(together.map((lane) => runLane(lane, `[${lane.name}] `)))));
for (const lane of oneByOne) codes.push(await runLane(lane, `[${lane.name}] `));
const failed = order.filter((_, i) => codes[i] !== 0).map((l) => l.name);
if (ownRun) spawnSync(process.execPath, [join(ROOT, "scripts/test-times.ts")], { stdio: "inherit" });
console.log(
  `== integration: ${failed.length ? `FAILED in lane ${failed.join(", ")}` : "passed"} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
);
process.exit(failed.length ? 1 : 0);
