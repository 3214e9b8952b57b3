// confirm: corroboration (S2), stale incarnation, storm guard (S4), control-plane quorum
// (with the policy's control-plane role labels) and the admission ledger that makes both
// hold under concurrent confirmations, duplicates — a table of named cases. Each
// case: the suspicion, the incident state, the expected phase written (or the ignore
// code) and the emitted event type.
import { describe, expect, test } from "vitest";
import { clusterNeeded, decide } from "../../../functions/confirm/handler.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { Action, AdmissionLedger, View } from "../../../core/decision.ts";
import { incidentName, type Evidence, type NodeFence, type NodeFenceStatus } from "../../../core/incident.ts";
import type { NodeSuspected } from "../../../events/schemas.ts";
import type { IgnoreCode, RejectCode } from "../../../core/reasons.ts";
import { isControlPlane } from "../../../core/rules.ts";
import {
  BOOT,
  CONFIRM,
  NEW_BOOT,
  T0,
  at,
  evidence,
  incident,
  node,
  policy,
  signEvidence,
  suspected,
  view,
} from "../../scenarios/fixtures.ts";

const NOW = 10_000;
/** Probe evidence whose observer saw the target's heartbeat Lease renewed at `seenMs` (its clock), re-signed. */
const sighted = (e: Evidence, seenMs: number, renewedByMs?: number): Evidence =>
  signEvidence({
    ...e,
    heartbeatSeenAt: at(seenMs),
    ...(renewedByMs !== undefined ? { heartbeatRenewedBy: at(renewedByMs) } : {}),
  });
/** A suspicion of a carrying exactly this evidence. */
const suspectedWith = (e: Evidence) => {
  const ev = suspected(e.observerNode, e.node, Date.parse(e.at) - T0);
  return { ...ev, data: { ...(ev.data as NodeSuspected), evidence: e } };
};
const susp = (ev: typeof evidence extends never ? never : ReturnType<typeof evidence>[]) =>
  incident("a", { phase: "Suspected", evidence: ev, timestamps: { suspected: new Date(0).toISOString() } });

interface Case {
  name: string;
  event: ReturnType<typeof suspected>;
  view: Parameters<typeof decide>[0]["view"];
  now?: number;
  expect: {
    write?: "create" | "update";
    phase?: NodeFenceStatus["phase"];
    emit?: string;
    ignored?: IgnoreCode;
    rejected?: RejectCode;
    evidence?: number;
  };
}

const a = node("a");
/** a as the API shows it after its kubelet stopped reporting (condition evidence counts). */
const aDown = node("a", { ready: "Unknown" });
/** A node without a control-plane role label (a worker under every policy below). */
const worker = (name: string, opts: Parameters<typeof node>[1] = {}) =>
  node(name, { labels: { "node-restriction.kubernetes.io/fastfence-fence": "true" }, ...opts });
/** A node whose only role label is `label`. */
const labelled = (name: string, label: string, opts: Parameters<typeof node>[1] = {}) =>
  node(name, { labels: { "node-restriction.kubernetes.io/fastfence-fence": "true", [label]: "" }, ...opts });
const ETCD_LABEL = "example.com/etcd-member";
const B_INCIDENT = incidentName("b", BOOT.b);
const WINDOW = policy().corroboration.evidenceWindowMs;
/** a, one of 4 workers, Suspected with d's evidence (c's suspicion completes the quorum). */
const amongFourWorkers = (v: Partial<View> = {}) =>
  view({
    node: worker("a"),
    nodes: [worker("a"), worker("b"), worker("c"), worker("d")],
    incident: susp([evidence("d", "a", NOW - 100)]),
    ...v,
  });
/** A ledger in which b's incident was admitted `agoMs` before NOW. */
const bAdmitted = (agoMs: number): AdmissionLedger => ({
  resourceVersion: "7",
  admitted: { [B_INCIDENT]: { node: "b", at: at(NOW - agoMs) } },
});
/**
 * a Suspected with reason HeartbeatSeen: b's stored evidence (misses since NOW-1900) carries
 * a sighting at NOW-1850 that b could not date (the in-flight renewal), c's none.
 */
const vetoedByB = () =>
  view({
    node: a,
    incident: incident("a", {
      phase: "Suspected",
      reason: "HeartbeatSeen",
      evidence: [
        sighted({ ...evidence("b", "a", NOW - 1500), firstMissAt: at(NOW - 1900) }, NOW - 1850),
        evidence("c", "a", NOW - 1400),
      ],
      timestamps: { suspected: new Date(0).toISOString() },
    }),
  });
