// One lab trial: put fresh workloads on a victim node, inject a fault, follow the
// incident live (phase by phase, ms from the fault), measure each phase, read the event
// log back, run the invariant checker, then put the lab back (power the node on, heal,
// delete the workloads) so the next trial starts from a healthy cluster. Used by
// lab/demo.ts and bench/lab.ts. It only drives the lab; it never fences anything itself.
import type { NodeFence } from "../core/incident.ts";
import { EVENT_TYPES, parseEvent, TOPICS } from "../events/catalog.ts";
import { decodeKafka } from "../events/codec.ts";
import type { FfEvent } from "../events/envelope.ts";
import { KafkaJsBus } from "../infra/bus/kafkajs-bus.ts";
import { checkInvariants, type TrialFacts, type Violation } from "./invariants.ts";
import { NAMESPACE, type Lab } from "./lab.ts";
import { createWorkloads, deleteWorkloads, podsOn, vmisGone, vmisOn } from "./workloads.ts";

export type Scenario =
  | "crash"
  | "hang"
  | "partition"
  | "function-crash"
  | "partial-partition"
  | "partial-partition-api"
  | "baseline-crash";

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
  /** VMIs that ran on the victim before the fault and were gone after the release. */
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
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CONFIRM = `system:serviceaccount:${NAMESPACE}:fastfence-confirm`;
const PIPELINE_TOPICS = [
  TOPICS.suspicions,
  TOPICS.fenceRequests,
  TOPICS.fenceResults,
  TOPICS.releases,
  TOPICS.recoveries,
];

export async function listIncidents(lab: Lab): Promise<NodeFence[]> {
  for (let i = 0; ; i++) {
    try {
      const l = (await lab.custom.listNamespacedCustomObject({
        group: "fastfence.io",
        version: "v1alpha1",
        plural: "nodefences",
        namespace: NAMESPACE,
      })) as { items: NodeFence[] };
      return l.items;
    } catch (err) {
      if (i >= 50) throw err;
      await sleep(200);
    }
  }
}

/** Read the event log (pipeline topics, optionally observations) and the dead letters. */
export async function readEventLog(
  lab: Lab,
  withObservations = false,
): Promise<{ events: FfEvent[]; deadLetters: Record<string, unknown>[] }> {
  const bus = new KafkaJsBus({ brokers: lab.brokers, clientId: `lab-reader-${Date.now()}` });
  try {
    const recs = await bus.readAll(
      [...PIPELINE_TOPICS, ...(withObservations ? [TOPICS.observations] : []), TOPICS.deadLetter],
      { timeoutMs: 30_000 },
    );
    const events: FfEvent[] = [];
    const deadLetters: Record<string, unknown>[] = [];
    for (const r of recs) {
      try {
        if (r.topic === TOPICS.deadLetter)
          deadLetters.push(JSON.parse(r.value?.toString("utf8") ?? "{}") as Record<string, unknown>);
        else events.push(parseEvent(decodeKafka(r)));
      } catch {
        deadLetters.push({ undecodable: true, topic: r.topic, offset: r.offset });
      }
    }
    return { events, deadLetters };
  } finally {
    await bus.close().catch(() => undefined);
  }
}

async function bootIdOf(lab: Lab, node: string): Promise<string> {
  return (await lab.core.readNode({ name: node })).status?.nodeInfo?.bootID ?? "";
}

const FAULTED: Record<Scenario, boolean> = {
  crash: true,
  hang: true,
  partition: true,
  "baseline-crash": true,
  "function-crash": false,
  "partial-partition": false,
  "partial-partition-api": false,
};

/**
 * Run one trial. `victim` defaults to the node hosting the most Kafka partition leaders.
 * `observeMs`: for scenarios that must not fence, how long to watch.
 */
