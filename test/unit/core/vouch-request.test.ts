// Vouch requests are signed by the asking node with the key its heartbeat Lease publishes,
// and bound to the peer asked and a time (core/vouch.ts verifyVouchRequest); how many peers
// must vouch (vouchQuorum). On 6f7efbe a request carried no signature and nothing checked
// who sent it, and one peer of three was enough. Plain data.
import { describe, expect, it } from "vitest";
import { generateKeyPairSync } from "node:crypto";
import { keyAnnotation, keyIdOf } from "../../../core/evidence-proof.ts";
import {
  signVouchRequest,
  verifyVouchRequest,
  vouchQuorum,
  VOUCH_REQUEST_MAX_AGE_MS,
} from "../../../core/vouch.ts";

const key = () => {
  const k = generateKeyPairSync("ed25519");
  const der = k.publicKey.export({ type: "spki", format: "der" });
  return { ...k, keyId: keyIdOf(der), annotation: keyAnnotation(k.publicKey) };
};
const A = key();
const FORGER = key();
const NOW = 1_700_000_000_000;
const claim = { vouchee: "node-a", voucher: "node-b", nonce: "n".repeat(24), at: NOW };
const published = (n: string) => (n === "node-a" ? [A.annotation] : []);
const check = (r: unknown, now = NOW) => verifyVouchRequest(r, { voucher: "node-b", now }, published).verdict;

describe("vouchQuorum: the API, or at least two distinct peers and a majority", () => {
  it.each([
    [1, Infinity],
    [2, Infinity],
    [3, 2],
    [4, 2],
    [5, 2],
    [6, 3],
    [7, 3],
  ])("%i nodes → %s peers", (n, want) => {
    expect(vouchQuorum(n)).toBe(want);
  });
});

describe("verifyVouchRequest", () => {
  it("a request signed with the vouchee's published key, to this voucher, in time → ok", () => {
    expect(check(signVouchRequest(claim, A.privateKey, A.keyId))).toBe("ok");
  });
  it.each([
    ["unsigned", { vouchee: "node-a", nonce: claim.nonce }, "Malformed"],
    ["not an object", "x", "Malformed"],
    [
      "signed with a key node-a never published",
      signVouchRequest(claim, FORGER.privateKey, FORGER.keyId),
      "UnknownKey",
    ],
    [
      "another key's id on a forged signature",
      { ...signVouchRequest(claim, FORGER.privateKey, FORGER.keyId), keyId: A.keyId },
      "BadSignature",
    ],
    [
      "a field changed after signing",
      { ...signVouchRequest(claim, A.privateKey, A.keyId), vouchee: "node-c" },
      "UnknownKey",
    ],
    [
      "the nonce changed after signing",
      { ...signVouchRequest(claim, A.privateKey, A.keyId), nonce: "m".repeat(24) },
      "BadSignature",
    ],
    [
      "addressed to another voucher",
      signVouchRequest({ ...claim, voucher: "node-c" }, A.privateKey, A.keyId),
      "WrongNode",
    ],
    [
      "for the voucher itself",
      signVouchRequest({ ...claim, vouchee: "node-b" }, A.privateKey, A.keyId),
      "WrongNode",
    ],
  ] as const)("%s → %s", (_n, r, want) => {
    expect(check(r)).toBe(want);
  });
  it("too old or too far ahead of the voucher's clock → Stale", () => {
    const r = signVouchRequest(claim, A.privateKey, A.keyId);
    expect(check(r, NOW + VOUCH_REQUEST_MAX_AGE_MS + 1)).toBe("Stale");
    expect(check(r, NOW - VOUCH_REQUEST_MAX_AGE_MS - 1)).toBe("Stale");
    expect(check(r, NOW + VOUCH_REQUEST_MAX_AGE_MS)).toBe("ok");
  });
});
