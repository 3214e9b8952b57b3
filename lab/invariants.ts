// The lab's invariant checker: after each trial, the safety rules of the brief (S1-S6)
// and "no healthy node was fenced" are checked against what really happened — the event
// log (every Kafka topic, decoded), the incidents in the API (NodeFence status history:
// phase timestamps, evidence, attempts), and the lab's own ground truth (which nodes were
// faulted, what each BMC actually did, each node's boot IDs over time). Pure: no I/O, no
// clock; it only reads its input and returns the violations it found. A BMC that read a
// node back Off without powering it off (a lying BMC, `bmc-fault --fault lying`) is not
// fastfence's violation: it is reported apart (bmcLies, lab/bmc-lies.ts), and S1's ground-truth
// check of a release that relied on it is left to that report.
import type { NodeFence } from "../core/incident.ts";
import type { FfEvent } from "../events/envelope.ts";
import { liedBefore } from "./bmc-lies.ts";

export type Rule = "S1" | "S2" | "S3" | "S4" | "S5" | "S6" | "H";

export interface Violation {
  rule: Rule;
  node?: string;
  incident?: string;
  detail: string;
}

export interface TrialFacts {
  /** Every node of the lab. */
  nodes: string[];
  /** Nodes the trial really broke (crash, hang, full partition): the only ones that may be fenced. */
  faulted: string[];
  /** Power actions the BMCs carried out (lab ground truth), ms epoch. */
  powerActions: { node: string; at: number; action: "off" | "on"; by: "bmc" | "lab" }[];
  /**
   * When every process of a node was killed by something other than fastfence's power-off
   * (lab ground truth, ms epoch): power-loss, or its emulated watchdog expiring.
   */
  resets?: { node: string; at: number; kind: string }[];
  /** Boot IDs each node had, from when (ms epoch), in order. */
  bootIds: { node: string; bootId: string; since: number }[];
  /** Corroboration quorum in force (default 2). */
  quorum?: number;
  /** Storm guard: most incidents that may be fencing/fenced at the same time (default 1). */
  maxConcurrentFenced?: number;
  /** Identities whose Confirmed write licenses fencing (S6). */
  trustedConfirmers: string[];
  /**
   * Nodes the trial itself asked to fence as an operator (`fastfence fence`): their incidents
   * carrying `spec.operatorRequest` are confirmed without observers, S2's one exception.
   * An operator request on any other node is still checked for a quorum.
   */
  operatorRequested?: string[];
}

export interface TrialInput {
  events: FfEvent[];
  incidents: NodeFence[];
  /** Names of every incident in the API (also older ones), for the S6 existence check. */
  knownIncidents?: string[];
  /** Records of the dead-letter topic (decoded JSON). */
  deadLetters?: Record<string, unknown>[];
  facts: TrialFacts;
}

const T = (s: string | undefined): number | undefined => (s ? Date.parse(s) : undefined);
const FENCING_PHASES = new Set(["Fencing", "FencedOff", "Released"]);
const TYPES = {
  suspected: "io.fastfence.node.suspected.v1",
  fenceRequested: "io.fastfence.fence.requested.v1",
  fenced: "io.fastfence.node.fenced.v1",
  fenceFailed: "io.fastfence.fence.failed.v1",
  released: "io.fastfence.workloads.released.v1",
  recovered: "io.fastfence.node.recovered.v1",
  blocked: "io.fastfence.incident.blocked.v1",
} as const;

function data(e: FfEvent): Record<string, unknown> {
  return (e.data ?? {}) as Record<string, unknown>;
}

/** The boot ID `node` had at time `at` (undefined when unknown). */
export function bootIdAt(facts: TrialFacts, node: string, at: number): string | undefined {
  let cur: string | undefined;
  for (const b of facts.bootIds.filter((x) => x.node === node).sort((a, c) => a.since - c.since)) {
    if (b.since <= at) cur = b.bootId;
  }
  return cur;
}

