// bench-lab (`make bench`): the end-to-end fencing benchmark on the lab. Each scenario ×
// K trials on one 3-node lab (IPMI and Redfish BMCs mixed), by default on the compact control
// plane (an etcd member, API server, controller manager and scheduler on every node,
// OpenShift's leader election; --control-plane host, --leader-election upstream): crash (the
// node leading the most Kafka partitions, or on the compact plane a node by its control-plane
// role: --etcd-leader-trials the etcd leader, --lease-trials the holder of the controller
// manager's and scheduler's Leases, lab/victim-roles.ts), hang, full partition, function-only
// crash on a healthy node, partial partition (reaches the API, not its peers).
// p50/p95/p99/max per phase (on the compact plane also per victim role, with each trial's etcd
// elections and the API errors a new client met, lab/bench-roles.ts), the invariant checker
// after every trial, and beside it the same lab without fastfence (Kubernetes' own eviction),
// run with its defaults scaled down 10× (node-monitor-grace-period 50 s → 5 s,
// not-ready/unreachable toleration 300 s → 30 s, kubelet lease 40 s → 4 s) and reported both
// as measured and scaled back ×10. Report: Markdown + SVG under .cache/reports/; the last line
// is `RESULT {json}`. The watchdog scenarios (power-loss, isolate; the lab then runs with its
// emulated watchdogs) get their own section (lab/bench-watchdog.ts). --controller-trials
// (default 5) of the crash trials take the active KRaft controller's node; so does every other
// hang trial; the rest the node leading the most partitions but the controller's. Each hang
// trial first idles the lab for the next of --hang-waits (s, cycled; default 0,5,60);
// hang-mid-round freezes the controller's node the moment an operator's fence request for it
// is confirmed (lab/hang-mid-round.ts). --brokers shipped runs the brokers with the shipped
// Kafka settings only (lab/broker-settings.ts). Every trial also gives the share of the
// host's CPUs busy from the fault to the release (lab/host-load.ts). Options: lab/bench-options.ts.
//   node bench/lab.ts [--trials 20] [--other 3] [--scenarios crash,hang,...] [--control-plane compact|host]
//   only the watchdog scenarios, 5 trials each, no baseline:
//   node bench/lab.ts --scenarios power-loss,isolate --trials 5 --baseline 0
import { kafkaClientFrom } from "../infra/bus/kafka-bus.ts";
import { describeBrokerSettings } from "../lab/broker-settings.ts";
import { HostLoad } from "../lab/host-load.ts";
import { cpuText, hostCpuLine, pct } from "../lab/host-load-text.ts";
import { Lab } from "../lab/lab.ts";
import { artifactLine, artifactRef } from "../lab/artifact.ts";
import { accessLine } from "../lab/shipped-access.ts";
import type { LabState } from "../lab/state.ts";
import { tearDownOnSignals } from "../lab/state.ts";
import { benchSummaryOf, benchSvg, percentiles, type Percentiles } from "../lab/bench-chart.ts";
import { writeReport } from "../lab/report.ts";
import { SCENARIOS as SPECS } from "../lab/scenarios.ts";
import { runTrial, type Scenario, type TrialResult } from "../lab/trial.ts";
import { watchdogSection } from "../lab/bench-watchdog.ts";
import { ApiProbe } from "../lab/api-probe.ts";
import { step, withCauses } from "../lab/error-text.ts";
import { planeText, rolesSection, trialRoleText } from "../lab/bench-roles.ts";
import { chooseByRole, etcdTerm, heldRoles, planRoles } from "../lab/victim-roles.ts";
import { readBenchOptions } from "../lab/bench-options.ts";

const {
  BROKERS,
  CONTROL_PLANE,
  controllerTrial,
  HANG_WAITS,
  KB,
  KC,
  LEADER_ELECTION,
  ROLE_TRIALS,
  SCENARIOS,
  TOPOLOGY,
  trialsOf,
  WATCHDOG,
} = readBenchOptions();

const PHASES = [
  "detectedMs",
  "confirmedMs",
  "powerOffConfirmedMs",
  "releasedMs",
  "replacementRunningMs",
] as const;
const SCALE = 10;

