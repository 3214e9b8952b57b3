// One lab trial, step by step: put fresh workloads on a victim node, inject the
// scenario's fault (scenarios.ts), follow the incident live (trial-follow.ts), check the
// invariants against the event log and the lab's ground truth and measure each phase in
// ms from the fault (trial-check.ts), then put the lab back (trial-reset.ts) so the next
// trial starts from a healthy cluster. Used by lab/demo.ts and bench/lab.ts. It only
// drives the lab; it never fences anything itself.
import type { NodeFence } from "../core/incident.ts";
import type { FfEvent } from "../events/envelope.ts";
import { listIncidents } from "./event-log.ts";
import type { Violation } from "./invariants.ts";
import type { VictimChoice } from "./kafka.ts";
import type { CpuShare } from "./host-load.ts";
import type { ApiErrors } from "./api-probe.ts";
import type { HeldRoles } from "./victim-roles.ts";
import type { Lab } from "./lab.ts";
import { SCENARIOS, type Scenario } from "./scenarios.ts";
import { check, measure, type TrialStart } from "./trial-check.ts";
import { follow, Timeline } from "./trial-follow.ts";
import { resetAfter } from "./trial-reset.ts";
import { step } from "./error-text.ts";
import { createWorkloads, podsOn, vmLaunchersOn } from "./workloads.ts";

export type { Scenario } from "./scenarios.ts";

export interface TrialResult {
  scenario: Scenario;
  trial: number;
  node: string;
  t0: number;
  detectedMs?: number;
  confirmedMs?: number;
  powerOffConfirmedMs?: number;
  releasedMs?: number;
  replacementRunningMs?: number;
  statefulReplacementMs?: number;
  /** VMs released: their virt-launcher pods ran on the victim before the fault and were gone after the release. */
  vmsReleased: number;
  fencedNodes: string[];
  safetyViolations: number;
  violations: Violation[];
  incident?: NodeFence;
  timeline: { ms: number; what: string }[];
  events: FfEvent[];
  note?: string;
  /**
   * Where the time went, ms from the fault: the first event of each stage in the event
   * log and the power-off attempt's own timestamps (diagnostics for the bench).
   */
  stagesMs?: Record<string, number>;
  /** The reset found the victim powered off again while it rebooted (a booting node fenced). */
  refencedDuringReboot?: number;
  /** How the victim was chosen, when the trial chose it: leaders it hosted, the most any node did, controller or not. */
  victimChoice?: VictimChoice;
  /** How long the lab idled before the fault (TrialOptions.idleMs), when it did. */
  idleMs?: number;
  /** Share of the host's CPUs busy (and stolen) from the fault to the release, when the bench sampled it (host-load.ts). */
  hostCpu?: CpuShare;
  /** Compact plane: the control-plane leaderships the victim held just before the trial (victim-roles.ts). */
  roles?: HeldRoles;
  /** Compact plane: etcd elections from just before the trial to its end (raft term raised). */
  etcdElections?: number;
  /** A new client's API requests that failed from the fault to the release (api-probe.ts). */
  apiErrors?: ApiErrors;
}

export interface TrialOptions {
  trial: number;
  victim?: string;
  /** Choose the active KRaft controller's node as the victim (kafka.ts chooseVictim). */
  preferController?: boolean;
  /** Leave the lab idle this long once the workloads are placed, before the fault (default 0). */
  idleMs?: number;
  timeoutMs?: number;
  observeMs?: number;
  live?: (line: string) => void;
  withObservations?: boolean;
  reset?: boolean;
}

