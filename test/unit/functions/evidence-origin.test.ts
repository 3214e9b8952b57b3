// Evidence bound to its origin and time that cannot be shifted, as detect and confirm
// apply it (core/evidence-checks.ts): a table of attacks and near-misses, each an input
// and the view of the cluster, with the outcome the stage must reach. An observation or
// suspicion counts only if it is signed by a key its observer node published, the observer
// node is Ready, heartbeating and assigned by the ring to the target, and no timestamp lies
// beyond the receiver's clock plus corroboration.maxClockSkewMs.
import { describe, expect, test } from "vitest";
import * as confirm from "../../../functions/confirm/handler.ts";
import * as detect from "../../../functions/detect/handler.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { NodeSuspected } from "../../../events/schemas.ts";
import type { Evidence } from "../../../core/incident.ts";
import type { IgnoreCode, RejectCode } from "../../../core/reasons.ts";
import { ObserverKey } from "../../../source/observer-key.ts";
import {
  CONFIRM,
  T0,
  at,
  evidence,
  incident,
  keyOf,
  node,
  observed,
  observers,
  policy,
  signEvidence,
  suspected,
  tampered,
  view,
} from "../../scenarios/fixtures.ts";

const NOW = 10_000;
const SKEW = policy().corroboration.maxClockSkewMs;
/** b's observation of a crossing the threshold (3 misses over 400 ms). */
const obs = (opts: Parameters<typeof observed>[4] = {}, atMs = NOW) =>
  observed("b", "a", 3, atMs, { firstMissMs: atMs - 400, ...opts });
const a = node("a");
/** A fresh key that no heartbeat Lease publishes (e.g. made up on node a for node b). */
const ROGUE = new ObserverKey();

type Expect = "suspect" | { rejected: RejectCode } | { ignored: IgnoreCode };
type Row = [name: string, input: Parameters<typeof detect.decide>[0], expected: Expect];
const input = (event: ReturnType<typeof obs>, v = view({ node: a }), nowMs = NOW) => ({
  event,
  view: v,
  now: T0 + nowMs,
  self: CONFIRM,
});

