// The check and measure steps of a trial. check: the lab's ground truth (which node was
// really broken, every power action a BMC carried out since the trial began, the boot
// IDs), the incidents and the event log, run through the invariant checker (the event
// log is read again while S5 reports events the stages had not published yet). measure:
// each phase in ms from the fault, from the incident's own timestamps and the first event
// of each stage (per observer for the suspicions), and what was released. Read only: it
// never changes the lab.
import type { NodeFence } from "../core/incident.ts";
import { EVENT_TYPES } from "../events/catalog.ts";
import type { FfEvent } from "../events/envelope.ts";
import type { NodeSuspected } from "../events/schemas.ts";
import { sleep } from "../harness/env/base.ts";
import { readEventLog, listIncidents, type EventLog } from "./event-log.ts";
import { checkInvariants, type TrialFacts, type Violation } from "./invariants.ts";
import { bmcLies, type BmcLieFinding } from "./bmc-lies.ts";
import type { Lab } from "./lab.ts";
import type { ScenarioSpec } from "./scenarios.ts";
import { NAMESPACE } from "./types.ts";
import { vmLaunchersGone } from "./workloads.ts";

const CONFIRM = `system:serviceaccount:${NAMESPACE}:fastfence-confirm`;

/** What the lab looked like when the trial began. */
export interface TrialStart {
  /** ms epoch when the trial began (events before it are not checked). */
  tStart: number;
  bootIds: TrialFacts["bootIds"];
  /** Incidents that were history before the fault. */
  before: Set<string>;
  /** Each node's power log length before the fault. */
  powerMark: Map<string, number>;
}

export interface Checked {
  /** Incidents opened during the trial. */
  incidents: NodeFence[];
  log: EventLog;
  violations: Violation[];
  /** BMCs that read a node back Off without powering it off: the hardware's fault, not a violation. */
  bmcLied: BmcLieFinding[];
}

export async function check(
  lab: Lab,
  spec: ScenarioSpec,
  o: {
    victim: string;
    start: TrialStart;
    withObservations: boolean;
    /** Nodes besides a faulted victim that may be fenced without a violation (chaos-schedule.ts mayBeFenced). */
    mayBeFenced?: string[];
  },
): Promise<Checked> {
  const everything = await listIncidents(lab);
  const allNames = everything.map((i) => i.metadata.name);
  const incidents = everything.filter((i) => !o.start.before.has(i.metadata.name));
  const powerActions = lab.nodes.flatMap((x) =>
    x.powerLog.slice(o.start.powerMark.get(x.name) ?? 0).map((p) => ({ node: x.name, ...p })),
  );
  const facts: TrialFacts = {
    nodes: lab.nodes.map((x) => x.name),
    faulted: [...(spec.faulted ? [o.victim] : []), ...(o.mayBeFenced ?? [])],
    powerActions,
    resets: lab.faults
      .filter((f) => (f.kind === "power-loss" || f.kind === "watchdog-reset") && f.at >= o.start.tStart)
      .map((f) => ({ node: f.node, at: f.at, kind: f.kind })),
    bootIds: o.start.bootIds,
    trustedConfirmers: [CONFIRM],
    ...(spec.operatorRequest ? { operatorRequested: [o.victim] } : {}),
    quorum: 2,
    maxConcurrentFenced: 1,
  };
  const invariants = (log: EventLog) =>
    checkInvariants({
      events: log.events.filter((e) => Date.parse(e.time) >= o.start.tStart),
      incidents,
      knownIncidents: allNames,
      deadLetters: log.deadLetters,
      facts,
    });
  if (spec.baseline) return { incidents, log: { events: [], deadLetters: [] }, violations: [], bmcLied: [] };
  // The event log: stages publish after their API write, so give the last events a moment.
  let log = await readEventLog(lab, o.withObservations);
  let violations = invariants(log);
  for (let i = 0; i < 4 && violations.some((v) => v.rule === "S5"); i++) {
    await sleep(1000);
    log = await readEventLog(lab, o.withObservations);
    violations = invariants(log);
  }
  return { incidents, log, violations, bmcLied: bmcLies({ events: [], incidents, facts }) };
}

