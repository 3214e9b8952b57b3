// `make demo`: bring up the 3-node lab (IPMI and Redfish BMCs mixed), crash (silently) the node
// that hosts the most of the pipeline (most Kafka partition leaders, plus its event
// source and function replicas), show the incident live, print its trace from the event
// log, write a Markdown + SVG report under .cache/reports/, tear down, and print one
// `RESULT {json}` line. Always tears down, also on failure or Ctrl-C.
import { formatTrace, selectChain, traceRows } from "../events/trace-format.ts";
import type { FfEvent } from "../events/envelope.ts";
import { Lab } from "./lab.ts";
import { artifactLine, artifactRef } from "./artifact.ts";
import { accessLine } from "./shipped-access.ts";
import { tearDownOnSignals } from "./state.ts";
import { DEMO_GOALS, demoMilestones, demoSvg, type DemoResult } from "./demo-chart.ts";
import { writeReport } from "./report.ts";
import { runTrial, type TrialResult } from "./trial.ts";

/** The incident's chain, with each observer's probe misses reduced to its first one (the rest is noise). */
function traceChain(events: FfEvent[], incident: string): FfEvent[] {
  const seen = new Set<string>();
  return selectChain(events, incident).filter((e) => {
    if (e.type !== "io.fastfence.node.observed.v1") return true;
    const d = e.data as { result?: string; observer?: { node?: string } };
    const k = `${d.observer?.node}/${d.result}`;
    if (d.result !== "missed" || seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** Names of TrialResult.stagesMs keys, for people. */
const STAGE_LABELS: Record<string, string> = {
  suspected: "first suspicion published",
  requested: "fence requested",
  attemptStart: "power-off attempt started",
  offAcked: "BMC acknowledged off",
  readBackOff: "read back Off",
  fencedEvent: "node.fenced published",
  releasedEvent: "workloads.released published",
};
const t0 = Date.now();
const say = (l: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${l}`);

let lab: Lab | undefined;
tearDownOnSignals(["SIGINT", "SIGTERM"], 130, (sig) => console.error(`\n${sig}: tearing the lab down`));

async function main(): Promise<number> {
  say(
    "bringing up the lab: 3 nodes (node-a IPMI, node-b Redfish, node-c IPMI), real control plane, 3 Kafka brokers",
  );
  lab = await Lab.up({ nodes: 3, bmc: "mixed", log: say, workloads: true });
  const meta = await lab.kafkaMeta();
  const victim = (await lab.chooseVictim(false)).name;
  const x = lab.node(victim);
  say(
    `partition leaders per broker: ${lab.nodes.map((n) => `${n.name}=${meta.leaders[n.index + 1] ?? 0}`).join(" ")}`,
  );
  say(
    `victim: ${victim} (${x.bmc} BMC) — it hosts a Kafka broker leading ${meta.leaders[x.index + 1] ?? 0} partitions, an event-source replica and one replica of every function`,
  );
  say(
    "warming up 3 s, then putting a Deployment pod, a StatefulSet pod with an RWO volume + VolumeAttachment and a VM on the victim",
  );
  await new Promise((r) => setTimeout(r, 3000));
  say(`CRASH ${victim}: its link down and every process SIGKILLed — it answers nothing (power stays On)`);
  const r: TrialResult = await runTrial(lab, "crash", {
    trial: 1,
    victim,
    live: (l) => console.log(l),
    withObservations: true,
    reset: false,
  });

  if (r.incident) {
    const chain = traceChain(r.events, r.incident.metadata.name);
    console.log(`\nfastfence trace ${r.incident.metadata.name}\n${formatTrace(traceRows(chain))}`);
  }
  const stages = Object.entries(r.stagesMs ?? {})
    .sort((a, b) => a[1] - b[1])
    .map(([k, v]) => `${STAGE_LABELS[k] ?? k} +${v}`);
  if (stages.length) console.log(`\nwhere the time went (ms from the crash): ${stages.join(", ")}`);
  const result: DemoResult & Record<string, unknown> = {
    scenario: "crash",
    node: victim,
    bmc: x.bmc,
    detectedMs: r.detectedMs ?? null,
    confirmedMs: r.confirmedMs ?? null,
    powerOffConfirmedMs: r.powerOffConfirmedMs ?? null,
    releasedMs: r.releasedMs ?? null,
    replacementRunningMs: r.replacementRunningMs ?? null,
    statefulReplacementMs: r.statefulReplacementMs ?? null,
    vmsReleased: r.vmsReleased,
    safetyViolations: r.safetyViolations,
    artifact: artifactRef(lab.state.artifact),
    access: lab.state.access ?? null,
  };
  const milestones = demoMilestones(result);
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const svg = demoSvg(result);
  const md = [
    `# fastfence demo — crash of ${victim}`,
    "",
    `Lab: 3 simulated nodes (network + PID namespaces), real etcd / kube-apiserver / controller-manager / scheduler, 3 KRaft brokers (RF 3, min ISR 2), kwok kubelets, BMCs: ${lab.nodes.map((n) => `${n.name} ${n.bmc}`).join(", ")}.`,
    artifactLine(lab.state.artifact),
    accessLine(lab.state.access),
    `Victim: ${victim}, leader of ${meta.leaders[x.index + 1] ?? 0} pipeline partitions, with one event-source replica and one replica of every function. The crash is silent (its link down, then every process killed: no TCP reset, no ICMP), as a dead machine (docs/lab.md, "crash and proc-crash").`,
    "",
    "| milestone | ms from the crash | goal |",
    "|---|---:|---:|",
    ...milestones.map((m) => `| ${m.label} | ${m.ms} | ${m.goalMs ? `≤ ${m.goalMs}` : ""} |`),
    "",
    `VMs released (launcher pods deleted): ${r.vmsReleased}. Safety violations (S1–S6, healthy node fenced): ${r.safetyViolations}.`,
    ...r.violations.map((v) => `- ${v.rule} ${v.incident ?? ""}: ${v.detail}`),
    "",
    `Where the time went (ms from the crash): ${stages.join(", ") || "(no stages recorded)"}.`,
    "",
    `![timeline](demo-${stamp}.svg)`,
    "",
    "## Live timeline",
    "",
    "```",
    ...r.timeline.map((t) => `+${String(t.ms).padStart(6)} ms  ${t.what}`),
    "```",
    "",
    "## Trace (from the Kafka event log)",
    "",
    "```",
    r.incident ? formatTrace(traceRows(traceChain(r.events, r.incident.metadata.name))) : "(no incident)",
    "```",
    "",
  ].join("\n");
  const files = writeReport(`demo-${stamp}`, { md, svg });
  say(`report: ${files.join(", ")}`);
  say("tearing down");
  await lab.down();
  lab = undefined;
  const ok =
    (r.releasedMs ?? Infinity) <= DEMO_GOALS.releasedMs &&
    (r.replacementRunningMs ?? Infinity) <= DEMO_GOALS.replacementRunningMs &&
    r.safetyViolations === 0;
  console.log(`RESULT ${JSON.stringify(result)}`);
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    console.error(err);
    await lab?.down().catch(() => undefined);
    console.log(
      `RESULT ${JSON.stringify({ scenario: "crash", error: err instanceof Error ? err.message : String(err) })}`,
    );
    process.exit(1);
  },
);