const detectRows: Row[] = [
  ["a genuine signed observation → suspected", input(obs()), "suspect"],
  [
    "forged observer name: node a's key signs a claim naming b's observer",
    input(obs({ signer: "a" })),
    { rejected: "UnknownObserverKey" },
  ],
  [
    "a key of another node under b's key id",
    input(
      tampered(obs({ signer: "a" }), (d) => ({
        ...d,
        proof: { keyId: keyOf("b").keyId, sig: d.proof!.sig },
      })),
    ),
    { rejected: "BadSignature" },
  ],
  [
    "a fresh key not published for b (root on a makes one up)",
    input(tampered(obs({ signer: null }), (d) => ROGUE.signObservation(d))),
    { rejected: "UnknownObserverKey" },
  ],
  ["unsigned", input(obs({ signer: null })), { rejected: "MissingProof" }],
  [
    "tampered: more misses",
    input(tampered(obs(), (d) => ({ ...d, consecutiveMisses: 8 }))),
    { rejected: "BadSignature" },
  ],
  [
    "tampered: a longer streak (earlier firstMissAt)",
    input(tampered(obs(), (d) => ({ ...d, firstMissAt: at(NOW - 3000) }))),
    { rejected: "BadSignature" },
  ],
  [
    "tampered: another target (same subject)",
    input(tampered(obs(), (d) => ({ ...d, target: "c" }))),
    { rejected: "InconsistentEvent" },
  ],
  [
    "tampered: the heartbeat sighting removed",
    input(tampered(obs({ heartbeatSeenMs: NOW - 100 }), ({ heartbeatSeenAt: _h, ...d }) => d)),
    { rejected: "BadSignature" },
  ],
  [
    "tampered: the observer replica renamed",
    input(tampered(obs(), (d) => ({ ...d, observer: { ...d.observer, replica: "event-source-b-zzz" } }))),
    { rejected: "BadSignature" },
  ],
  [
    "the informational fields (lastOkAt, probe, rttMs) are not signed: changing them changes nothing",
    input(
      tampered(obs(), (d) => ({ ...d, lastOkAt: at(NOW - 5000), rttMs: 3, probe: { kind: "tcp", port: 1 } })),
    ),
    "suspect",
  ],
  [
    "misses of a boot that has ended (a lagging replica, after the node rebooted) → nothing (S3)",
    input(obs({ targetBootId: "a-previous-boot" })),
    { ignored: "StaleIncarnation" },
  ],
  [
    "an old boot's signed miss relabelled with the current boot is refused by the signature",
    input(tampered(obs({ targetBootId: "a-previous-boot" }), (d) => ({ ...d, targetBootId: a.bootId }))),
    { rejected: "BadSignature" },
  ],
  [
    "observer node not Ready",
    input(obs(), view({ node: a, nodes: [a, node("b", { ready: "Unknown" }), node("c")] })),
    { rejected: "ObserverNotReady" },
  ],
  [
    "observer node not in the API",
    input(obs(), view({ node: a, nodes: [a, node("c")], observers: observers(["a", "b", "c"]) })),
    { rejected: "ObserverNotReady" },
  ],
  [
    "observer node's heartbeat Lease not renewed within its duration + skew",
    input(
      obs(),
      view({
        node: a,
        observers: observers(["a", "b", "c"], { renewTime: at(NOW - 4000), durationMs: 1000 }),
      }),
    ),
    { rejected: "ObserverHeartbeatStale" },
  ],
  [
    "observer node's heartbeat renewed within its duration + skew → accepted",
    input(
      obs(),
      view({
        node: a,
        observers: observers(["a", "b", "c"], { renewTime: at(NOW - 2900), durationMs: 1000 }),
      }),
    ),
    "suspect",
  ],
  [
    "observer node's heartbeat renewTime beyond the skew in the future (a dead node would look alive)",
    input(
      obs(),
      view({
        node: a,
        observers: observers(["a", "b", "c"], { renewTime: at(NOW + SKEW + 1), durationMs: 1000 }),
      }),
    ),
    { rejected: "FutureTimestamp" },
  ],
  [
    "observer not assigned by the ring (a,b,c,d with 2 observers each: a is watched by c and d)",
    input(obs(), view({ node: a, nodes: ["a", "b", "c", "d"].map((n) => node(n)) })),
    { rejected: "ObserverNotAssigned" },
  ],
  [
    "a miss of a node fenced off (out-of-service taint), already on its way when the observer dropped it from its ring",
    input(obs(), view({ node: node("a", { outOfService: true }) })),
    { ignored: "NodeOutOfService" },
  ],
  [
    "the same observer, assigned once the node between them on the ring was fenced off (out-of-service taint)",
    input(
      obs(),
      view({ node: a, nodes: [node("a"), node("b"), node("c", { outOfService: true }), node("d")] }),
    ),
    "suspect",
  ],
  [
    "an assigned observer in the same four-node ring → suspected",
    input(
      observed("d", "a", 3, NOW, { firstMissMs: NOW - 400 }),
      view({ node: a, nodes: ["a", "b", "c", "d"].map((n) => node(n)) }),
    ),
    "suspect",
  ],
  [
    "signed with b's previous key (rolling restart) → accepted",
    input(
      obs(),
      view({
        node: a,
        observers: {
          ...observers(),
          b: {
            keys: [new ObserverKey().annotation, keyOf("b").annotation],
            renewTime: at(0),
            durationMs: 1e9,
          },
        },
      }),
    ),
    "suspect",
  ],
  [
    "the heartbeat watch was not synced (veto on) → does not count",
    input(obs({ heartbeatSynced: false })),
    { ignored: "HeartbeatWatchNotSynced" },
  ],
  [
    "the heartbeat watch was not synced, veto off → suspected",
    input(
      obs({ heartbeatSynced: false }),
      view({ node: a, policy: policy({ suspicion: { heartbeatVeto: false } }) }),
    ),
    "suspect",
  ],
  // Time that cannot be shifted: every timestamp, alone, beyond now + skew.
  ["future `at`", input(obs({}, NOW + SKEW + 1), view({ node: a }), NOW), { rejected: "FutureTimestamp" }],
  [
    "future firstMissAt",
    input(obs({ firstMissMs: NOW + SKEW + 1 }), view({ node: a }), NOW),
    { rejected: "FutureTimestamp" },
  ],
  [
    "future heartbeatSeenAt",
    input(obs({ heartbeatSeenMs: NOW + SKEW + 1 }), view({ node: a }), NOW),
    { rejected: "FutureTimestamp" },
  ],
  [
    "future envelope time",
    input(obs({ timeMs: NOW + SKEW + 1 }), view({ node: a }), NOW),
    { rejected: "FutureTimestamp" },
  ],
  [
    "every timestamp inside the skew bound (observer clock 1.5 s ahead) → accepted",
    input(obs({ heartbeatSeenMs: NOW + 1000 - 500 }, NOW + 1500), view({ node: a }), NOW),
    "suspect",
  ],
  [
    "skew 0: one millisecond ahead is refused",
    input(obs({}, NOW + 1), view({ node: a, policy: policy({ corroboration: { maxClockSkewMs: 0 } }) }), NOW),
    { rejected: "FutureTimestamp" },
  ],
];