export interface Measured {
  detectedMs?: number;
  confirmedMs?: number;
  powerOffConfirmedMs?: number;
  releasedMs?: number;
  vmsReleased: number;
  fencedNodes: string[];
  stagesMs: Record<string, number>;
}

export async function measure(
  lab: Lab,
  o: { victim: string; t0: number; incident?: NodeFence; checked: Checked; launchersPlaced: string[] },
): Promise<Measured> {
  const { victim, t0 } = o;
  const events = o.checked.log.events;
  const st = o.incident?.status;
  const rel = (iso: string | undefined) => (iso ? Date.parse(iso) - t0 : undefined);
  const first = (type: string): FfEvent | undefined =>
    events
      .filter(
        (e) => e.type === type && (e.data as { node?: string }).node === victim && Date.parse(e.time) >= t0,
      )
      .sort((a, b) => Date.parse(a.time) - Date.parse(b.time))[0];
  const suspectedEv = first(EVENT_TYPES.nodeSuspected);
  const fencedNodes = [
    ...new Set(
      o.checked.incidents
        .filter((i) => i.status?.powerOffConfirmedAt || (i.status?.attempts.length ?? 0) > 0)
        .map((i) => i.spec.nodeName),
    ),
  ];
  const stagesMs: Record<string, number> = {};
  const firstOf = (type: string, key: string) => {
    const ev = first(type);
    if (ev) stagesMs[key] = Date.parse(ev.time) - t0;
  };
  firstOf(EVENT_TYPES.nodeSuspected, "suspected");
  Object.assign(stagesMs, observerStages(events, victim, t0));
  firstOf(EVENT_TYPES.fenceRequested, "requested");
  const attempt = st?.attempts.find((a) => a.result === "off-confirmed") ?? st?.attempts[0];
  for (const [k, v] of [
    ["attemptStart", attempt?.startedAt],
    ["offAcked", attempt?.commandAt],
    ["readBackOff", attempt?.readBackAt],
  ] as const) {
    const ms = rel(v);
    if (ms !== undefined) stagesMs[k] = ms;
  }
  firstOf(EVENT_TYPES.nodeFenced, "fencedEvent");
  firstOf(EVENT_TYPES.workloadsReleased, "releasedEvent");
  return {
    detectedMs: suspectedEv ? Date.parse(suspectedEv.time) - t0 : rel(st?.timestamps.suspected),
    confirmedMs: rel(st?.timestamps.confirmed),
    powerOffConfirmedMs: rel(st?.powerOffConfirmedAt),
    releasedMs: rel(st?.timestamps.released),
    // Ground truth, not the event's count: two replicas may release at once, and the one
    // whose write wins may have found the other's deletions already done.
    vmsReleased: st?.timestamps.released ? await vmLaunchersGone(lab, o.launchersPlaced).catch(() => 0) : 0,
    fencedNodes,
    stagesMs,
  };
}

/**
 * Per observer node of the victim: when its miss streak began (`firstMiss@<node>`, from the
 * evidence) and when its first suspicion was published (`suspected@<node>`). Confirm waits
 * for the last of them, so a long confirm hop shows which observer was late, and whether
 * its probe saw the crash late or its suspicion took long to be published.
 */
export function observerStages(events: FfEvent[], victim: string, t0: number): Record<string, number> {
  const out: Record<string, number> = {};
  const suspicions = events
    .filter((e) => e.type === EVENT_TYPES.nodeSuspected && Date.parse(e.time) >= t0)
    .sort((a, b) => Date.parse(a.time) - Date.parse(b.time));
  for (const ev of suspicions) {
    const d = ev.data as NodeSuspected;
    if (d.node !== victim || d.evidence?.kind !== "probe") continue;
    const who = d.evidence.observerNode;
    out[`suspected@${who}`] ??= Date.parse(ev.time) - t0;
    if (d.evidence.firstMissAt) out[`firstMiss@${who}`] ??= Date.parse(d.evidence.firstMissAt) - t0;
  }
  return out;
}