const cases: Case[] = [
  {
    name: "first observer → incident created Suspected, no fence request",
    event: suspected("b", "a", NOW),
    view: view({ node: a }),
    expect: { write: "create", phase: "Suspected", evidence: 1 },
  },
  {
    name: "second independent observer → Confirmed + fence.requested",
    event: suspected("c", "a", NOW),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 300)]) }),
    expect: { write: "update", phase: "Confirmed", emit: EVENT_TYPES.fenceRequested, evidence: 2 },
  },
  {
    name: "single observer never confirms (same observer again, later)",
    event: suspected("b", "a", NOW + 3000),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW)]) }),
    now: NOW + 3000,
    expect: { write: "update", phase: "Suspected", evidence: 1 },
  },
  {
    name: "duplicate suspicion (same observer, fresh) → no write",
    event: suspected("b", "a", NOW),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW)]) }),
    expect: { ignored: "DuplicateEvidence" },
  },
  {
    name: "two replicas on one observer node count once",
    event: {
      ...suspected("b", "a", NOW),
      data: {
        ...(suspected("b", "a", NOW).data as object),
        evidence: signEvidence({ ...evidence("b", "a", NOW), observer: "event-source-b-2" }),
      },
    } as ReturnType<typeof suspected>,
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 100)]) }),
    expect: { write: "update", phase: "Suspected" },
  },
  {
    name: "observer on the suspected node is not counted",
    event: suspected("a", "a", NOW),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 100)]) }),
    expect: { ignored: "ObserverOnNode" },
  },
  {
    name: "stored evidence from the suspected node itself does not make quorum",
    event: suspected("b", "a", NOW),
    view: view({ node: a, incident: susp([{ ...evidence("a", "a", NOW - 100), observer: "x" }]) }),
    expect: { write: "update", phase: "Suspected" },
  },
  {
    name: "evidence outside the window does not corroborate",
    event: suspected("c", "a", NOW),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 6000)]) }),
    expect: { write: "update", phase: "Suspected" },
  },
  {
    name: "stale evidence in the event → ignored",
    event: suspected("c", "a", NOW - 6000),
    view: view({ node: a }),
    expect: { ignored: "StaleEvent" },
  },
  {
    name: "stale incarnation: suspicion from before the node's reboot",
    event: suspected("c", "a", NOW, BOOT.a),
    view: view({ node: node("a", { bootId: NEW_BOOT }) }),
    expect: { ignored: "StaleIncarnation" },
  },
  {
    name: "probe + Ready=Unknown (API observer) make two independent observers",
    event: suspected("b", "a", NOW, undefined, "condition"),
    view: view({ node: aDown, incident: susp([evidence("c", "a", NOW - 100)]) }),
    expect: { phase: "Confirmed", emit: EVENT_TYPES.fenceRequested },
  },
  {
    name: "condition evidence while the API says the node is Ready → ignored (the event's word is not taken)",
    event: suspected("b", "a", NOW, undefined, "condition"),
    view: view({ node: a, incident: susp([evidence("c", "a", NOW - 100)]) }),
    expect: { ignored: "NodeReady" },
  },
  {
    name: "stored condition evidence no longer counts once the API says Ready again",
    event: suspected("c", "a", NOW),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 100, "condition")]) }),
    expect: { write: "update", phase: "Suspected", evidence: 2 },
  },
  {
    name: "lease evidence counts only while the API's kubelet Lease is stale",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      incident: susp([evidence("b", "a", NOW - 100, "lease")]),
      kubeletLease: { renewTime: at(NOW - 50_000), durationMs: 40_000 },
    }),
    expect: { write: "update", phase: "Confirmed", emit: EVENT_TYPES.fenceRequested, evidence: 2 },
  },
  {
    name: "lease evidence with a freshly renewed kubelet Lease in the API does not count",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      incident: susp([evidence("b", "a", NOW - 100, "lease")]),
      kubeletLease: { renewTime: at(NOW - 1_000), durationMs: 40_000 },
    }),
    expect: { write: "update", phase: "Suspected", evidence: 2 },
  },
  {
    name: "quorum 3 needs a third observer",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      policy: policy({ corroboration: { quorum: 3 } }),
      incident: susp([evidence("b", "a", NOW - 100)]),
    }),
    expect: { phase: "Suspected" },
  },
  {
    name: "duplicate after Confirmed → ignored",
    event: suspected("c", "a", NOW),
    view: view({ node: a, incident: incident("a", { phase: "Confirmed" }) }),
    expect: { ignored: "PhasePassed" },
  },
  {
    name: "reordered: suspicion arrives after FencedOff → ignored",
    event: suspected("b", "a", NOW),
    view: view({ node: a, incident: incident("a", { phase: "FencedOff" }) }),
    expect: { ignored: "PhasePassed" },
  },
  {
    name: "storm guard: another node already fenced → Blocked + incident.blocked",
    event: suspected("c", "a", NOW),
    view: amongFourWorkers({ openIncidents: [incident("b", { phase: "Released" })] }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "storm guard, admission ledger: another node took the slot, its Confirmed write not seen yet → Blocked",
    event: suspected("c", "a", NOW),
    view: amongFourWorkers({ openIncidents: [incident("b", { phase: "Suspected" })], ledger: bAdmitted(50) }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "storm guard, admission ledger: an admission whose incident is not listed yet (created Confirmed) → Blocked",
    event: suspected("c", "a", NOW),
    view: amongFourWorkers({ ledger: bAdmitted(50) }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "storm guard, admission ledger: the entry of an incident closed longer than the evidence window ago holds no slot → Confirmed",
    event: suspected("c", "a", NOW),
    view: amongFourWorkers({ ledger: bAdmitted(WINDOW + 1) }),
    expect: { phase: "Confirmed", emit: EVENT_TYPES.fenceRequested },
  },
  {
    name: "storm guard, admission ledger: an admission pending longer than the evidence window holds no slot → Confirmed",
    event: suspected("c", "a", NOW),
    view: amongFourWorkers({
      openIncidents: [incident("b", { phase: "Suspected" })],
      ledger: bAdmitted(WINDOW + 1),
    }),
    expect: { phase: "Confirmed", emit: EVENT_TYPES.fenceRequested },
  },
  {
    name: "control-plane quorum, admission ledger: another control-plane node took a slot → Blocked",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      policy: policy({ stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 } }),
      openIncidents: [incident("b", { phase: "Suspected" })],
      ledger: bAdmitted(50),
      incident: susp([evidence("b", "a", NOW - 100)]),
    }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "storm guard allows 2 when maxConcurrentFenced=2 and maxFraction allows",
    event: suspected("c", "a", NOW),
    view: view({
      node: worker("a"),
      policy: policy({ stormGuard: { maxConcurrentFenced: 2, maxFraction: 0.5 } }),
      nodes: ["a", "b", "c", "d"].map((n) => worker(n)),
      openIncidents: [incident("b", { phase: "Fencing" })],
      incident: susp([evidence("d", "a", NOW - 100)]),
    }),
    expect: { phase: "Confirmed", emit: EVENT_TYPES.fenceRequested },
  },
  {
    name: "control-plane quorum: 3 CP nodes, one already NotReady → Blocked",
    event: suspected("c", "a", NOW),
    view: view({
      node: aDown,
      policy: policy({ stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 } }),
      nodes: [aDown, node("b", { ready: "Unknown" }), node("c")],
      incident: susp([evidence("b", "a", NOW - 100, "condition")]),
    }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "control-plane quorum: 3 CP nodes, others healthy → Confirmed",
    event: suspected("c", "a", NOW),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 100)]) }),
    expect: { phase: "Confirmed", emit: EVENT_TYPES.fenceRequested },
  },
  {
    name: "control-plane quorum, default role labels: the legacy master label counts too → Blocked",
    event: suspected("c", "a", NOW),
    view: view({
      node: labelled("a", "node-role.kubernetes.io/master", { ready: "Unknown" }),
      policy: policy({ stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 } }),
      nodes: [
        labelled("a", "node-role.kubernetes.io/master", { ready: "Unknown" }),
        labelled("b", "node-role.kubernetes.io/master", { ready: "Unknown" }),
        labelled("c", "node-role.kubernetes.io/master"),
      ],
      incident: susp([evidence("b", "a", NOW - 100, "condition")]),
    }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "control-plane quorum, custom roleLabels: nodes without that label are not control plane → Confirmed",
    event: suspected("c", "a", NOW),
    view: view({
      node: aDown,
      policy: policy({
        stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 },
        controlPlane: { roleLabels: [ETCD_LABEL] },
      }),
      nodes: [aDown, node("b", { ready: "Unknown" }), node("c")],
      incident: susp([evidence("b", "a", NOW - 100, "condition")]),
    }),
    expect: { phase: "Confirmed", emit: EVENT_TYPES.fenceRequested },
  },
  {
    name: "control-plane quorum, custom roleLabels: nodes carrying it are control plane → Blocked",
    event: suspected("c", "a", NOW),
    view: view({
      node: labelled("a", ETCD_LABEL, { ready: "Unknown" }),
      policy: policy({
        stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 },
        controlPlane: { roleLabels: [ETCD_LABEL] },
      }),
      nodes: [
        labelled("a", ETCD_LABEL, { ready: "Unknown" }),
        labelled("b", ETCD_LABEL, { ready: "Unknown" }),
        labelled("c", ETCD_LABEL),
      ],
      incident: susp([evidence("b", "a", NOW - 100, "condition")]),
    }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "already Blocked for the same reason → no write, no new event",
    event: suspected("c", "a", NOW),
    view: view({
      node: aDown,
      nodes: [aDown, node("b", { ready: "False" }), node("c")],
      policy: policy({ stormGuard: { maxConcurrentFenced: 3, maxFraction: 1 } }),
      incident: incident("a", {
        phase: "Blocked",
        reason: "ControlPlaneQuorum",
        evidence: [evidence("b", "a", NOW - 100, "condition"), evidence("c", "a", NOW - 50)],
      }),
    }),
    expect: { ignored: "StillBlocked" },
  },
  {
    name: "Blocked, guard cleared → Confirmed",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      incident: incident("a", {
        phase: "Blocked",
        reason: "StormGuard",
        evidence: [evidence("b", "a", NOW - 100)],
      }),
    }),
    expect: { phase: "Confirmed", emit: EVENT_TYPES.fenceRequested },
  },
  {
    name: "no fencing levels match the node → Blocked",
    event: suspected("c", "a", NOW),
    view: view({ node: node("a", { labels: {} }), incident: susp([evidence("b", "a", NOW - 100)]) }),
    expect: { phase: "Blocked", emit: EVENT_TYPES.incidentBlocked },
  },
  {
    name: "unknown node → ignored",
    event: suspected("c", "a", NOW),
    view: view({}),
    expect: { ignored: "NodeNotFound" },
  },
  {
    name: "partial partition: an observer saw the heartbeat renewed after its own misses began → not confirmed",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      // b's streak began at NOW-700 (its clock); it saw a's heartbeat Lease change at NOW-400
      incident: susp([sighted(evidence("b", "a", NOW - 300), NOW - 400)]),
    }),
    expect: { write: "update", phase: "Suspected", evidence: 2 },
  },
  {
    name: "partial partition seen by the incoming observer itself → not confirmed",
    event: suspectedWith(sighted(evidence("c", "a", NOW), NOW - 50)),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 300)]) }),
    expect: { write: "update", phase: "Suspected", evidence: 2 },
  },
  {
    name: "crash: every sighting came before that observer's misses began → Confirmed",
    event: suspectedWith(sighted(evidence("c", "a", NOW), NOW - 500)),
    view: view({ node: a, incident: susp([sighted(evidence("b", "a", NOW - 300), NOW - 800)]) }),
    expect: { write: "update", phase: "Confirmed", emit: EVENT_TYPES.fenceRequested, evidence: 2 },
  },
  {
    name: "crash: a dead node's last in-flight renewal, seen just after the first miss, stops vetoing after one heartbeat Lease duration",
    event: suspectedWith(sighted({ ...evidence("c", "a", NOW), firstMissAt: at(NOW - 1500) }, NOW - 1490)),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 300)]) }),
    expect: { write: "update", phase: "Confirmed", emit: EVENT_TYPES.fenceRequested, evidence: 2 },
  },
  {
    name: "crash: the in-flight renewal seen after the first miss, dated by its observer to before the streak began → Confirmed at once",
    // c's streak began at NOW-400; the sighting came at NOW-350, but the renewal was written by NOW-420
    event: suspectedWith(sighted(evidence("c", "a", NOW), NOW - 350, NOW - 420)),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 300)]) }),
    expect: { write: "update", phase: "Confirmed", emit: EVENT_TYPES.fenceRequested, evidence: 2 },
  },
  {
    // The bench's 3.6 s confirm hop (trial 5 of the b736fd8 run): b's first suspicion carried
    // the in-flight renewal, so the quorum was vetoed (HeartbeatSeen); b's repeats, 500 ms
    // apart, were not decided on while the stored copy was younger than half the window.
    name: "crash: a repeat from the observer whose stored evidence vetoes lifts the veto once the renewal is a Lease duration old, though no write is due for the refresh alone",
    event: suspectedWith(sighted({ ...evidence("b", "a", NOW), firstMissAt: at(NOW - 1900) }, NOW - 1850)),
    view: vetoedByB(),
    expect: { write: "update", phase: "Confirmed", emit: EVENT_TYPES.fenceRequested, evidence: 2 },
  },
  {
    name: "crash: while the stored sighting is recent, a repeat that changes nothing is not written",
    event: suspectedWith(
      sighted({ ...evidence("b", "a", NOW - 1000), firstMissAt: at(NOW - 1900) }, NOW - 1850),
    ),
    view: vetoedByB(),
    expect: { ignored: "HeartbeatSeen" },
  },
  {
    name: "partial partition: a renewal dated after the streak began still vetoes",
    event: suspectedWith(sighted(evidence("c", "a", NOW), NOW - 350, NOW - 380)),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 300)]) }),
    expect: { write: "update", phase: "Suspected", evidence: 2 },
  },
  {
    name: "partial partition: one observer's dated in-flight renewal does not undo another observer's sighting",
    event: suspectedWith(sighted(evidence("c", "a", NOW), NOW - 350, NOW - 420)),
    view: view({ node: a, incident: susp([sighted(evidence("b", "a", NOW - 300), NOW - 400)]) }),
    expect: { write: "update", phase: "Suspected", evidence: 2 },
  },
  {
    name: "heartbeat veto switched off by policy → a sighting does not stop confirmation",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      incident: susp([sighted(evidence("b", "a", NOW - 300), NOW - 400)]),
      policy: policy({ suspicion: { heartbeatVeto: false } }),
    }),
    expect: { write: "update", phase: "Confirmed", emit: EVENT_TYPES.fenceRequested, evidence: 2 },
  },
  {
    name: "veto on: stored evidence from an observer whose heartbeat watch was not synced does not count",
    event: suspected("c", "a", NOW),
    view: view({
      node: a,
      incident: susp([signEvidence({ ...evidence("b", "a", NOW - 300), heartbeatSynced: false })]),
    }),
    expect: { write: "update", phase: "Suspected", evidence: 2 },
  },
  {
    name: "veto on: an incoming suspicion from an unsynced heartbeat watch → ignored",
    event: suspectedWith(signEvidence({ ...evidence("c", "a", NOW), heartbeatSynced: false })),
    view: view({ node: a, incident: susp([evidence("b", "a", NOW - 300)]) }),
    expect: { ignored: "HeartbeatWatchNotSynced" },
  },
];

