// Evidence bound to its origin (core/evidence-proof.ts): the canonical claim bytes, the
// Ed25519 signature over them, and the key registry format. Each row changes one thing
// about a signed claim or the keys published for its observer node and names the verdict.
import { generateKeyPairSync } from "node:crypto";
import { describe, expect, test } from "vitest";
import {
  OBSERVATION_DOMAIN,
  claimBytes,
  keyAnnotation,
  keyIdOf,
  verifyClaim,
  type ObservationClaim,
  type ProofVerdict,
} from "../../../core/evidence-proof.ts";
import { ObserverKey } from "../../../source/observer-key.ts";

const CLAIM: ObservationClaim = {
  observer: "event-source-b-x1",
  observerNode: "b",
  target: "a",
  targetBootId: "aaaaaaaa-1111-4111-8111-111111111111",
  result: "missed",
  consecutiveMisses: 3,
  firstMissAt: "2025-01-01T00:00:00.600Z",
  at: "2025-01-01T00:00:01.000Z",
  heartbeatSeenAt: "2025-01-01T00:00:00.700Z",
  heartbeatRenewedBy: "2025-01-01T00:00:00.650Z",
  heartbeatSynced: true,
};

const b = new ObserverKey();
const a = new ObserverKey();
const proof = b.sign(CLAIM);

describe("canonical claim bytes", () => {
  test("a JSON array in a fixed order, domain first, absent optionals as null", () => {
    const { firstMissAt: _f, heartbeatSeenAt: _h, heartbeatRenewedBy: _r, ...bare } = CLAIM;
    expect(JSON.parse(claimBytes(bare).toString("utf8"))).toEqual([
      OBSERVATION_DOMAIN,
      "event-source-b-x1",
      "b",
      "a",
      "missed",
      3,
      null,
      "2025-01-01T00:00:01.000Z",
      null,
      null,
      true,
      "aaaaaaaa-1111-4111-8111-111111111111",
    ]);
  });
  test("the same claim gives the same bytes whatever the property order", () => {
    const reordered = Object.fromEntries(Object.entries(CLAIM).reverse()) as unknown as ObservationClaim;
    expect(claimBytes(reordered).equals(claimBytes(CLAIM))).toBe(true);
  });
  test("a field's value cannot slide into its neighbour (no concatenation ambiguity)", () => {
    const shifted = { ...CLAIM, observer: "event-source-b-x1b", observerNode: "" };
    expect(claimBytes(shifted).equals(claimBytes(CLAIM))).toBe(false);
  });
});

describe("verifyClaim", () => {
  const tamper: [string, Partial<ObservationClaim>][] = [
    ["observer replica", { observer: "event-source-b-other" }],
    ["observer node (speaking for another node with b's signature)", { observerNode: "c" }],
    ["target", { target: "c" }],
    ["target boot (a miss of an ended boot held against the next one)", { targetBootId: "aaaaaaaa-9999" }],
    ["result", { result: "restored" }],
    ["consecutiveMisses", { consecutiveMisses: 30 }],
    ["firstMissAt (a longer streak)", { firstMissAt: "2025-01-01T00:00:00.000Z" }],
    ["at (fresher)", { at: "2025-01-01T00:00:04.000Z" }],
    ["heartbeatSeenAt removed (to escape the veto)", { heartbeatSeenAt: undefined }],
    ["heartbeatSeenAt moved before the streak", { heartbeatSeenAt: "2025-01-01T00:00:00.100Z" }],
    [
      "heartbeatRenewedBy moved before the streak (to escape the veto)",
      { heartbeatRenewedBy: "2025-01-01T00:00:00.500Z" },
    ],
    ["heartbeatSynced", { heartbeatSynced: false }],
  ];
  test.each(tamper)("a changed %s → BadSignature", (_n, change) => {
    expect(verifyClaim({ ...CLAIM, ...change }, proof, [b.annotation])).toBe<ProofVerdict>("BadSignature");
  });

  const rows: [string, () => ProofVerdict, ProofVerdict][] = [
    ["the claim as signed, key published → ok", () => verifyClaim(CLAIM, proof, [b.annotation]), "ok"],
    [
      "signed with the previous key (rolling restart) → ok",
      () => verifyClaim(CLAIM, proof, [a.annotation, b.annotation]),
      "ok",
    ],
    [
      "no key published for the node → UnknownObserverKey",
      () => verifyClaim(CLAIM, proof, []),
      "UnknownObserverKey",
    ],
    [
      "another node's key: a signs a claim naming b; b publishes only its own → UnknownObserverKey",
      () => verifyClaim(CLAIM, a.sign(CLAIM), [b.annotation]),
      "UnknownObserverKey",
    ],
    [
      "another node's signature under b's key id → BadSignature",
      () => verifyClaim(CLAIM, { keyId: b.keyId, sig: a.sign(CLAIM).sig }, [b.annotation]),
      "BadSignature",
    ],
    [
      "an annotation whose key id does not match its key → UnknownObserverKey",
      () => verifyClaim(CLAIM, proof, [`${b.keyId}:${a.annotation.split(":")[1]}`]),
      "UnknownObserverKey",
    ],
    [
      "a malformed annotation → UnknownObserverKey",
      () => verifyClaim(CLAIM, proof, ["garbage"]),
      "UnknownObserverKey",
    ],
    [
      "a non-Ed25519 key published → UnknownObserverKey",
      () => {
        const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey;
        const der = ec.export({ type: "spki", format: "der" });
        return verifyClaim(CLAIM, { ...proof, keyId: keyIdOf(der) }, [keyAnnotation(ec)]);
      },
      "UnknownObserverKey",
    ],
    [
      "a signature that is not base64 of 64 bytes → BadSignature",
      () => verifyClaim(CLAIM, { ...proof, sig: "AAAA" }, [b.annotation]),
      "BadSignature",
    ],
  ];
  test.each(rows)("%s", (_n, run, verdict) => expect(run()).toBe(verdict));
});

describe("ObserverKey.annotations (the key registry on the heartbeat Lease)", () => {
  test("first start: only the current key", () => {
    expect(b.annotations({})).toEqual({ "fastfence.io/observer-key": b.annotation });
  });
  test("a restart keeps the key it replaces as previous", () => {
    expect(b.annotations({ "fastfence.io/observer-key": a.annotation })).toEqual({
      "fastfence.io/observer-key": b.annotation,
      "fastfence.io/observer-key-previous": a.annotation,
    });
  });
  test("a renewal keeps the previous key as it was", () => {
    expect(
      b.annotations({
        "fastfence.io/observer-key": b.annotation,
        "fastfence.io/observer-key-previous": a.annotation,
      }),
    ).toEqual({
      "fastfence.io/observer-key": b.annotation,
      "fastfence.io/observer-key-previous": a.annotation,
    });
  });
  test("the key id is the first 16 hex digits of sha256 over the SPKI DER", () => {
    expect(b.keyId).toMatch(/^[0-9a-f]{16}$/);
    expect(b.annotation.startsWith(`${b.keyId}:`)).toBe(true);
  });
});
