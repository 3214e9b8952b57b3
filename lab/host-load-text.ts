// The host's CPU load (lab/host-load.ts samples) as the bench report's words: a trial's
// share in its line, a scenario's percentiles in its section. Pure formatting.
import { percentiles, type Percentiles } from "./bench-chart.ts";
import type { CpuShare } from "./host-load.ts";
import type { TrialResult } from "./trial.ts";

/** A share (0–1) as a whole percentage. */
export function pct(x: number | undefined): number | undefined {
  return x === undefined ? undefined : Math.round(x * 100);
}

export function cpuText(c: CpuShare | undefined): string {
  return c ? `host cpu busy ${pct(c.busy)}% steal ${pct(c.steal)}%; ` : "";
}

/** The host's CPU load from the fault to the release, over a scenario's trials. */
export function hostCpuLine(rs: readonly TrialResult[], busy: Percentiles): string {
  const steal = percentiles(rs.map((r) => pct(r.hostCpu?.steal)));
  if (!busy.n) return "Host CPU load: not sampled (no /proc/stat).";
  return `Host CPU, all cores, from the fault to the release (lab/host-load.ts): busy p50 ${busy.p50} %, max ${busy.max} %; stolen by the hypervisor p50 ${steal.p50} %, max ${steal.max} %. Per trial: ${rs.map((r) => pct(r.hostCpu?.busy) ?? "-").join(" ")}.`;
}
