// The demo's result (what `make demo` prints as `RESULT {json}`), its goals and its chart:
// a timeline of the incident's milestones in seconds from the crash, with the goals as
// dashed lines. Pure: the result in, rows or SVG text out.
import { timelineSvg } from "./chart.ts";

/** The demo exits 0 only within these (ms from the crash). */
export const DEMO_GOALS = { releasedMs: 4000, replacementRunningMs: 6000 };

/** The milestones of a demo RESULT (ms from the crash; null: not reached). */
export interface DemoResult {
  node: string;
  bmc: string;
  detectedMs: number | null;
  confirmedMs: number | null;
  powerOffConfirmedMs: number | null;
  releasedMs: number | null;
  replacementRunningMs: number | null;
  statefulReplacementMs?: number | null;
}

/** The milestones reached, in order, each with its goal (ms) if it has one. */
export function demoMilestones(r: DemoResult): { label: string; ms: number; goalMs?: number }[] {
  const all = [
    { label: "detected (first suspicion)", ms: r.detectedMs },
    { label: "confirmed (quorum of observers)", ms: r.confirmedMs },
    { label: "power-off read back Off", ms: r.powerOffConfirmedMs },
    { label: "workloads released", ms: r.releasedMs, goalMs: DEMO_GOALS.releasedMs },
    { label: "replacement pod Running", ms: r.replacementRunningMs, goalMs: DEMO_GOALS.replacementRunningMs },
    { label: "StatefulSet pod (RWO) Running", ms: r.statefulReplacementMs },
  ];
  return all.filter((m): m is { label: string; ms: number; goalMs?: number } => typeof m.ms === "number");
}

export function demoSvg(r: DemoResult): string {
  return timelineSvg(`fastfence demo: crash of ${r.node} (${r.bmc} BMC)`, demoMilestones(r), [
    { label: `released goal ${DEMO_GOALS.releasedMs / 1000} s`, ms: DEMO_GOALS.releasedMs },
    {
      label: `replacement goal ${DEMO_GOALS.replacementRunningMs / 1000} s`,
      ms: DEMO_GOALS.replacementRunningMs,
    },
  ]);
}