describe("confirm.decide", () => {
  test.each(cases.map((c) => [c.name, c] as const))("%s", (_n, c) => {
    const d = decide({ event: c.event, view: c.view, now: T0 + (c.now ?? NOW), self: CONFIRM });
    if (c.expect.ignored) {
      expect(d.outcome).toMatchObject({
        kind: "ignored",
        code: c.expect.ignored,
        reason: expect.any(String),
      });
      expect(d.actions).toEqual([]);
      expect(d.emit).toEqual([]);
      return;
    }
    expect(d.outcome.kind).toBe("processed");
    // A confirmation takes its slot in the admission ledger first, then writes Confirmed.
    const admitted = c.expect.phase === "Confirmed";
    expect(d.actions).toHaveLength(admitted ? 2 : 1);
    if (admitted)
      expect(d.actions[0]).toMatchObject({
        kind: "writeLedger",
        admitted: {
          [incidentName("a", BOOT.a)]: { node: "a", at: new Date(T0 + (c.now ?? NOW)).toISOString() },
        },
      });
    const act = d.actions.at(-1) as Action;
    const status =
      act.kind === "createIncident"
        ? act.incident.status!
        : act.kind === "updateIncidentStatus"
          ? act.status
          : undefined;
    if (c.expect.write === "create") expect(act.kind).toBe("createIncident");
    if (c.expect.write === "update" || c.view.incident) {
      expect(act).toMatchObject({
        kind: "updateIncidentStatus",
        expectedResourceVersion: c.view.incident!.metadata.resourceVersion,
      });
    }
    expect(status?.phase).toBe(c.expect.phase);
    if (c.expect.evidence !== undefined) expect(status?.evidence).toHaveLength(c.expect.evidence);
    if (c.expect.phase === "Confirmed") {
      expect(status?.confirmedBy).toBe(CONFIRM.identity);
      expect(status?.timestamps.confirmed).toBeDefined();
    }
    expect(d.emit.map((e) => e.type)).toEqual(c.expect.emit ? [c.expect.emit] : []);
  });
});