export async function runTrial(
  lab: Lab,
  scenario: Scenario,
  opts: {
    trial: number;
    victim?: string;
    timeoutMs?: number;
    observeMs?: number;
    live?: (line: string) => void;
    withObservations?: boolean;
    reset?: boolean;
  },
): Promise<TrialResult> {
  const tStart = Date.now();
  const victim = opts.victim ?? (await lab.busiestNode());
  const sfx = `-t${opts.trial}`;
  const live = opts.live ?? (() => undefined);
  const baseline = scenario === "baseline-crash";
  const bootIds: TrialFacts["bootIds"] = [];
  for (const x of lab.nodes) bootIds.push({ node: x.name, bootId: await bootIdOf(lab, x.name), since: 0 });
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
  const wl = await createWorkloads(lab, sfx, victim);
  const placed = (await podsOn(lab, victim)).map((p) => p.metadata!.name!);
  const vmisPlaced = await vmisOn(lab, victim);
  const webPod = (await lab.core.listNamespacedPod({ namespace: "default", labelSelector: `app=${wl.web}` }))
    .items[0];
  const webOnVictim = webPod?.spec?.nodeName === victim;

  // The fault.
  let t0 = Date.now();
  let otherNode = victim;
  if (scenario === "crash" || baseline) t0 = await lab.crash(victim);
  else if (scenario === "hang") t0 = lab.hang(victim);
  else if (scenario === "partition") t0 = await lab.partition(victim);
  else if (scenario === "partial-partition") t0 = await lab.partialPartition(victim, "peers");
  else if (scenario === "partial-partition-api") t0 = await lab.partialPartition(victim, "api");
  else if (scenario === "function-crash") {
    // Crash every function replica and the event source on a healthy node (not the victim of anything).
    otherNode = victim;
    t0 = Date.now();
    await lab.functionCrash(
      otherNode,
      ["detect", "confirm", "fence", "remediate-workloads", "recover"],
      true,
    );
  }
  const timeline: { ms: number; what: string }[] = [];
  const say = (what: string, at = Date.now()) => {
    const ms = at - t0;
    timeline.push({ ms, what });
    live(`  +${String(ms).padStart(6)} ms  ${what}`);
  };
  say(`fault: ${scenario} ${victim} (pods there: ${placed.join(", ")})`, t0);

  const timeoutMs =
    opts.timeoutMs ?? (baseline ? 420_000 : FAULTED[scenario] ? 30_000 : (opts.observeMs ?? 12_000));
  const end = t0 + timeoutMs;
  const seen = new Set<string>();
  let incident: NodeFence | undefined;
  let replacementRunningMs: number | undefined;
  let statefulReplacementMs: number | undefined;
  let podsGoneMs: number | undefined;
  while (Date.now() < end) {
    const incs = (await listIncidents(lab).catch(() => [] as NodeFence[])).filter(
      (i) => !before.has(i.metadata.name),
    );
    for (const inc of incs) {
      const st = inc.status;
      if (!st) continue;
      for (const [k, v] of Object.entries(st.timestamps)) {
        const key = `${inc.metadata.name}/${k}`;
        if (v && !seen.has(key)) {
          seen.add(key);
          say(
            `${inc.spec.nodeName}: ${k}${k === "confirmed" ? ` (observers: ${[...new Set(st.evidence.map((e) => e.observerNode))].join(", ")})` : ""}`,
            Date.parse(v),
          );
        }
      }
      if (st.powerOffConfirmedAt && !seen.has(`${inc.metadata.name}/off`)) {
        seen.add(`${inc.metadata.name}/off`);
        const a = st.attempts.find((x) => x.result === "off-confirmed");
        say(
          `${inc.spec.nodeName}: power-off read back ${a?.readBackState ?? "?"} via ${a?.driver ?? "?"} (by ${a?.by ?? "?"})`,
          Date.parse(st.powerOffConfirmedAt),
        );
      }
      if (inc.spec.nodeName === victim) incident = inc;
    }
    if (FAULTED[scenario]) {
      if (podsGoneMs === undefined && incident?.status?.timestamps.released) {
        const left = await podsOn(lab, victim);
        if (left.length === 0) {
          podsGoneMs = Date.now() - t0;
          say(`no pods bound to ${victim} any more`);
        }
      }
      if (replacementRunningMs === undefined) {
        const pods = (
          await lab.core.listNamespacedPod({ namespace: "default", labelSelector: `app=${wl.web}` })
        ).items;
        const r = pods.find(
          (p) =>
            p.status?.phase === "Running" && p.spec?.nodeName !== victim && !p.metadata?.deletionTimestamp,
        );
        if (r) {
          replacementRunningMs = Date.now() - t0;
          say(`replacement ${r.metadata!.name} Running on ${r.spec!.nodeName}`);
        }
      }
      if (statefulReplacementMs === undefined) {
        const p = await lab.core
          .readNamespacedPod({ name: wl.dbPod, namespace: "default" })
          .catch(() => undefined);
        if (
          p &&
          p.status?.phase === "Running" &&
          p.spec?.nodeName !== victim &&
          !p.metadata?.deletionTimestamp
        ) {
          statefulReplacementMs = Date.now() - t0;
          say(`${wl.dbPod} (RWO volume) Running on ${p.spec!.nodeName}`);
        }
      }
      const done = baseline
        ? replacementRunningMs !== undefined
        : replacementRunningMs !== undefined &&
          !!incident?.status?.timestamps.released &&
          podsGoneMs !== undefined;
      if (done) break;
    }
    // Phase times come from the incident's own timestamps; this poll only times the
    // replacement pods (±100 ms) and must not load the API server it measures.
    await sleep(baseline ? 500 : 100);
  }

  // Ground truth and the event log, then the invariants.
  const everything = await listIncidents(lab);
  const allNames = everything.map((i) => i.metadata.name);
  const incidents = everything.filter((i) => !before.has(i.metadata.name));
  const powerActions = lab.nodes.flatMap((x) =>
    x.powerLog.slice(powerMark.get(x.name) ?? 0).map((p) => ({ node: x.name, ...p })),
  );
  const facts: TrialFacts = {
    nodes: lab.nodes.map((x) => x.name),
    faulted: FAULTED[scenario] ? [victim] : [],
    powerActions,
    bootIds,
    trustedConfirmers: [CONFIRM],
    quorum: 2,
    maxConcurrentFenced: 1,
  };
  // The event log: stages publish after their API write, so give the last events a moment.
  let log = baseline
    ? { events: [] as FfEvent[], deadLetters: [] }
    : await readEventLog(lab, opts.withObservations ?? false);
  let violations = baseline
    ? []
    : checkInvariants({
        events: log.events.filter((e) => Date.parse(e.time) >= tStart),
        incidents,
        knownIncidents: allNames,
        deadLetters: log.deadLetters,
        facts,
      });
  for (let i = 0; i < 4 && violations.some((v) => v.rule === "S5"); i++) {
    await sleep(1000);
    log = await readEventLog(lab, opts.withObservations ?? false);
    violations = checkInvariants({
      events: log.events.filter((e) => Date.parse(e.time) >= tStart),
      incidents,
      knownIncidents: allNames,
      deadLetters: log.deadLetters,
      facts,
    });
  }
  const events = log.events;
  const st = incident?.status;
  const rel = (iso: string | undefined) => (iso ? Date.parse(iso) - t0 : undefined);
  const suspectedEv = events
    .filter(
      (e) =>
        e.type === EVENT_TYPES.nodeSuspected &&
        (e.data as { node?: string }).node === victim &&
        Date.parse(e.time) >= t0,
    )
    .sort((a, b) => Date.parse(a.time) - Date.parse(b.time))[0];
  const fencedNodes = [
    ...new Set(
      incidents
        .filter((i) => i.status?.powerOffConfirmedAt || (i.status?.attempts.length ?? 0) > 0)
        .map((i) => i.spec.nodeName),
    ),
  ];
  const stagesMs: Record<string, number> = {};
  const firstOf = (type: string, key: string) => {
    const ev = events
      .filter(
        (e) => e.type === type && (e.data as { node?: string }).node === victim && Date.parse(e.time) >= t0,
      )
      .sort((a, b) => Date.parse(a.time) - Date.parse(b.time))[0];
    if (ev) stagesMs[key] = Date.parse(ev.time) - t0;
  };
  firstOf(EVENT_TYPES.nodeSuspected, "suspected");
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
  const result: TrialResult = {
    scenario,
    stagesMs,
    trial: opts.trial,
    node: victim,
    t0,
    detectedMs: suspectedEv ? Date.parse(suspectedEv.time) - t0 : rel(st?.timestamps.suspected),
    confirmedMs: rel(st?.timestamps.confirmed),
    powerOffConfirmedMs: rel(st?.powerOffConfirmedAt),
    releasedMs: rel(st?.timestamps.released),
    replacementRunningMs,
    statefulReplacementMs,
    // Ground truth, not the event's count: two replicas may release at once, and the one
    // whose write wins may have found the other's deletions already done.
    vmsReleased: st?.timestamps.released ? await vmisGone(lab, vmisPlaced).catch(() => 0) : 0,
    fencedNodes,
    safetyViolations: violations.length,
    violations,
    ...(incident ? { incident } : {}),
    timeline,
    events,
    ...(webOnVictim ? {} : { note: `web pod was scheduled on ${webPod?.spec?.nodeName}, not the victim` }),
  };
  if (opts.reset ?? true) result.refencedDuringReboot = await resetAfter(lab, scenario, victim, sfx, live);
  return result;
}