function check(d: ReturnType<typeof detect.decide>, expected: Expect) {
  expect(d.actions).toEqual([]);
  if (expected === "suspect") {
    expect(d.outcome.kind).toBe("processed");
    expect(d.emit.map((e) => e.type)).toEqual([EVENT_TYPES.nodeSuspected]);
    return;
  }
  const [kind, code] =
    "rejected" in expected ? ["rejected", expected.rejected] : ["ignored", expected.ignored];
  expect(d.outcome).toEqual({ kind, code, reason: expect.any(String) });
  expect(d.emit).toEqual([]);
}

describe("detect: an observation counts only if its origin and times check out", () => {
  test.each(detectRows)("%s", (_n, inp, expected) => check(detect.decide(inp), expected));
  test("the suspicion carries the observer's proof and sighting (confirm re-verifies them)", () => {
    const d = detect.decide(input(obs({ heartbeatSeenMs: NOW - 900 })));
    const e = (d.emit[0]!.data as NodeSuspected).evidence;
    expect(e.proof).toEqual((obs({ heartbeatSeenMs: NOW - 900 }).data as { proof: unknown }).proof);
    expect(e).toMatchObject({ heartbeatSeenAt: at(NOW - 900), heartbeatSynced: true, observerNode: "b" });
  });
  test("future timestamps are refused before the view is read (screen agrees with decide)", () => {
    for (const [, inp, expected] of detectRows) {
      if (typeof expected === "object" && "rejected" in expected && expected.rejected === "FutureTimestamp") {
        const early = detect.screen({ event: inp.event, policy: inp.view.policy, now: inp.now });
        if (early) expect(early).toEqual(detect.decide(inp));
      }
    }
    const early = detect.screen({ event: obs({ timeMs: NOW + SKEW + 1 }), policy: policy(), now: T0 + NOW });
    expect(early?.outcome).toMatchObject({ kind: "rejected", code: "FutureTimestamp" });
  });
});

const susp = (ev: Evidence[]) =>
  incident("a", { phase: "Suspected", evidence: ev, timestamps: { suspected: at(0) } });
