// chaos (`make chaos`): seeded, randomized fault schedules on the lab (lab/chaos-schedule.ts)
// — node crash, hang and resume, full and partial partitions, BMC slow (2-8 s a call; the
// lab's policy set for it, lab/timeouts.ts) / stuck / unreachable / lying, function replicas
// (back after FUNCTION_RESTART_MS) and event sources crashed, brokers killed, pipeline
// records replayed (lab/replay.ts), several per schedule and overlapping — each followed by
// the invariant checker (S1–S6 and "no healthy node fenced", lab/invariants.ts) and the
// liveness checker (lab/liveness.ts, bounds from the policy in force). A failing seed is
// replayed with `--seed S --schedules 1`. Runs over seed ranges can be split across
// sittings and their RESULT lines merged with `--merge LOG...`. Report: Markdown + SVG
// under .cache/reports/; the last line is `RESULT {json}`. The lab runs the compact control
// plane (the customer's shape) unless `--control-plane host`.
//   node bench/chaos.ts [--schedules 6] [--seed 1] [--control-plane compact|host]  |  --merge LOG...
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { resolvePolicy } from "../core/policy.ts";
import { stageNames } from "../functions/registry.ts";
import {
  describe,
  REPLAY_NODE,
  SCHEDULE_MS,
  FUNCTION_RESTART_MS,
  mayBeFenced,
  scheduleFor,
  type ChaosStep,
  type Schedule,
} from "../lab/chaos-schedule.ts";
import type { NodeFence } from "../core/incident.ts";
import { listIncidents } from "../lab/event-log.ts";
import { brokerKill } from "../lab/faults.ts";
import type { BmcLieFinding } from "../lab/bmc-lies.ts";
import { replayRecords } from "../lab/replay.ts";
import { Lab, SLOW_BMC_TIMEOUTS } from "../lab/lab.ts";
import { checkLiveness, timingsOf, type LivenessVerdict, type Timings } from "../lab/liveness.ts";
import { timelineSvg } from "../lab/chart.ts";
import { writeReport } from "../lab/report.ts";
import type { ScenarioSpec } from "../lab/scenarios.ts";
import { readState, tearDownOnSignals, teardownFromState } from "../lab/state.ts";
import { check } from "../lab/trial-check.ts";
import { resetAfter, startOf } from "../lab/trial.ts";
import type { Violation } from "../lab/invariants.ts";
import { withCauses } from "../lab/error-text.ts";
import { mergeResults, resultOfLog, type ChaosResult } from "../lab/chaos-result.ts";
import type { ControlPlaneMode } from "../lab/types.ts";

const { values } = parseArgs({
  options: {
    schedules: { type: "string" },
    seed: { type: "string" },
    merge: { type: "boolean" },
    "control-plane": { type: "string" },
  },
  allowPositionals: true,
});

const controlPlane = ((p: string): ControlPlaneMode => {
  if (p === "compact" || p === "host") return p;
  throw new Error(`--control-plane takes compact or host, not ${p}`);
})(values["control-plane"] ?? "compact");
const t0 = Date.now();
const say = (l: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s] ${l}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
/** How long the schedule waits for a step before going on with the next (it finishes in the background). */
const INJECT_WAIT_MS = 2_000;
/** How long, after following, the checks wait for steps still finishing (then name them as errors). */
const STEP_FINISH_MS = 60_000;
let lab: Lab | undefined;
tearDownOnSignals(["SIGINT", "SIGTERM"], 130);

/** Runs one step of a schedule on the lab. */
async function inject(l: Lab, s: ChaosStep): Promise<void> {
  switch (s.kind) {
    case "crash":
      return void (await l.crash(s.node));
    case "hang":
      return void l.hang(s.node);
    case "resume":
      return void l.resume(s.node);
    case "partition":
      return void (await l.partition(s.node));
    case "heal":
    case "partial-heal":
      return void (await l.heal(s.node));
    case "partial":
      return void (await l.partialPartition(s.node, s.mode));
    case "bmc":
      return l.bmcFault(s.node, s.fault, s.latencyMs);
    case "fn-crash":
      return void (await l.functionCrash(s.node, stageNames(), {
        restartFunctionsAfterMs: FUNCTION_RESTART_MS,
      }));
    case "source-crash":
      return void (await l.functionCrash(s.node, [], { source: true, restartSource: true }));
    case "broker-kill":
      return void brokerKill(l, s.node);
    case "replay": {
      const n = await replayRecords(l, s.windowMs);
      return void l.log(`  replayed ${JSON.stringify(n)}`);
    }
  }
}