/** Put the lab back: heal, power the victim back on if fenced (or cycle it), delete the trial's workloads. */
export async function resetAfter(
  lab: Lab,
  scenario: Scenario,
  victim: string,
  sfx: string,
  live: (l: string) => void = () => undefined,
): Promise<number> {
  let refenced = 0;
  const t = Date.now();
  const x = lab.node(victim);
  if (scenario === "hang") lab.resume(victim);
  if (scenario.startsWith("partition") || scenario.startsWith("partial")) await lab.heal(victim);
  const power = await lab.powerState(victim);
  if (power === "Off") await lab.powerOn(victim);
  else if (scenario !== "partial-partition" && scenario !== "partial-partition-api")
    await lab.powerCycle(victim);
  await deleteWorkloads(lab, sfx);
  const oldBoot = (await lab.core.readNode({ name: victim })).status?.nodeInfo?.bootID;
  void oldBoot;
  // Healthy again: Ready, no out-of-service taint, its agent ready, all brokers back.
  const deadline = Date.now() + 120_000;
  for (;;) {
    const node = await lab.core.readNode({ name: victim }).catch(() => undefined);
    const ready = node?.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
    const tainted = (node?.spec?.taints ?? []).some((tt) => tt.key === "node.kubernetes.io/out-of-service");
    const agent = lab.opts.fastfence === false || lab.agentStatus(x)?.ready === true;
    let brokers = 0;
    try {
      brokers = (await lab.kafkaMeta()).brokers;
    } catch {
      brokers = 0;
    }
    const open = (await listIncidents(lab)).filter(
      (i) =>
        i.spec.nodeName === victim &&
        ["Confirmed", "Fencing", "FencedOff", "Released", "FenceFailed"].includes(
          i.status?.phase ?? "Closed",
        ),
    );
    if (ready && !tainted && agent && brokers === lab.nodes.length && open.length === 0) break;
    if (Date.now() > deadline)
      throw new Error(
        `lab reset: ${victim} not healthy after 120 s (ready ${ready}, tainted ${tainted}, agent ${agent}, brokers ${brokers}, open incidents ${open.map((i) => `${i.metadata.name}:${i.status?.phase}`).join(",")})`,
      );
    if ((await lab.powerState(victim)) === "Off") {
      // Fenced again while rebooting (a healthy, booting node): note it and power on again.
      refenced++;
      live(`  (reset: ${victim} was powered off again while it rebooted; powering on)`);
      await lab.powerOn(victim);
    }
    if (tainted && Date.now() - t > 30_000) {
      // recover did not clear it (e.g. the node never really went down): clear it by hand.
      node!.spec!.taints = node!.spec!.taints!.filter((tt) => tt.key !== "node.kubernetes.io/out-of-service");
      await lab.core.replaceNode({ name: victim, body: node! }).catch(() => undefined);
    }
    await sleep(500);
  }
  // Give the rebooted broker a moment to take its preferred leaderships back.
  await sleep(6000);
  live(`  (lab reset in ${((Date.now() - t) / 1000).toFixed(1)} s)`);
  return refenced;
}