const suspicionWith = (e: Evidence, timeMs = Date.parse(e.at) - T0) => {
  const ev = suspected(e.observerNode, e.node, timeMs);
  return { ...ev, time: at(timeMs), data: { ...(ev.data as NodeSuspected), evidence: e } };
};
type CRow = [
  name: string,
  event: ReturnType<typeof suspected>,
  v: ReturnType<typeof view>,
  expected: { rejected: RejectCode } | { ignored: IgnoreCode } | { phase: string },
];
const confirmRows: CRow[] = [
  [
    "a suspicion whose evidence names c's observer but is signed with a's key",
    suspicionWith(signEvidence(evidence("c", "b", NOW), "a")),
    view({ node: node("b"), incident: undefined }),
    { rejected: "UnknownObserverKey" },
  ],
  [
    "the veto defeated by dropping the observer's sighting from its signed evidence",
    (() => {
      const { heartbeatSeenAt: _seen, ...rest } = signEvidence({
        ...evidence("c", "a", NOW),
        heartbeatSeenAt: at(NOW - 100),
      });
      return suspicionWith(rest);
    })(),
    view({ node: a, incident: susp([evidence("b", "a", NOW - 100)]) }),
    { rejected: "BadSignature" },
  ],
  [
    "a forged heartbeatSeenAt (moved before the streak) is refused by the signature",
    (() => {
      const genuine = signEvidence({ ...evidence("c", "a", NOW), heartbeatSeenAt: at(NOW - 100) });
      return suspicionWith({ ...genuine, heartbeatSeenAt: at(NOW - 5000) });
    })(),
    view({ node: a, incident: susp([evidence("b", "a", NOW - 100)]) }),
    { rejected: "BadSignature" },
  ],
  [
    "evidence timestamped beyond the skew",
    suspicionWith(evidence("c", "a", NOW + SKEW + 1), NOW),
    view({ node: a }),
    { rejected: "FutureTimestamp" },
  ],
  [
    "the envelope of the suspicion timestamped beyond the skew",
    suspicionWith(evidence("c", "a", NOW), NOW + SKEW + 1),
    view({ node: a }),
    { rejected: "FutureTimestamp" },
  ],
  [
    "a suspicion of the current boot carrying a signed miss of the previous boot (S3)",
    suspicionWith(evidence("c", "a", NOW, "probe", "a-previous-boot")),
    view({ node: a }),
    { rejected: "InconsistentEvent" },
  ],
  [
    "stored evidence about the previous boot does not make the quorum of the current one",
    suspected("c", "a", NOW),
    view({ node: a, incident: susp([evidence("b", "a", NOW - 100, "probe", "a-previous-boot")]) }),
    { phase: "Suspected" },
  ],
  [
    "probe evidence about a node fenced off (out-of-service taint)",
    suspected("c", "a", NOW),
    view({ node: node("a", { outOfService: true }) }),
    { ignored: "NodeOutOfService" },
  ],
  [
    "an observer the ring does not assign",
    suspected("b", "a", NOW),
    view({ node: a, nodes: ["a", "b", "c", "d"].map((n) => node(n)) }),
    { rejected: "ObserverNotAssigned" },
  ],
  [
    "stored evidence whose observer is no longer Ready does not make the quorum",
    suspected("c", "a", NOW),
    view({
      node: a,
      nodes: [a, node("b", { ready: "False" }), node("c")],
      incident: susp([evidence("b", "a", NOW - 100)]),
    }),
    { phase: "Suspected" },
  ],
  [
    "stored evidence whose signature no longer verifies (tampered in the status) does not count",
    suspected("c", "a", NOW),
    view({ node: a, incident: susp([{ ...evidence("b", "a", NOW - 100), consecutiveMisses: 9 }]) }),
    { phase: "Suspected" },
  ],
  [
    "stored evidence with another node's key (b rotated twice since) does not count",
    suspected("c", "a", NOW),
    view({
      node: a,
      incident: susp([evidence("b", "a", NOW - 100)]),
      observers: {
        ...observers(),
        b: { keys: [new ObserverKey().annotation], renewTime: at(0), durationMs: 1e9 },
      },
    }),
    { phase: "Suspected" },
  ],
  [
    "two genuine, fresh, assigned observers → Confirmed",
    suspected("c", "a", NOW),
    view({ node: a, incident: susp([evidence("b", "a", NOW - 100)]) }),
    { phase: "Confirmed" },
  ],
];

describe("confirm: every counted piece of evidence is re-checked against the cluster", () => {
  test.each(confirmRows)("%s", (_n, event, v, expected) => {
    const d = confirm.decide({ event, view: v, now: T0 + NOW, self: CONFIRM });
    if ("rejected" in expected || "ignored" in expected) {
      const outcome =
        "rejected" in expected
          ? { kind: "rejected", code: expected.rejected }
          : { kind: "ignored", code: expected.ignored };
      expect(d.outcome).toEqual({ ...outcome, reason: expect.any(String) });
      expect(d.actions).toEqual([]);
      expect(d.emit).toEqual([]);
      return;
    }
    expect(d.outcome.kind).toBe("processed");
    const act = d.actions.at(-1)!; // a confirmation writes the admission ledger first
    const status =
      act.kind === "updateIncidentStatus"
        ? act.status
        : act.kind === "createIncident"
          ? act.incident.status
          : undefined;
    expect(status?.phase).toBe(expected.phase);
    expect(d.emit.some((e) => e.type === EVENT_TYPES.fenceRequested)).toBe(expected.phase === "Confirmed");
  });
});
