// The planned-work scenarios' common ground on the pipeline cluster (real kube-apiserver,
// Kafka, every stage as its own identity, a lab Redfish BMC per node), shared by
// pipeline-planned-work.test.ts and pipeline-planned-holds.test.ts: one three-node cluster
// per file with its incident history, the crash and reboot steps, the checks every scenario
// ends with, and the cluster put back after a scenario that failed. A plain crash is fenced
// here in 2-5 s (FENCED_BY_MS); a hold is watched well past that, and "not fenced" means the
// BMC received no power command at all. Test code only: it registers vitest hooks, and must
// never leave a node down or planned-work state behind for the next scenario.
import { afterEach, beforeEach, expect } from "vitest";
import { incidentName, type NodeFence, type Phase } from "../../core/incident.ts";
import {
  NAMESPACE,
  sleep,
  startPipelineCluster,
  type PipelineCluster,
} from "../../harness/env/pipeline-cluster.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import {
  commandsSince,
  IncidentHistory,
  pipelineIdle,
  resetPlannedWork,
  type Seen,
} from "./planned-helpers.ts";

type PlannedEnv = { c: PipelineCluster; history: IncidentHistory };
let env: () => PlannedEnv = () => {
  throw new Error("plannedWorkCluster() was not called at the top of the test file");
};

/**
 * The file's three-node pipeline cluster and its incident history (beforeAll/afterAll), and
 * each scenario's start mark and restore after a failure (beforeEach/afterEach). Call once,
 * at the top of a test file.
 */
export function plannedWorkCluster(): () => PlannedEnv {
  env = withEnv(async (scope) => {
    const c = scope.add(
      await startPipelineCluster({
        // probes every 200 ms (not 100): half the observations per dead node, for a machine
        // that runs the whole simulated cluster in one process on 2 shared cores
        policy: { probe: { intervalMs: 200 }, reconcile: { intervalMs: 1_000 } },
      }),
    );
    const history = scope.add(await IncidentHistory.start(c));
    return { c, history };
  });
  restoreEachScenario();
  return env;
}

/** A plain crash is fenced within this here; a hold is watched past it. */
export const FENCED_BY_MS = 5_000;
/** infra/kube/planned.ts reuses its read of NodeMaintenances and ClusterVersion for 2 s. */
export const PLANNED_TTL_MS = 2_500;
export const HOLDING: Phase[] = ["Suspected", "Blocked"];

/** When the running scenario began (epoch ms). */
let started = 0;

interface Crashed {
  node: string;
  name: string;
  t0: number;
  /** How long the pipeline took to become idle before the crash, ms. */
  settled: number;
  /** Power commands the node's BMC received since just before the crash. */
  commands(): string[];
  power(): string;
}

/** Crash `node` once the pipeline is idle (the time that took is printed with the timeline). */
export async function crash(node: string): Promise<Crashed> {
  const { c } = env();
  const settled = await pipelineIdle(c);
  const bmc = c.nodes.get(node)!.bmc;
  const name = incidentName(node, c.kwok.byName(node).bootId);
  const mark = bmc.stats.resets.length;
  const t0 = await c.crash(node);
  return { node, name, t0, settled, commands: () => commandsSince(bmc, mark), power: () => bmc.power };
}

export const phasesOf = (name: string) => [
  ...new Set(
    env()
      .history.of(name)
      .map((s) => s.phase),
  ),
];
export const sleepUntil = (t: number) => sleep(Math.max(0, t - Date.now()));

/**
 * The node comes back with a new boot ID at once: the misses of its silence that replicas
 * still have to read (the rebooted node's own replicas resume from before the crash) name
 * the old boot, and must never count against the new one (scenario (i)). Returns the new
 * boot ID.
 */
export async function rebootNode(node: string): Promise<string> {
  return env().c.reboot(node);
}

/** The node comes back with a new boot ID; waits until its incident ends as `end` says. */
export async function reboot(x: Crashed, end: { phase: Phase; reason: string }): Promise<Seen> {
  await rebootNode(x.node);
  return env().history.until(x.name, end, 20_000);
}

/** Power commands each BMC had received when the scenario began. */
const marks = new Map<string, number>();

/** No other incident got past Blocked, and no other BMC got a command, during the scenario. */
export function nothingElseFenced(x: { node: string; name: string }): void {
  const { c, history } = env();
  const others = history.seen.filter((s) => s.at >= started && s.name !== x.name);
  expect(others.filter((s) => !HOLDING.includes(s.phase) && s.phase !== "Closed")).toEqual([]);
  for (const [name, n] of c.nodes)
    if (name !== x.node) expect(commandsSince(n.bmc, marks.get(name)!), name).toEqual([]);
}

export function report(
  title: string,
  x: { name: string; t0: number; settled: number },
  lines: string[],
): void {
  const head = `${title} — ${x.name} (pipeline idle after ${x.settled} ms; scenario ${Date.now() - started} ms)`;
  console.log(`\n${head}\n${env().history.timeline(x.name, x.t0)}\n  ${lines.join("\n  ")}`);
}

export async function readIncident(name: string): Promise<NodeFence> {
  return (await env().c.custom.getNamespacedCustomObject({
    group: "fastfence.io",
    version: "v1alpha1",
    plural: "nodefences",
    namespace: NAMESPACE,
    name,
  })) as NodeFence;
}

/** Each scenario's start mark, and the cluster put back after a scenario that failed. */
function restoreEachScenario(): void {
  beforeEach(() => {
    started = Date.now();
    for (const [name, n] of env().c.nodes) marks.set(name, n.bmc.stats.resets.length);
  });
  // A scenario that failed half-way leaves its planned-work state and its node down: take
  // the one away and bring the other back, so the next scenario still starts clean (two
  // observers per node, a free storm-guard slot).
  afterEach(async ({ task }) => {
    const { c, history } = env();
    if (task.result?.state !== "fail") return;
    for (const x of history.seen.filter((x) => x.at >= started))
      console.log(
        `  ${new Date(x.at).toISOString()} ${x.name} ${x.phase} ${x.reason ?? ""}: ${x.message ?? ""}`,
      );
    // What the incidents hold now: the evidence and timestamps a hold's bound is counted from.
    for (const name of new Set(history.seen.filter((x) => x.at >= started).map((x) => x.name))) {
      const st = (await readIncident(name).catch(() => undefined))?.status;
      console.log(`  ${name} now: ${JSON.stringify({ timestamps: st?.timestamps, evidence: st?.evidence })}`);
    }
    await resetPlannedWork(c);
    for (const [name, n] of c.nodes) if (n.downAt !== undefined) await rebootNode(name);
  });
}