function everFenced(i: NodeFence): boolean {
  const st = i.status;
  if (!st) return false;
  return (
    FENCING_PHASES.has(st.phase) ||
    st.attempts.length > 0 ||
    !!st.timestamps.fencing ||
    !!st.powerOffConfirmedAt
  );
}

export function checkInvariants(input: TrialInput): Violation[] {
  const { events, incidents, facts } = input;
  const out: Violation[] = [];
  const quorum = facts.quorum ?? 2;
  const maxConc = facts.maxConcurrentFenced ?? 1;
  const byName = new Map(incidents.map((i) => [i.metadata.name, i]));

  for (const inc of incidents) {
    const st = inc.status;
    if (!st) continue;
    const node = inc.spec.nodeName;
    const name = inc.metadata.name;
    const v = (rule: Rule, detail: string) => out.push({ rule, node, incident: name, detail });
    const releasedAt = T(st.timestamps.released);

    // S1: release only after a power-off read back as Off, or an armed watchdog's timeout
    // surely elapsed (its proof) — and, in truth, only once the node's processes were gone.
    if (releasedAt !== undefined || st.released) {
      const offAt = T(st.powerOffConfirmedAt);
      // A proof fastfence itself withdrew (the look after found the BMC lied) is the lie's report.
      const withdrawn = (st.bmcLied?.length ?? 0) > 0;
      if (offAt === undefined && !withdrawn) v("S1", "workloads released without powerOffConfirmedAt");
      else if (offAt !== undefined && releasedAt !== undefined && releasedAt < offAt && !withdrawn)
        v("S1", "released before the power-off was confirmed");
      const readBack = st.attempts.find((a) => a.result === "off-confirmed" && a.readBackState === "Off");
      const watchdog = st.attempts.find((a) => a.result === "watchdog-expired" && a.driver === "watchdog");
      const reset = facts.resets?.find(
        (r) => r.node === node && (releasedAt === undefined || r.at <= releasedAt),
      );
      if (watchdog && !readBack) {
        if (!reset) v("S1", "released on a watchdog proof while the node's processes still ran");
      } else if (!readBack) v("S1", "no attempt read the power state back as exactly Off");
      else if (
        releasedAt !== undefined &&
        T(readBack.readBackAt) !== undefined &&
        releasedAt < T(readBack.readBackAt)!
      )
        v("S1", "released before the Off read-back");
      const bmcOff = facts.powerActions.find(
        (p) => p.node === node && p.action === "off" && (releasedAt === undefined || p.at <= releasedAt + 5),
      );
      if (!bmcOff && !(watchdog && reset) && !liedBefore(inc, facts, releasedAt))
        v("S1", "the BMC never powered the node off before its workloads were released (lying BMC?)");
    }

    // S2: corroborated by >= quorum independent observers, none on the node itself.
    if (st.timestamps.confirmed || FENCING_PHASES.has(st.phase)) {
      const observers = new Set(st.evidence.map((e) => e.observerNode));
      const requested = !!inc.spec.operatorRequest && (facts.operatorRequested ?? []).includes(node);
      if (observers.has(node)) v("S2", "the suspected node testified about itself");
      observers.delete(node);
      if (observers.size < quorum && !requested)
        v("S2", `confirmed with ${observers.size} independent observer(s), quorum ${quorum}`);
    }

    // S3: one driver at a time; never a power action on a later incarnation.
    const attempts = [...st.attempts].sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt));
    for (let i = 1; i < attempts.length; i++) {
      const a = attempts[i - 1]!;
      const b = attempts[i]!;
      if (a.by !== b.by && Date.parse(b.startedAt) < Date.parse(a.finishedAt))
        v("S3", `two drivers overlapped: ${a.by} and ${b.by}`);
    }
    for (const a of attempts) {
      const cur = bootIdAt(facts, node, Date.parse(a.startedAt));
      if (cur !== undefined && cur !== inc.spec.bootId)
        v(
          "S3",
          `power action at ${a.startedAt} on a node whose boot ID changed (${inc.spec.bootId.slice(0, 8)} → ${cur.slice(0, 8)})`,
        );
    }

    // S6: fencing only on incidents the confirm identity confirmed.
    if (everFenced(inc) && (!st.confirmedBy || !facts.trustedConfirmers.includes(st.confirmedBy)))
      v("S6", `fenced an incident confirmed by ${st.confirmedBy ?? "nobody"}`);

    // H: no healthy node fenced.
    if (!facts.faulted.includes(node) && everFenced(inc))
      v("H", `healthy node ${node} was fenced (phase ${st.phase})`);
  }

  // H also from the BMC side: no power-off of a healthy node by its BMC.
  for (const p of facts.powerActions)
    if (p.action === "off" && p.by === "bmc" && !facts.faulted.includes(p.node))
      out.push({ rule: "H", node: p.node, detail: `BMC of healthy node ${p.node} powered it off` });

  // S4: storm guard — at most maxConc incidents in Fencing..Released at once.
  const spans = incidents.filter(everFenced).map((i) => {
    const st = i.status!;
    const from = T(st.timestamps.fencing) ?? T(st.timestamps.confirmed) ?? 0;
    const to = T(st.timestamps.recovered) ?? T(st.timestamps.closed) ?? Number.POSITIVE_INFINITY;
    return { name: i.metadata.name, node: i.spec.nodeName, from, to };
  });
  for (const s of spans) {
    const concurrent = spans.filter((o) => o.node !== s.node && o.from <= s.from && o.to > s.from);
    if (concurrent.length + 1 > maxConc)
      out.push({
        rule: "S4",
        node: s.node,
        incident: s.name,
        detail: `${concurrent.length + 1} nodes fencing at once (limit ${maxConc})`,
      });
  }

  // S6 from the event side: a fence request must point at an incident that exists.
  for (const e of events.filter((x) => x.type === TYPES.fenceRequested)) {
    const name = String(data(e).incident);
    if (!byName.has(name) && !(input.knownIncidents ?? []).includes(name))
      out.push({
        rule: "S6",
        incident: String(data(e).incident),
        detail: "fence.requested for an incident that is not in the API",
      });
  }

  // S5: nothing lost — every stage input has an outcome, every dead letter a reason.
  const ofIncident = (name: string) =>
    events.filter((e) => e.ffincident === name || data(e).incident === name);
  for (const inc of incidents) {
    const name = inc.metadata.name;
    const chain = ofIncident(name);
    const has = (t: string) => chain.some((e) => e.type === t);
    const st = inc.status;
    if (!st) continue;
    if (
      has(TYPES.fenceRequested) &&
      !(has(TYPES.fenced) || has(TYPES.fenceFailed) || st.phase === "Closed" || st.phase === "Fencing")
    )
      out.push({
        rule: "S5",
        incident: name,
        node: inc.spec.nodeName,
        detail: "fence.requested without node.fenced or fence.failed",
      });
    if (has(TYPES.fenced) && !has(TYPES.released) && st.phase !== "FencedOff")
      out.push({
        rule: "S5",
        incident: name,
        node: inc.spec.nodeName,
        detail: "node.fenced without workloads.released",
      });
    if (st.phase === "Released" && !has(TYPES.released))
      out.push({
        rule: "S5",
        incident: name,
        node: inc.spec.nodeName,
        detail: "incident Released but no workloads.released event in the log",
      });
  }
  for (const [i, d] of (input.deadLetters ?? []).entries()) {
    if (!d.reason || !d.code) out.push({ rule: "S5", detail: `dead letter #${i} without reason/code` });
  }
  return out;
}

/** Short summary per rule for reports. */
export function summarize(vs: Violation[]): Record<Rule, number> {
  const r: Record<Rule, number> = { S1: 0, S2: 0, S3: 0, S4: 0, S5: 0, S6: 0, H: 0 };
  for (const v of vs) r[v.rule]++;
  return r;
}
