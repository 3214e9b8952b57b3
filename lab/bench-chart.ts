// The bench's summary (what `make bench` prints as `RESULT {json}`) and its chart: one
// group per scenario the bench ran (crash, hang, partition, and whatever else the summary
// holds), fastfence's p50 bar shaded by phase with a p99 whisker and a max tick; the
// scenarios where no node may be fenced as a sentence; then the peers: the Kubernetes-only
// baseline measured in the same run and the stated references of lab/peers.ts with their
// source. Pure: the summary in, SVG text out.
import { chartSvg, type Row } from "./chart.ts";
import { STATED_REFERENCES, STATED_SOURCES } from "./peers.ts";
import { fmtSeconds } from "./svg-text.ts";

export interface Percentiles {
  n: number;
  p50?: number;
  p95?: number;
  p99?: number;
  max?: number;
}

export function percentiles(values: (number | null | undefined)[]): Percentiles {
  const v = values.filter((x): x is number => typeof x === "number").sort((a, b) => a - b);
  if (v.length === 0) return { n: 0 };
  const q = (p: number) => v[Math.min(v.length - 1, Math.ceil(p * v.length) - 1)]!;
  return { n: v.length, p50: q(0.5), p95: q(0.95), p99: q(0.99), max: v[v.length - 1]! };
}

/** One scenario's line of the bench RESULT (ms from the fault). */
export interface ScenarioSummary {
  trials: number;
  /** The victim was really broken, so it must be fenced (absent in older results: from the name). */
  faulted?: boolean;
  detectedMs?: Percentiles;
  confirmedMs?: Percentiles;
  powerOffConfirmedMs?: Percentiles;
  releasedMs?: Percentiles;
  replacementRunningMs?: Percentiles;
  safetyViolations: number;
  trialsWithHealthyNodeFenced: number;
}

/** The baseline's line: Kubernetes alone, its defaults scaled ÷scale. */
export interface BaselineSummary {
  trials: number;
  scale: number;
  replacementRunningMsMeasured: (number | null)[];
  replacementRunningMsAtRealDefaults: (number | null)[];
  /** The StatefulSet pod (RWO volume); null: not replaced while the trial followed it. */
  statefulReplacementMsMeasured?: (number | null)[];
}

export interface BenchSummary {
  scenarios: Record<string, ScenarioSummary>;
  baseline?: BaselineSummary;
}

/** The `scenarios` object of a bench RESULT line, split into the scenarios and the baseline. */
export function benchSummaryOf(scenarios: Record<string, unknown>): BenchSummary {
  const { baseline, ...rest } = scenarios;
  return {
    scenarios: rest as Record<string, ScenarioSummary>,
    ...(baseline ? { baseline: baseline as BaselineSummary } : {}),
  };
}

/** Scenarios whose node stays healthy (nothing may be fenced), for results without `faulted`. */
const HEALTHY_NODE = new Set(["function-crash", "partial-partition", "partial-partition-api"]);
export const isFaulted = (name: string, s: ScenarioSummary): boolean => s.faulted ?? !HEALTHY_NODE.has(name);

const PHASE_COLORS = [
  { key: "detectedMs", label: "detected", color: "#c4d5f2" },
  { key: "confirmedMs", label: "confirmed", color: "#92b1e6" },
  { key: "powerOffConfirmedMs", label: "power-off read back", color: "#5f8ad6" },
  { key: "releasedMs", label: "workloads released", color: "#2d5cad" },
] as const;
const REPLACEMENT = "#5aa77a";
const BASELINE = "#d0843a";
const OK = "#2e7d32";
const BAD = "#c03a3a";

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function spread(p: Percentiles, trials: number, what: string): string {
  const missing = trials - p.n;
  return `p50 ${fmtSeconds(p.p50!)} · p99 ${fmtSeconds(p.p99!)} · max ${fmtSeconds(p.max!)}, n=${p.n}${missing > 0 ? ` (${missing} not ${what})` : ""}`;
}

function scenarioRows(name: string, s: ScenarioSummary): Row[] {
  const attrs = { "data-scenario": name };
  const rows: Row[] = [
    {
      kind: "header",
      text: `${name}: ${plural(s.trials, "trial")}, ${plural(s.safetyViolations, "safety violation")}`,
      attrs,
    },
  ];
  if (s.trials === 0) {
    rows.push({
      kind: "text",
      label: "outcome",
      text: "no trial completed (see the report's Errors)",
      color: BAD,
      attrs,
    });
    return rows;
  }
  if (!isFaulted(name, s)) {
    const bad = s.trialsWithHealthyNodeFenced;
    const suspected = s.detectedMs?.n ?? 0;
    rows.push({
      kind: "text",
      label: "outcome",
      text: bad
        ? `a healthy node was fenced in ${bad} of ${plural(s.trials, "trial")}`
        : `no node fenced in ${plural(s.trials, "trial")}, as it should be${suspected ? ` (suspected in ${suspected}, never confirmed)` : ""}`,
      color: bad ? BAD : OK,
      attrs,
    });
    return rows;
  }
  const rel = s.releasedMs;
  if (rel?.p50 === undefined) {
    rows.push({
      kind: "text",
      label: "workloads released",
      text: `not released in any of ${plural(s.trials, "trial")}`,
      color: BAD,
      attrs,
    });
  } else {
    let prev = 0;
    const segments = PHASE_COLORS.flatMap(({ key, color }) => {
      const v = s[key]?.p50;
      if (v === undefined || v < prev) return [];
      prev = v;
      return [{ toMs: v, color }];
    });
    rows.push({
      kind: "bar",
      label: "workloads released",
      segments,
      p99: rel.p99,
      max: rel.max,
      note: spread(rel, s.trials, "released"),
      attrs,
    });
  }
  const rep = s.replacementRunningMs;
  if (rep?.p50 !== undefined)
    rows.push({
      kind: "bar",
      label: "replacement pod Running",
      segments: [{ toMs: rep.p50, color: REPLACEMENT }],
      p99: rep.p99,
      max: rep.max,
      note: spread(rep, s.trials, "Running"),
      attrs,
    });
  return rows;
}