/** The lab before the fault: boot IDs, incidents that are history, power log marks. */
export async function startOf(lab: Lab, tStart: number): Promise<TrialStart> {
  const bootIds: TrialStart["bootIds"] = [];
  for (const x of lab.nodes) {
    const bootId = (await lab.core.readNode({ name: x.name })).status?.nodeInfo?.bootID ?? "";
    bootIds.push({ node: x.name, bootId, since: 0 });
  }
  // Incidents that are over, or about an earlier incarnation, are history; an open one for
  // a current incarnation (e.g. opened while the node booted) still counts for this trial.
  const current = new Map(bootIds.map((b) => [b.node, b.bootId]));
  const before = new Set(
    (await listIncidents(lab))
      .filter(
        (i) =>
          ["Recovered", "Closed"].includes(i.status?.phase ?? "") ||
          current.get(i.spec.nodeName) !== i.spec.bootId,
      )
      .map((i) => i.metadata.name),
  );
  const powerMark = new Map(lab.nodes.map((x) => [x.name, x.powerLog.length]));
  return { tStart, bootIds, before, powerMark };
}

/**
 * Run one trial. `victim` defaults to the node hosting the most Kafka partition leaders.
 * `observeMs`: for scenarios that must not fence, how long to watch.
 */
export async function runTrial(lab: Lab, scenario: Scenario, opts: TrialOptions): Promise<TrialResult> {
  const tStart = Date.now();
  const spec = SCENARIOS[scenario];
  const choice = opts.victim
    ? undefined
    : await step("choosing the victim", () => lab.chooseVictim(opts.preferController ?? false));
  const victim = opts.victim ?? choice!.name;
  const sfx = `-t${opts.trial}`;
  const live = opts.live ?? (() => undefined);
  const start = await step("reading the lab before the fault", () => startOf(lab, tStart));
  const wl = await step("creating the workloads", () => createWorkloads(lab, sfx, victim));
  const { placed, launchersPlaced, webPod } = await step("reading where the workloads run", async () => ({
    placed: (await podsOn(lab, victim)).map((p) => p.metadata!.name!),
    launchersPlaced: await vmLaunchersOn(lab, victim),
    webPod: (await lab.core.listNamespacedPod({ namespace: "default", labelSelector: `app=${wl.web}` }))
      .items[0],
  }));
  const webOnVictim = webPod?.spec?.nodeName === victim;

  if (opts.idleMs) await new Promise((r) => setTimeout(r, opts.idleMs));
  const t0 = await step(`the fault (${scenario})`, () => spec.fault(lab, victim));
  const timeline = new Timeline(t0, live);
  timeline.say(`fault: ${scenario} ${victim} (pods there: ${placed.join(", ")})`, t0);
  const timeoutMs = opts.timeoutMs ?? spec.followMs ?? opts.observeMs ?? 12_000;
  const followed = await step("following the incident", () =>
    follow(lab, spec, { victim, wl, before: start.before, timeline, timeoutMs }),
  );

  const withObservations = opts.withObservations ?? false;
  const checked = await step("checking the invariants", () =>
    check(lab, spec, { victim, start, withObservations }),
  );
  const { incident } = followed;
  const m = await step("measuring", () =>
    measure(lab, { victim, t0, ...(incident ? { incident } : {}), checked, launchersPlaced }),
  );
  const result: TrialResult = {
    scenario,
    stagesMs: m.stagesMs,
    trial: opts.trial,
    node: victim,
    t0,
    detectedMs: m.detectedMs,
    confirmedMs: m.confirmedMs,
    powerOffConfirmedMs: m.powerOffConfirmedMs,
    releasedMs: m.releasedMs,
    replacementRunningMs: followed.replacementRunningMs,
    statefulReplacementMs: followed.statefulReplacementMs,
    vmsReleased: m.vmsReleased,
    fencedNodes: m.fencedNodes,
    safetyViolations: checked.violations.length,
    violations: checked.violations,
    ...(incident ? { incident } : {}),
    timeline: timeline.lines,
    events: checked.log.events,
    ...(choice ? { victimChoice: choice } : {}),
    ...(opts.idleMs ? { idleMs: opts.idleMs } : {}),
    ...(webOnVictim ? {} : { note: `web pod was scheduled on ${webPod?.spec?.nodeName}, not the victim` }),
  };
  if (opts.reset ?? true)
    result.refencedDuringReboot = await step("resetting the lab", () =>
      resetAfter(lab, scenario, victim, sfx, live),
    );
  return result;
}

export { listIncidents, readEventLog } from "./event-log.ts";
export { resetAfter } from "./trial-reset.ts";