interface Outcome {
  schedule: Schedule;
  verdict: LivenessVerdict;
  violations: Violation[];
  bmcLied: BmcLieFinding[];
  errors: string[];
  followedMs: number;
}

async function runSchedule(l: Lab, schedule: Schedule, timings: Timings, n: number): Promise<Outcome> {
  const start = await startOf(l, Date.now());
  const errors: string[] = [];
  const tStart = Date.now();
  const pending = [...schedule.steps];
  let cutOff = false;
  /** Every step injected, and whether it has finished (a step still running at the reset is named). */
  const injected: { step: ChaosStep; at: number; settled: boolean; done: Promise<unknown> }[] = [];
  const bound = checkLiveness({ schedule, t0: tStart, now: tStart, incidents: [], timings }).releaseBoundMs;
  const end = Math.max(SCHEDULE_MS, (bound ?? 0) + 2_000);
  // Inject every step on time; after the last one, stop following once everything settled.
  for (;;) {
    const now = Date.now() - tStart;
    while (pending[0] && pending[0].at <= now) {
      const s = pending.shift()!;
      say(`  #${n} +${(now / 1000).toFixed(1)}s ${s.kind} ${s.node}`);
      // A step may take long to complete (stopping replicas whose broker just died): the
      // schedule goes on after INJECT_WAIT_MS and the step finishes in the background.
      const entry = { step: s, at: now, settled: false, done: Promise.resolve() as Promise<unknown> };
      entry.done = inject(l, s)
        .catch((err: unknown) => {
          // once the reset began, a late failure is the reset's doing (named below instead)
          if (!cutOff) errors.push(`${s.kind} ${s.node}: ${withCauses(err)}`);
        })
        .finally(() => (entry.settled = true));
      injected.push(entry);
      await Promise.race([entry.done, sleep(INJECT_WAIT_MS)]);
    }
    if (now >= end) break;
    if (!pending.length && now > (schedule.steps.at(-1)?.at ?? 0) + 5_000) {
      const incidents = (await listIncidents(l)).filter((i) => !start.before.has(i.metadata.name));
      const v = checkLiveness({ schedule, t0: tStart, now: Date.now(), incidents, timings });
      const open = incidents.some((i) => ["Confirmed", "Fencing"].includes(i.status?.phase ?? ""));
      const done = v.releaseBoundMs === undefined || v.releasedMs !== undefined;
      if (done && !open && now > SCHEDULE_MS / 3) break;
    }
    await sleep(Math.min(1_000, (pending[0]?.at ?? end) - now));
  }
  const followedMs = Date.now() - tStart;
  // Steps still finishing (at most one more minute), before the checks and the reset.
  await Promise.race([Promise.all(injected.map((x) => x.done)), sleep(STEP_FINISH_MS)]);
  cutOff = true;
  for (const x of injected.filter((y) => !y.settled))
    errors.push(
      `${x.step.kind} ${x.step.node}: still running ${Math.round((Date.now() - tStart - x.at) / 1000)} s after it was injected, when the checks began`,
    );
  const spec: ScenarioSpec = {
    faulted: schedule.broken !== undefined,
    baseline: false,
    fault: async () => tStart,
    powerCycle: true,
  };
  const victim = schedule.broken ?? l.nodes[0]!.name;
  // A check that cannot read (the event log, the API) is this schedule's error, never the
  // end of the run: the schedules so far keep their results, and the next one runs.
  const mayBe = mayBeFenced(schedule, controlPlane);
  const checked = await check(l, spec, { victim, start, withObservations: false, mayBeFenced: mayBe }).catch(
    (err: unknown) => {
      errors.push(`check: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    },
  );
  const incidents =
    checked?.incidents ??
    (await listIncidents(l).catch(() => [])).filter((i) => !start.before.has(i.metadata.name));
  const verdict = checkLiveness({ schedule, t0: tStart, now: Date.now(), incidents, timings });
  for (const i of incidents.filter((x) => mayBe.includes(x.spec.nodeName) && x.status?.attempts?.length))
    say(
      `  #${n} ${i.spec.nodeName} cut off from its peers (and the etcd quorum) was fenced: allowed, not a violation`,
    );
  // A failing schedule's incidents as they ended, for the diagnosis (times from the schedule's start).
  if (verdict.failures.length || checked?.violations.length)
    for (const i of incidents) say(`  #${n} ${incidentStory(i, tStart)}`);
  await reset(l, schedule, n).catch((err: unknown) =>
    errors.push(`reset: ${err instanceof Error ? err.message : String(err)}`),
  );
  for (const lie of checked?.bmcLied ?? [])
    say(
      `  #${n} BMC lie (not a violation): ${lie.node} ${lie.incident}: ${lie.detail}; noticed ${lie.noticed}`,
    );
  return {
    schedule,
    verdict,
    violations: checked?.violations ?? [],
    bmcLied: checked?.bmcLied ?? [],
    errors,
    followedMs,
  };
}

/** One line: an incident's end state, its milestones and every attempt, in ms from `t0`. */
function incidentStory(i: NodeFence, t0: number): string {
  const rel = (iso: string | undefined) => (iso ? `${Date.parse(iso) - t0}` : "-");
  const st = i.status;
  const times = Object.entries(st?.timestamps ?? {})
    .map(([k, v]) => `${k} ${rel(v as string)}`)
    .join(", ");
  const attempts = (st?.attempts ?? [])
    .map(
      (a) =>
        `r${a.round ?? "?"} ${a.driver} ${a.result}${a.errorCode ? ` ${a.errorCode}` : ""} ${rel(a.startedAt)}..${rel(a.finishedAt)}`,
    )
    .join("; ");
  return `incident ${i.metadata.name}: ${st?.phase} ${st?.reason ?? ""} round ${st?.round ?? "-"} (${times}); attempts: ${attempts || "none"}; ${st?.message ?? ""}`;
}

/** Undo every fault of the schedule, power nodes back, and wait until the lab is healthy. */
async function reset(l: Lab, s: Schedule, n: number): Promise<void> {
  const touched = [...new Set(s.steps.map((x) => x.node))].filter((x) => x !== REPLAY_NODE);
  for (const node of touched) {
    l.resume(node);
    await l.heal(node);
    if (s.steps.some((x) => x.kind === "bmc" && x.node === node)) await l.bmcFault(node, "none");
  }
  // A healthy node whose broker was killed is power-cycled first, without waiting for it:
  // every node's reset below waits for all brokers, this one's included.
  const brokerKilled = touched.filter(
    (x) => x !== s.broken && s.steps.some((y) => y.kind === "broker-kill" && y.node === x),
  );
  for (const node of brokerKilled) await l.powerCycle(node);
  // The broken node first: the others' reset waits for every broker, its own included.
  if (s.broken) await resetAfter(l, "crash", s.broken, `-c${n}`);
  // A node whose function replicas or event source were crashed is power-cycled (they start
  // at boot); one cycled above is only waited for.
  const restarts = new Set(["fn-crash", "source-crash"]);
  for (const node of touched.filter((x) => x !== s.broken)) {
    const crashed =
      !brokerKilled.includes(node) && s.steps.some((x) => restarts.has(x.kind) && x.node === node);
    await resetAfter(l, crashed ? "function-crash" : "partial-partition", node, `-c${n}`);
  }
}

function report(outcomes: Outcome[], timings: Timings): string[] {
  const lines = [
    `# make chaos — ${new Date(t0).toISOString()}`,
    "",
    `Timings from the policy (ms): ${JSON.stringify(timings)}; control plane: ${controlPlane}`,
    "",
    "| seed | schedule | broken | release bound | released | followed | violations | liveness | errors |",
    "|---:|---|---|---:|---:|---:|---|---|---|",
  ];
  for (const o of outcomes)
    lines.push(
      `| ${o.schedule.seed} | ${describe(o.schedule)} | ${o.schedule.broken ?? "-"} | ${o.verdict.releaseBoundMs ?? `- (${o.verdict.noReleaseBecause})`} | ${o.verdict.releasedMs ?? "-"} | ${o.followedMs} | ${o.violations.map((v) => `${v.rule}: ${v.detail}`).join("; ") || "0"}${o.bmcLied.length ? ` (and ${o.bmcLied.length} release on a lying BMC, not counted)` : ""} | ${o.verdict.failures.map((f) => `${f.rule} ${f.node}: ${f.detail}`).join("; ") || "ok"} | ${o.errors.join("; ")} |`,
    );
  const svg = timelineSvg(
    "chaos: release of the broken node per seed (its bound is in the table)",
    outcomes
      .filter((o) => o.verdict.releasedMs !== undefined)
      .map((o) => ({
        label: `seed ${o.schedule.seed} ${o.schedule.broken ?? ""}`,
        ms: o.verdict.releasedMs!,
      })),
    [],
    "seconds from the schedule's start",
  );
  return writeReport(`chaos-${new Date(t0).toISOString().replace(/[:.]/g, "-")}`, {
    md: lines.join("\n") + "\n",
    svg,
  });
}

async function main(): Promise<number> {
  if (values.merge) {
    const logs = process.argv.slice(2).filter((a) => !a.startsWith("--"));
    const merged = mergeResults(logs.map((f) => resultOfLog(f, readFileSync(f, "utf8"))));
    console.log(`RESULT ${JSON.stringify(merged)}`);
    return merged.violations || merged.livenessFailures || merged.errors ? 1 : 0;
  }
  const n = Number(values.schedules ?? 6);
  const seed0 = Number(values.seed ?? 1);
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(seed0))
    throw new Error(`--schedules takes a positive integer and --seed an integer`);
  lab = await Lab.up({
    nodes: 3,
    bmc: "mixed",
    log: say,
    workloads: false,
    timeouts: SLOW_BMC_TIMEOUTS,
    controlPlane,
  });
  const policy = resolvePolicy(
    (
      (await lab.custom.getClusterCustomObject({
        group: "fastfence.io",
        version: "v1alpha1",
        plural: "fencingpolicies",
        name: "default",
      })) as { spec?: unknown }
    ).spec,
  );
  const timings = timingsOf(policy);
  say(`timings from the policy (ms): ${JSON.stringify(timings)}`);
  const outcomes: Outcome[] = [];
  const faults: Record<string, number> = {};
  try {
    for (let i = 0; i < n; i++) {
      const schedule = scheduleFor(
        seed0 + i,
        lab.nodes.map((x) => ({ name: x.name, bmc: x.bmc })),
      );
      say(`schedule ${i + 1}/${n} seed ${schedule.seed}: ${describe(schedule)}`);
      for (const s of schedule.steps) {
        const k = s.kind === "bmc" ? `bmc-${s.fault}` : s.kind;
        faults[k] = (faults[k] ?? 0) + 1;
      }
      // A schedule that fails outside its checks (the lab itself) is reported as an error
      // and the run goes on, so no finished schedule's result is lost; three in a row
      // mean the lab is gone, and the run ends with what it has.
      const l = lab;
      const o = await runSchedule(l, schedule, timings, i + 1).catch(
        async (err: unknown): Promise<Outcome> => {
          const errors = [`schedule: ${err instanceof Error ? err.message : String(err)}`];
          await reset(l, schedule, i + 1).catch((e: unknown) =>
            errors.push(`reset: ${e instanceof Error ? e.message : String(e)}`),
          );
          return {
            schedule,
            verdict: { failures: [], noReleaseBecause: "not checked: the schedule failed" },
            violations: [],
            bmcLied: [],
            errors,
            followedMs: 0,
          };
        },
      );
      outcomes.push(o);
      say(
        `  seed ${schedule.seed}: released ${o.verdict.releasedMs ?? "-"} ms (bound ${o.verdict.releaseBoundMs ?? o.verdict.noReleaseBecause}); violations ${o.violations.length}; liveness ${o.verdict.failures.length ? JSON.stringify(o.verdict.failures) : "ok"}${o.errors.length ? `; errors ${JSON.stringify(o.errors)}` : ""}`,
      );
      if (outcomes.slice(-3).length === 3 && outcomes.slice(-3).every((x) => x.errors.length)) {
        say(`three schedules in a row failed; stopping after ${outcomes.length}`);
        break;
      }
    }
  } finally {
    await lab.down();
  }
  const files = report(outcomes, timings);
  say(`report: ${files.join(", ")}`);
  const bad = outcomes.filter((o) => o.violations.length || o.verdict.failures.length || o.errors.length);
  const result: ChaosResult = {
    schedules: outcomes.length,
    seeds: [`${seed0}..${seed0 + outcomes.length - 1}`],
    faults,
    violations: outcomes.reduce((a, o) => a + o.violations.length, 0),
    livenessFailures: outcomes.reduce((a, o) => a + o.verdict.failures.length, 0),
    bmcLies: outcomes.reduce((a, o) => a + o.bmcLied.length, 0),
    errors: outcomes.reduce((a, o) => a + o.errors.length, 0),
    failedSeeds: bad.map((o) => o.schedule.seed),
    wallSeconds: Math.round((Date.now() - t0) / 1000),
    controlPlane,
  };
  console.log(`RESULT ${JSON.stringify(result)}`);
  return bad.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    console.log(`RESULT ${JSON.stringify({ error: err instanceof Error ? err.message : String(err) })}`);
    const st = readState();
    if (st) teardownFromState(st);
    process.exit(1);
  },
);
