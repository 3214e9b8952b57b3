// Issue "least privilege and proofs that cannot be bent", item 3.3: before any round fence
// re-counts the observer evidence the NodeFence status records (functions/fence/
// confirmation.pure.ts, S2). On 6f7efbe it counted every stored piece by observer node
// without verifying its signature, so whoever could write the status (confirm's identity;
// nodefence-status-policy.yaml gives the evidence to confirm alone) could confirm any node
// with evidence no observer signed. Now each stored probe piece counts only if its Ed25519
// signature verifies with a key its observer node publishes on its heartbeat Lease (as
// confirm checks, core/evidence-checks.ts) and it names the node's current boot; too few
// verified pieces: rejected StoredEvidenceUnverified. Plain data, no I/O.
import { describe, expect, test } from "vitest";
import { decide } from "../../../functions/fence/handler.ts";
import { checkConfirmation } from "../../../functions/fence/confirmation.pure.ts";
import type { DecideInput, View } from "../../../core/decision.ts";
import type { Evidence, NodeFence } from "../../../core/incident.ts";
import { statusOf } from "../../../core/incident.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import {
  FENCE,
  NEW_BOOT,
  T0,
  TRUSTED,
  at,
  confirmed,
  event,
  evidence,
  node,
  observers,
  policy,
  signEvidence,
  view,
} from "../../scenarios/fixtures.ts";

const NOW = 1_000;

/** A Confirmed incident of node a whose stored evidence is `ev` (b's genuine piece plus one more). */
const withEvidence = (ev: Evidence[]): NodeFence => confirmed("a", 0, { evidence: ev });
const genuineB = () => evidence("b", "a", -100);

const request = (inc: NodeFence) =>
  event(
    EVENT_TYPES.fenceRequested,
    "a",
    {
      incident: inc.metadata.name,
      node: "a",
      bootId: inc.spec.bootId,
      confirmedAt: at(0),
      observers: ["b", "c"],
    },
    { incident: inc.metadata.name },
  );

const input = (inc: NodeFence, v: Partial<View> = {}): DecideInput<FfEvent> => ({
  event: request(inc),
  view: view({ node: node("a"), incident: inc, trustedConfirmers: TRUSTED, ...v }),
  now: T0 + NOW,
  self: FENCE,
});

const check = (inc: NodeFence, obs = observers()) =>
  checkConfirmation(inc, statusOf(inc), node("a"), policy(), TRUSTED, obs);

/** c's piece, forged in one way each; every one was counted on 6f7efbe. */
const forged: [string, () => Evidence][] = [
  [
    "signed with another node's key (a's own key, claiming to be c)",
    () => signEvidence(evidence("c", "a", -50), "a"),
  ],
  [
    "unsigned",
    () => {
      const { proof: _p, ...rest } = evidence("c", "a", -50);
      return rest;
    },
  ],
  [
    "a signed field changed after signing (consecutiveMisses)",
    () => ({ ...evidence("c", "a", -50), consecutiveMisses: 9 }),
  ],
  [
    "a signature that is not base64 of anything signed",
    () => ({
      ...evidence("c", "a", -50),
      proof: { keyId: evidence("c", "a", -50).proof!.keyId, sig: "AAAA" },
    }),
  ],
  ["signed by c, but about another boot of a", () => evidence("c", "a", -50, "probe", NEW_BOOT)],
];

describe("fence counts only stored evidence whose signature verifies", () => {
  test("genuine evidence of b and c, keys published: the confirmation stands, a round starts", () => {
    const inc = withEvidence([genuineB(), evidence("c", "a", -50)]);
    expect(check(inc)).toBeUndefined();
    const d = decide(input(inc));
    expect(d.outcome.kind).toBe("processed");
    expect(d.actions.some((a) => a.kind === "powerOff")).toBe(true);
  });

  test.each(forged)("c's piece %s: not counted, fence refuses (StoredEvidenceUnverified)", (_n, piece) => {
    const inc = withEvidence([genuineB(), piece()]);
    expect(check(inc)).toMatchObject({ code: "StoredEvidenceUnverified" });
    const d = decide(input(inc));
    expect(d.outcome).toMatchObject({ kind: "rejected", code: "StoredEvidenceUnverified" });
    expect(d.actions).toEqual([]);
  });

  test("c's key is not published on its heartbeat Lease (no Lease, or rotated out twice): not counted", () => {
    const inc = withEvidence([genuineB(), evidence("c", "a", -50)]);
    const obs = observers(["a", "b"]);
    expect(check(inc, obs)).toMatchObject({ code: "StoredEvidenceUnverified" });
    expect(decide(input(inc, { observers: obs })).outcome).toMatchObject({
      code: "StoredEvidenceUnverified",
    });
  });

  test("the observers were not read: nothing verifies, nothing is powered off", () => {
    const inc = withEvidence([genuineB(), evidence("c", "a", -50)]);
    expect(checkConfirmation(inc, statusOf(inc), node("a"), policy(), TRUSTED, undefined)).toMatchObject({
      code: "StoredEvidenceUnverified",
    });
  });

  test("too few observers even counting everything is still ConfirmationBelowQuorum", () => {
    const inc = withEvidence([genuineB()]);
    expect(check(inc)).toMatchObject({ code: "ConfirmationBelowQuorum" });
  });

  test("API-server evidence (condition, lease) carries no signature and keeps its one vote", () => {
    const inc = withEvidence([genuineB(), evidence("@apiserver", "a", -50, "condition")]);
    expect(check(inc)).toBeUndefined();
  });
});
