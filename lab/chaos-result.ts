// The RESULT line of `make chaos` (bench/chaos.ts): its shape, and several runs' lines merged
// into one (runs over seed ranges split across sittings). Pure data: never reads or starts
// anything.
import type { ControlPlaneMode } from "./types.ts";

export interface ChaosResult {
  schedules: number;
  seeds: string[];
  faults: Record<string, number>;
  violations: number;
  livenessFailures: number;
  /** Releases that rested on a lying BMC (the hardware's fault, not counted in violations; lab/bmc-lies.ts). */
  bmcLies?: number;
  /** Steps or resets that failed (the lab, not fastfence); the seed is listed in failedSeeds. */
  errors: number;
  failedSeeds: number[];
  wallSeconds: number;
  /** Where the lab's etcd, API servers, controller manager and scheduler ran; "mixed" after a merge of both. */
  controlPlane?: ControlPlaneMode | "mixed";
}

/** The last `RESULT {json}` line of a run's log; throws naming the log when there is none. */
export function resultOfLog(name: string, text: string): ChaosResult {
  const line = text
    .trim()
    .split("\n")
    .filter((x) => x.startsWith("RESULT "))
    .at(-1);
  if (!line) throw new Error(`${name}: no RESULT line`);
  return JSON.parse(line.slice(7)) as ChaosResult;
}

/** Several runs as one: counts summed, seeds and failed seeds listed in order. */
export function mergeResults(all: readonly ChaosResult[]): ChaosResult {
  const faults: Record<string, number> = {};
  for (const r of all) for (const [k, v] of Object.entries(r.faults)) faults[k] = (faults[k] ?? 0) + v;
  const planes = new Set(all.map((r) => r.controlPlane ?? "host"));
  return {
    schedules: all.reduce((a, r) => a + r.schedules, 0),
    seeds: all.flatMap((r) => r.seeds),
    faults,
    violations: all.reduce((a, r) => a + r.violations, 0),
    livenessFailures: all.reduce((a, r) => a + r.livenessFailures, 0),
    bmcLies: all.reduce((a, r) => a + (r.bmcLies ?? 0), 0),
    errors: all.reduce((a, r) => a + (r.errors ?? 0), 0),
    failedSeeds: all.flatMap((r) => r.failedSeeds),
    wallSeconds: all.reduce((a, r) => a + r.wallSeconds, 0),
    controlPlane: planes.size === 1 ? [...planes][0] : "mixed",
  };
}
