// The bench's watchdog section (issue 18): the power-loss and isolate scenarios' fault →
// released beside the crash scenario's, and the defaults of the two peers that fence a
// node by its own watchdog, worked out from their documented settings with their sources:
// SBD (Pacemaker's watchdog fencing) and medik8s Self Node Remediation. Also the bound the
// lab's own settings give (lab/watchdog.ts LAB_WATCHDOG). Pure: summaries in, Markdown
// lines and a JSON-able summary out; it measures nothing itself.
import type { Percentiles } from "./bench-chart.ts";
import { LAB_WATCHDOG } from "./watchdog.ts";

/** The scenarios that only a watchdog can end (the node's BMC is dead or cut off with it). */
export const WATCHDOG_SCENARIOS = ["power-loss", "isolate"] as const;
/** Trials of each watchdog scenario unless told (issue 18: at least 5). */
export const WATCHDOG_TRIALS_DEFAULT = 5;

export interface WatchdogPeer {
  id: string;
  peer: string;
  /** The settings the figure is built from, as documented. */
  settings: string;
  /** The earliest time, from the node's failure, at which its workloads are released, ms. */
  releaseAfterMs: number;
  /** How it adds up. */
  formula: string;
  source: string;
}

/**
 * The peers' defaults. SBD: SBD_WATCHDOG_TIMEOUT=5 s (sbd's sysconfig template), and
 * Pacemaker's stonith-watchdog-timeout, when negative (auto), is twice that: the survivors
 * wait 10 s after the node left the membership, which itself takes Corosync's token
 * timeout (not counted here). SNR: the minimum safe time its calculator builds from the
 * defaults (apiCheckInterval 15 s, apiServerTimeout 5 s, maxApiErrorThreshold 3,
 * MaxTimeForNoPeersResponse 30 s, 30 s padding, the node's watchdog timeout), with
 * softdog's default 60 s timeout; safeTimeToAssumeNodeRebootedSeconds (180 by default)
 * wins when larger. Detection (NodeHealthCheck's unhealthy conditions, minutes by
 * default) comes on top and is not counted.
 */
export const WATCHDOG_PEERS: readonly WatchdogPeer[] = [
  {
    id: "sbd",
    peer: "Pacemaker + SBD (watchdog-only), defaults",
    settings: "SBD_WATCHDOG_TIMEOUT 5 s; stonith-watchdog-timeout auto = 2 × 5 s",
    releaseAfterMs: 10_000,
    formula: "2 × SBD_WATCHDOG_TIMEOUT, after Corosync has declared the node lost",
    source:
      "ClusterLabs sbd, src/sbd.sysconfig (SBD_WATCHDOG_TIMEOUT=5); Pacemaker stonith-watchdog-timeout, https://projects.clusterlabs.org/T749 and T904",
  },
  {
    id: "snr",
    peer: "medik8s Self Node Remediation, defaults",
    settings:
      "apiCheckInterval 15 s, apiServerTimeout 5 s, maxApiErrorThreshold 3, MaxTimeForNoPeersResponse 30 s, padding 30 s, softdog 60 s; safeTimeToAssumeNodeRebootedSeconds 180",
    releaseAfterMs: 180_000,
    formula: "max(3 × (15 + 5) + 30 + 60 + 30, 180) s, after the SelfNodeRemediation CR exists",
    source:
      "github.com/medik8s/self-node-remediation api/v1alpha1/selfnoderemediationconfig_types.go (defaults), pkg/reboot/calculator.go and its test (3 × (15 + 5) + 30 + watchdog + 30)",
  },
];

/** What the lab's own settings promise: no release before grace + timeout (+ the decider's margin). */
export function labWatchdogBoundMs(marginMs = 0): number {
  return LAB_WATCHDOG.renewGraceMs + LAB_WATCHDOG.timeoutMs + marginMs;
}

const fmt = (ms: number | undefined) => (ms === undefined ? "-" : `${(ms / 1000).toFixed(2)} s`);

/** The report section: fault → released per scenario (crash first), then the peers' defaults. */
export function watchdogSection(released: Record<string, Percentiles | undefined>): {
  lines: string[];
  summary: Record<string, unknown>;
} {
  const rows = ["crash", ...WATCHDOG_SCENARIOS].filter((s) => s in released);
  const lines = [
    "## Watchdog fencing: power-loss and isolate beside crash, and the peers' defaults",
    "",
    `fault → released, from the fault. crash is released on a BMC's read-back Off; power-loss (node and BMC die together) and isolate (node cut off from peers, API and BMC) only once the node's watchdog has surely reset it: silence for grace ${LAB_WATCHDOG.renewGraceMs} ms + watchdog ${LAB_WATCHDOG.timeoutMs} ms + the decider's margin (lab/watchdog.ts, docs/lab.md).`,
    "",
    "| scenario | n | p50 | p99 | max |",
    "|---|---:|---:|---:|---:|",
    ...rows.map((s) => {
      const p = released[s];
      return `| ${s} | ${p?.n ?? 0} | ${fmt(p?.p50)} | ${fmt(p?.p99)} | ${fmt(p?.max)} |`;
    }),
    "",
    "| peer (defaults) | settings | release no earlier than | how | source |",
    "|---|---|---:|---|---|",
    ...WATCHDOG_PEERS.map(
      (p) => `| ${p.peer} | ${p.settings} | ${fmt(p.releaseAfterMs)} | ${p.formula} | ${p.source} |`,
    ),
    "",
    "The peers' figures are worked out from their documented defaults, not measured here, and leave out their detection (Corosync's token timeout; NodeHealthCheck's unhealthy-condition durations), which fastfence's figures include.",
    "",
  ];
  const summary: Record<string, unknown> = {
    releasedMs: Object.fromEntries(rows.map((s) => [s, released[s] ?? { n: 0 }])),
    labBoundMs: labWatchdogBoundMs(),
    peers: Object.fromEntries(WATCHDOG_PEERS.map((p) => [p.id, p.releaseAfterMs])),
  };
  return { lines, summary };
}

/** Trials per scenario: crash --trials, the watchdog ones --watchdog-trials (else --trials, else 5), others --other. */
export function trialsFor(
  scenario: string,
  o: { trials: number; trialsGiven: boolean; other: number; watchdogTrials?: number },
): number {
  if (scenario === "crash") return o.trials;
  if ((WATCHDOG_SCENARIOS as readonly string[]).includes(scenario))
    return o.watchdogTrials ?? (o.trialsGiven ? o.trials : WATCHDOG_TRIALS_DEFAULT);
  return o.other;
}