describe("the admission ledger a confirmation writes", () => {
  const confirming = (ledger?: AdmissionLedger, openIncidents: NodeFence[] = []) =>
    decide({
      event: suspected("c", "a", NOW),
      view: view({
        node: worker("a"),
        nodes: ["a", "b", "c", "d"].map((n) => worker(n)),
        policy: policy({ stormGuard: { maxConcurrentFenced: 2, maxFraction: 1 } }),
        openIncidents,
        ...(ledger ? { ledger } : {}),
        incident: susp([evidence("d", "a", NOW - 100)]),
      }),
      now: T0 + NOW,
      self: CONFIRM,
    }).actions[0];
  const A = incidentName("a", BOOT.a);
  const C = incidentName("c", BOOT.c);
  test("no ledger yet: created (no resourceVersion) with this incident", () => {
    expect(confirming()).toEqual({ kind: "writeLedger", admitted: { [A]: { node: "a", at: at(NOW) } } });
  });
  test("guarded by the resourceVersion read; live entries kept, entries of closed incidents dropped", () => {
    const ledger = {
      resourceVersion: "41",
      admitted: { [B_INCIDENT]: { node: "b", at: at(NOW - 5000) }, [C]: { node: "c", at: at(NOW - 9000) } },
    };
    expect(confirming(ledger, [incident("b", { phase: "Fencing" })])).toEqual({
      kind: "writeLedger",
      expectedResourceVersion: "41",
      admitted: { [B_INCIDENT]: { node: "b", at: at(NOW - 5000) }, [A]: { node: "a", at: at(NOW) } },
    });
  });
});

