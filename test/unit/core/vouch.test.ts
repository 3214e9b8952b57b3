import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { keyAnnotation } from "../../../core/evidence-proof.ts";
import { bumpVouch, parseVouches, signVouch, verifyVouch } from "../../../core/vouch.ts";

const { publicKey, privateKey } = generateKeyPairSync("ed25519");
const published = keyAnnotation(publicKey);
const keyId = published.slice(0, published.indexOf(":"));
const other = keyAnnotation(generateKeyPairSync("ed25519").publicKey);
const claim = { voucher: "node-b", vouchee: "node-a", nonce: "n".repeat(24), counter: 3 };
const want = { voucher: "node-b", vouchee: "node-a", nonce: claim.nonce };

describe("verifyVouch", () => {
  const a = signVouch(claim, privateKey, keyId);
  it.each([
    ["the answer as signed", a, want, [published], "ok"],
    ["another request's nonce", a, { ...want, nonce: "x".repeat(24) }, [published], "WrongNonce"],
    ["for another node", a, { ...want, vouchee: "node-c" }, [published], "WrongNode"],
    ["from a peer not asked", a, { ...want, voucher: "node-c" }, [published], "WrongNode"],
    ["a key the peer did not publish", a, want, [other], "UnknownKey"],
    ["a bumped counter", { ...a, counter: 4 }, want, [published], "BadSignature"],
    ["garbage signature", { ...a, sig: "AAAA" }, want, [published], "BadSignature"],
  ] as const)("%s → %s", (_, ans, exp, keys, verdict) => expect(verifyVouch(ans, exp, keys)).toBe(verdict));
});

describe("the vouches annotation", () => {
  it("bumps one node's counter and keeps the others", () => {
    const one = bumpVouch(undefined, "node-a");
    expect(one).toEqual({ value: '{"node-a":1}', counter: 1 });
    const two = bumpVouch(bumpVouch(one.value, "node-c").value, "node-a");
    expect(two.counter).toBe(2);
    expect(parseVouches(two.value)).toEqual({ "node-a": 2, "node-c": 1 });
  });
  it.each(["", "{", "[1]", '"x"', '{"a":"1"}', "null"])("malformed %j counts as empty", (v) =>
    expect(parseVouches(v)).toEqual({}),
  );
});