function baselineRows(b: BaselineSummary | undefined): Row[] {
  const attrs = { "data-baseline": "kubernetes" };
  if (!b || b.trials === 0)
    return [
      {
        kind: "text",
        label: "Kubernetes alone",
        text: "not measured in this run (bench --baseline 0)",
        attrs,
      },
    ];
  const real = percentiles(b.replacementRunningMsAtRealDefaults);
  const measured = percentiles(b.replacementRunningMsMeasured);
  const rows: Row[] = [];
  if (real.p50 === undefined)
    rows.push({
      kind: "text",
      label: "Kubernetes alone, this run",
      text: `Deployment pod not Running in any of ${plural(b.trials, "trial")}`,
      attrs,
    });
  else
    rows.push({
      kind: "bar",
      label: "Kubernetes alone, this run",
      segments: [{ toMs: real.p50, color: BASELINE }],
      max: real.n > 1 ? real.max : undefined,
      note: `Deployment pod Running: p50 ${fmtSeconds(real.p50)}${real.n > 1 ? ` · max ${fmtSeconds(real.max!)}` : ""} (measured ${fmtSeconds(measured.p50!)} at defaults ÷${b.scale}, ×${b.scale}), n=${real.n}${real.n < b.trials ? ` (${b.trials - real.n} never)` : ""}`,
      attrs,
    });
  const st = b.statefulReplacementMsMeasured;
  if (st?.length) {
    const never = st.filter((x) => x === null).length;
    rows.push({
      kind: "text",
      label: "Kubernetes alone, StatefulSet",
      text: never
        ? `RWO pod not replaced while followed in ${never} of ${plural(st.length, "trial")} (force-detach after 6 min)`
        : `RWO pod Running at ${st.map((x) => fmtSeconds(x! * b.scale)).join(", ")} (×${b.scale})`,
      attrs,
    });
  }
  return rows;
}

/** The bench chart: every scenario of the summary, then the peers beside fastfence. */
export function benchSvg(sum: BenchSummary): string {
  const names = Object.keys(sum.scenarios);
  const ordered = [
    ...names.filter((n) => isFaulted(n, sum.scenarios[n]!)),
    ...names.filter((n) => !isFaulted(n, sum.scenarios[n]!)),
  ];
  const trials = names.reduce((a, n) => a + sum.scenarios[n]!.trials, 0);
  const rows: Row[] = [
    {
      kind: "header",
      section: true,
      text: "fastfence, measured in this run",
      attrs: { "data-section": "fastfence" },
    },
    ...ordered.flatMap((n) => scenarioRows(n, sum.scenarios[n]!)),
    {
      kind: "header",
      section: true,
      text: "peers, from a node's failure",
      attrs: { "data-section": "peers" },
    },
    ...baselineRows(sum.baseline),
    ...STATED_REFERENCES.map((r): Row => ({
      kind: "range",
      label: r.peer,
      loMs: r.loMs,
      hiMs: r.hiMs,
      note: `${r.stated}: ${r.what} [${r.source}]`,
      attrs: { "data-reference": r.id },
    })),
  ];
  return chartSvg({
    title: "fastfence lab bench: every scenario run, and its peers",
    subtitle: [
      `${plural(ordered.length, "scenario")}, ${plural(trials, "trial")} on 3 nodes (IPMI and Redfish BMCs); times from the fault`,
      "bar = p50 (fastfence's shaded by phase), whisker = p99, tick = max; hatched = a stated range",
    ],
    legend: [
      ...PHASE_COLORS.map((p) => ({ label: p.label, color: p.color })),
      { label: "replacement Running", color: REPLACEMENT },
      ...(sum.baseline?.trials ? [{ label: "Kubernetes alone", color: BASELINE }] : []),
      { label: "stated reference", color: "#8a8a8a", hatched: true },
    ],
    rows,
    axis: { scale: "log", label: "seconds from the fault (log scale)" },
    caption: [
      ...(sum.baseline?.trials
        ? [
            `Kubernetes alone: the same lab without fastfence, measured in this run with its defaults scaled ÷${sum.baseline.scale} (node-monitor grace period, not-ready/unreachable toleration, node lease) and shown ×${sum.baseline.scale}.`,
          ]
        : []),
      ...STATED_SOURCES,
    ],
  });
}