describe("confirm.clusterNeeded (the executor skips listing the cluster when false)", () => {
  /**
   * A case's input as the executor first reads it: the view without the open incidents and
   * the admission ledger (the node list is always read: the ring check of the evidence needs it).
   */
  const withoutCluster = ({ event, view: { ledger: _ledger, ...rest }, now }: Case) => ({
    event,
    view: { ...rest, openIncidents: [] },
    now: T0 + (now ?? NOW),
    self: CONFIRM,
  });
  test.each(cases.map((c) => [c.name, c] as const))("%s: exact", (_n, c) => {
    const input = withoutCluster(c);
    if (!clusterNeeded(input)) {
      // Deciding without the lists gives exactly the decision with them.
      expect(decide(input)).toEqual(decide({ ...input, view: c.view }));
    }
  });
  test("a repeat suspicion for an incident already past Suspected needs no cluster lists", () => {
    const c = cases.find((x) => x.expect.ignored === "PhasePassed");
    expect(c, "a case with an incident past Suspected").toBeDefined();
    expect(clusterNeeded(withoutCluster(c!))).toBe(false);
  });
  test("a suspicion that completes the quorum needs them (storm guard, etcd-quorum rule)", () => {
    const c = cases.find((x) => x.expect.phase === "Confirmed");
    expect(c, "a case that confirms").toBeDefined();
    expect(clusterNeeded(withoutCluster(c!))).toBe(true);
  });
});

describe("control-plane role labels (policy controlPlane.roleLabels)", () => {
  test("the default policy keeps the well-known labels: control-plane and legacy master", () => {
    expect(isControlPlane(labelled("x", "node-role.kubernetes.io/control-plane"), policy())).toBe(true);
    expect(isControlPlane(labelled("x", "node-role.kubernetes.io/master"), policy())).toBe(true);
    expect(isControlPlane(worker("x"), policy())).toBe(false);
  });
  test("a custom roleLabels replaces them: only nodes carrying one of its labels count", () => {
    const p = policy({ controlPlane: { roleLabels: [ETCD_LABEL] } });
    expect(isControlPlane(labelled("x", ETCD_LABEL), p)).toBe(true);
    expect(isControlPlane(labelled("x", "node-role.kubernetes.io/control-plane"), p)).toBe(false);
    expect(isControlPlane(labelled("x", "node-role.kubernetes.io/master"), p)).toBe(false);
  });
  test("an empty roleLabels list is refused (the etcd-quorum rule would silently never apply)", () => {
    expect(() => policy({ controlPlane: { roleLabels: [] } })).toThrow();
  });
});