const t0 = Date.now();
const say = (l: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s] ${l}`);
let lab: Lab | undefined;
/** A new client's view of the API during the trials (lab/api-probe.ts). */
let probe: ApiProbe | undefined;
tearDownOnSignals(["SIGINT", "SIGTERM"], 130);

function stats(rs: TrialResult[]): Record<string, Percentiles> {
  return Object.fromEntries(PHASES.map((p) => [p, percentiles(rs.map((r) => r[p]))]));
}

async function main(): Promise<number> {
  const results: TrialResult[] = [];
  const errors: string[] = [];
  /** The packed artifact the lab's nodes ran (lab/artifact.ts). */
  let artifact: LabState["artifact"];
  /** The identities and policies it ran under (lab/shipped-access.ts). */
  let access: LabState["access"];
  // The lab shares the machine's cores: a trial slow at every hop is told apart by this.
  const load = new HostLoad().start();
  if (SCENARIOS.some((s) => s !== "baseline-crash")) {
    // The watchdog scenarios need every node's emulated watchdog (lab up --watchdog).
    lab = await Lab.up({
      nodes: 3,
      bmc: "mixed",
      log: say,
      workloads: false,
      watchdog: WATCHDOG,
      controlPlane: CONTROL_PLANE,
      leaderElection: LEADER_ELECTION,
    });
    probe = new ApiProbe(lab.kc).start();
    artifact = lab.state.artifact;
    access = lab.state.access;
    await new Promise((r) => setTimeout(r, 3000));
    let trial = 0;
    for (const sc of SCENARIOS) {
      const n = trialsOf(sc);
      // n measured trials; a trial that fails outside the measurement (setting up its
      // workloads, resetting the lab afterwards) is reported and another one is run, up to
      // 3 failures per scenario.
      let failures = 0;
      const crashes = sc === "crash" || sc === "proc-crash";
      // compact plane: the crash trials' victims by control-plane role (lab/victim-roles.ts)
      const roles =
        CONTROL_PLANE === "compact" && crashes ? planRoles(n, { ...ROLE_TRIALS, controller: KC }) : [];
      for (let i = 0; i < n + failures; i++) {
        trial++;
        try {
          const hang = sc === "hang";
          // A node frozen mid-round: always the active KRaft controller's (issue 14's worst case).
          const preferController =
            ((sc === "crash" || sc === "proc-crash") && controllerTrial(i)) ||
            (hang && i % 2 === 0) ||
            sc === "hang-mid-round";
          const idleMs = hang ? HANG_WAITS[i % HANG_WAITS.length]! * 1000 : 0;
          const plan = roles[i % Math.max(1, roles.length)];
          const byRole = plan
            ? await step("choosing the victim by role", () => chooseByRole(lab!, plan, say))
            : undefined;
          const held = byRole
            ? await step("reading the victim's roles", () =>
                heldRoles(lab!, byRole.name, byRole.activeController),
              )
            : undefined;
          const term0 = byRole ? await etcdTerm(lab) : undefined;
          const r = await runTrial(lab, sc, {
            trial,
            preferController,
            idleMs,
            // a dead scheduler leader holds new pods until a standby takes its Lease (up to minutes)
            ...(byRole ? { victim: byRole.name, timeoutMs: 200_000 } : {}),
          });
          const end = r.releasedMs ?? r.replacementRunningMs;
          const cpu = end === undefined ? undefined : load.between(r.t0, r.t0 + end);
          if (cpu) r.hostCpu = cpu;
          if (end !== undefined && probe) r.apiErrors = probe.between(r.t0, r.t0 + end);
          if (held) r.roles = held;
          const term1 = byRole ? await etcdTerm(lab) : undefined;
          if (term0 !== undefined && term1 !== undefined) r.etcdElections = term1 - term0;
          results.push(r);
          say(
            `${sc} #${i + 1} ${r.node}${r.victimChoice?.activeController ? " (KRaft controller)" : ""}${r.roles || r.apiErrors ? ` (${trialRoleText(r)})` : ""}${hang ? ` after ${idleMs / 1000} s idle` : ""}: detected ${r.detectedMs ?? "-"} confirmed ${r.confirmedMs ?? "-"} off ${r.powerOffConfirmedMs ?? "-"} released ${r.releasedMs ?? "-"} replacement ${r.replacementRunningMs ?? "-"} ms; ${cpuText(r.hostCpu)}fenced [${r.fencedNodes.join(",")}] violations ${r.safetyViolations}${r.violations.length ? " " + JSON.stringify(r.violations.map((v) => `${v.rule}: ${v.detail}`)) : ""}; stages ${JSON.stringify(r.stagesMs ?? {})}`,
          );
        } catch (err) {
          errors.push(`${sc} #${i + 1}: ${withCauses(err)}`);
          say(`${sc} #${i + 1} FAILED: ${errors[errors.length - 1]}`);
          if (++failures >= 3) break;
          await recoverLab(lab, say);
        }
      }
    }
    probe?.stop();
    await lab.down();
    lab = undefined;
  }

  // Baseline: the same lab without fastfence, Kubernetes' own eviction, defaults ÷ 10.
  const base: TrialResult[] = [];
  if (KB > 0) {
    say(`baseline: Kubernetes alone, defaults scaled ÷${SCALE}`);
    lab = await Lab.up({
      nodes: 3,
      bmc: "mixed",
      fastfence: false,
      log: say,
      workloads: false,
      kwokLeaseSeconds: 4,
      controllerManagerArgs: [`--node-monitor-grace-period=${50 / SCALE}s`],
      apiserverArgs: [
        `--default-not-ready-toleration-seconds=${300 / SCALE}`,
        `--default-unreachable-toleration-seconds=${300 / SCALE}`,
      ],
    });
    for (let i = 0; i < KB; i++) {
      try {
        const r = await runTrial(lab, "baseline-crash", {
          trial: 1000 + i,
          victim: lab.nodes[i % 3]!.name,
          timeoutMs: 120_000,
          reset: i < KB - 1,
        });
        base.push(r);
        say(
          `baseline #${i + 1} ${r.node}: replacement Deployment pod Running ${r.replacementRunningMs ?? "never"} ms (×${SCALE} = ${r.replacementRunningMs ? r.replacementRunningMs * SCALE : "-"} ms); StatefulSet pod ${r.statefulReplacementMs ?? "not within 120 s"}`,
        );
      } catch (err) {
        errors.push(`baseline #${i + 1}: ${err instanceof Error ? err.message : String(err)}`);
        break;
      }
    }
    await lab.down();
    lab = undefined;
  }

  // Report.
  const by = (sc: Scenario) => results.filter((r) => r.scenario === sc);
  const lines: string[] = [
    "# fastfence lab bench",
    "",
    artifactLine(artifact),
    accessLine(access),
    "",
    `3 simulated nodes (IPMI/Redfish mixed), real control plane, 3 KRaft brokers (RF 3, min ISR 2)${WATCHDOG ? ", an emulated watchdog per node" : ""}; Kafka client ${kafkaClientFrom(process.env.FASTFENCE_KAFKA_CLIENT)} (FASTFENCE_KAFKA_CLIENT); broker settings ${describeBrokerSettings(BROKERS)}; ${TOPOLOGY.text}. Trials: ${SCENARIOS.map((s) => `${s} ${trialsOf(s)}`).join(", ")}, baseline ${KB}. Wall time ${((Date.now() - t0) / 60000).toFixed(1)} min.`,
    "",
    planeText(CONTROL_PLANE, LEADER_ELECTION),
    "",
    `All times in ms from the fault. Victim = the node leading the most Kafka partitions (it also runs an event-source replica and one replica of every function)${CONTROL_PLANE === "compact" ? `, except the crash trials chosen by control-plane role (${ROLE_TRIALS.etcdLeader} etcd leader, ${ROLE_TRIALS.leases} Lease holder)` : ""}.`,
    "",
  ];
  const summary: Record<string, unknown> = {};
  let watchdog: Record<string, unknown> | undefined;
  for (const sc of SCENARIOS) {
    const rs = by(sc);
    if (rs.length === 0) {
      // Run, but no trial completed: in the summary (and the chart) all the same.
      summary[sc] = {
        trials: 0,
        faulted: SPECS[sc].faulted,
        safetyViolations: 0,
        trialsWithHealthyNodeFenced: 0,
      };
      lines.push(`## ${sc} (0 trials)`, "", "No trial completed; see Errors.", "");
      continue;
    }
    const st = stats(rs);
    const viol = rs.reduce((a, r) => a + r.safetyViolations, 0);
    const cpuBusy = percentiles(rs.map((r) => pct(r.hostCpu?.busy)));
    const healthyFenced = rs.filter((r) => r.violations.some((v) => v.rule === "H")).length;
    const chosen = rs.filter((r) => r.victimChoice);
    const victims = {
      activeController: chosen.filter((r) => r.victimChoice!.activeController).length,
      mostLeaders: chosen.filter((r) => r.victimChoice!.leaders === r.victimChoice!.mostLeaders).length,
    };
    summary[sc] = {
      victims,
      trials: rs.length,
      faulted: SPECS[sc].faulted,
      ...Object.fromEntries(PHASES.map((p) => [p, st[p]])),
      safetyViolations: viol,
      trialsWithHealthyNodeFenced: healthyFenced,
      hostCpuBusyPct: cpuBusy,
    };
    lines.push(
      `## ${sc} (${rs.length} trials)`,
      "",
      "| phase | n | p50 | p95 | p99 | max |",
      "|---|---:|---:|---:|---:|---:|",
    );
    for (const p of PHASES) {
      const s = st[p]!;
      lines.push(`| ${p} | ${s.n} | ${s.p50 ?? "-"} | ${s.p95 ?? "-"} | ${s.p99 ?? "-"} | ${s.max ?? "-"} |`);
    }
    lines.push(
      "",
      `Victims: the active KRaft controller in ${victims.activeController} of ${chosen.length} trials; hosting the most partition leaders in ${victims.mostLeaders} of ${chosen.length} (${chosen.map((r) => `${r.node}${r.victimChoice!.activeController ? "*" : ""} ${r.victimChoice!.leaders}/${r.victimChoice!.mostLeaders}`).join(", ")}; * = controller, leaders hosted / most on any node).`,
      "",
      hostCpuLine(rs, cpuBusy),
      "",
      `Safety violations: ${viol}; trials where a healthy node was fenced: ${healthyFenced}; fenced nodes per trial: ${rs.map((r) => `[${r.fencedNodes.join(",")}]`).join(" ")}`,
    );
    if (rs.some((r) => r.roles)) {
      const rolesOut = rolesSection(rs, planeText(CONTROL_PLANE, LEADER_ELECTION));
      lines.push("", ...rolesOut.lines);
      (summary[sc] as Record<string, unknown>).byRole = rolesOut.rows;
    }
    if (sc === "hang" || sc === "hang-mid-round") {
      // Issue 14's budget for a frozen node: twice the crash p99 of the same run.
      const crashP99 = by("crash").length ? stats(by("crash")).releasedMs?.p99 : undefined;
      const budget = crashP99 === undefined ? undefined : 2 * crashP99;
      const within = rs.filter((r) => budget !== undefined && (r.releasedMs ?? Infinity) <= budget).length;
      (summary[sc] as Record<string, unknown>).budget = { ms: budget ?? null, within };
      lines.push(
        "",
        sc === "hang"
          ? `Per trial (idle before the fault, victim, released): ${rs.map((r) => `${(r.idleMs ?? 0) / 1000} s ${r.node}${r.victimChoice?.activeController ? "*" : ""} ${r.releasedMs ?? "never"} ms`).join("; ")}.`
          : `Per trial (victim, released from the freeze; the operator's request was confirmed just before it): ${rs.map((r) => `${r.node}${r.victimChoice?.activeController ? "*" : ""} ${r.releasedMs ?? "never"} ms`).join("; ")}.`,
        budget === undefined
          ? "Budget (2 × the crash p99 of the same run): no crash trial in this run."
          : `Budget (2 × the crash p99 of the same run): ${budget} ms; ${within} of ${rs.length} ${sc} trials within it.`,
      );
    }
    for (const r of rs)
      for (const v of r.violations)
        lines.push(`- trial ${r.trial} ${v.rule} ${v.node ?? ""} ${v.incident ?? ""}: ${v.detail}`);
    lines.push("");
  }
  if (base.length) {
    const b = base.map((r) => r.replacementRunningMs);
    lines.push(
      `## Baseline: Kubernetes alone (${base.length} trial(s))`,
      "",
      `Measured with defaults ÷${SCALE} (node-monitor-grace-period 5 s, toleration 30 s, lease 4 s): replacement Deployment pod Running at ${b.map((x) => x ?? "never").join(", ")} ms → ×${SCALE}: ${b.map((x) => (x ? `${(x * SCALE) / 1000} s` : "never")).join(", ")} with the real defaults (50 s + 300 s).`,
      `StatefulSet pod with an RWO volume and the VM: ${base.map((r) => (r.statefulReplacementMs ? `${r.statefulReplacementMs} ms` : "not replaced within the window (the pod stays Terminating on the unreachable node; the attach/detach controller force-detaches only after 6 min)")).join("; ")}.`,
      "",
    );
    summary.baseline = {
      trials: base.length,
      scale: SCALE,
      replacementRunningMsMeasured: b,
      replacementRunningMsAtRealDefaults: b.map((x) => (x ? x * SCALE : null)),
      statefulReplacementMsMeasured: base.map((r) => r.statefulReplacementMs ?? null),
    };
  }
  if (WATCHDOG) {
    const wd = watchdogSection(
      Object.fromEntries(SCENARIOS.map((sc) => [sc, by(sc).length ? stats(by(sc)).releasedMs : undefined])),
    );
    lines.push(...wd.lines);
    watchdog = wd.summary; // beside `scenarios` in RESULT (the chart reads every key there as a scenario)
  }
  if (errors.length) lines.push("## Errors", "", ...errors.map((e) => `- ${e}`), "");
  // One chart: every scenario run, the baseline of this run and the peers' stated figures.
  const svg = benchSvg(benchSummaryOf(summary));
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  lines.push(
    `![every scenario run, beside Kubernetes alone and the peers](bench-lab-${stamp}.svg)`,
    "",
    'The chart: per scenario, fastfence\'s p50 (shaded by phase), p99 and max in seconds from the fault (log scale); beside it Kubernetes alone as measured above, and the stated figures of Pacemaker and NodeHealthCheck with their sources (docs/lab.md, "Peers").',
    "",
  );
  const files = writeReport(`bench-lab-${stamp}`, { md: lines.join("\n"), svg });
  say(`report: ${files.join(", ")}`);
  const totalViol = results.reduce((a, r) => a + r.safetyViolations, 0);
  const crash = by("crash");
  const cr = stats(crash);
  console.log(
    `RESULT ${JSON.stringify({ scenarios: summary, ...(watchdog ? { watchdog } : {}), kafkaClient: kafkaClientFrom(process.env.FASTFENCE_KAFKA_CLIENT), brokers: BROKERS, controlPlane: CONTROL_PLANE, leaderElection: CONTROL_PLANE === "compact" ? LEADER_ELECTION : null, topology: { stages: TOPOLOGY.stages, labOnly: TOPOLOGY.labOnly }, crashReleasedP99: cr.releasedMs?.p99 ?? null, crashTrials: crash.length, artifact: artifactRef(artifact), access: access ?? null, safetyViolations: totalViol, errors: errors.length, report: files[0] })}`,
  );
  const crashOk = !SCENARIOS.includes("crash") || (cr.releasedMs?.p99 ?? Infinity) <= 4000;
  return errors.length === 0 && totalViol === 0 && crashOk ? 0 : 1;
}

main().then(
  (c) => process.exit(c),
  async (err: unknown) => {
    console.error(err);
    await lab?.down().catch(() => undefined);
    console.log(`RESULT ${JSON.stringify({ error: err instanceof Error ? err.message : String(err) })}`);
    process.exit(1);
  },
);

/** After a failed trial: heal, resume and power on every node, then let the lab settle. */
async function recoverLab(l: Lab, say: (s: string) => void): Promise<void> {
  for (const x of l.nodes) {
    try {
      l.resume(x.name);
      await l.heal(x.name);
      if ((await l.powerState(x.name)) === "Off") await l.powerOn(x.name);
    } catch (err) {
      say(`  (recovering ${x.name} failed: ${err instanceof Error ? err.message : String(err)})`);
    }
  }
  await new Promise((r) => setTimeout(r, 20_000));
}
