// Peer vouching, the rules (issue 18 item 4; docs/design.md "Watchdog fencing"): what a
// peer signs when it has recorded, through the API server, a vouch for a node whose own
// heartbeat renewal fails, and the counter it bumps on its own heartbeat Lease
// (core/watchdog.ts VOUCH_ANNOTATION). The answer is signed with the voucher's observer key
// (the one published on its heartbeat Lease) over the asking node's fresh nonce, so an
// answer cannot be forged, replayed or reused for another node; a request needs no
// authentication (it can only make a peer record a vouch, which delays fencing, never
// hastens it). Pure computation (node:crypto sign/verify): no I/O, never reads a clock.
import { sign, verify, type KeyObject } from "node:crypto";
import { publicKeyOf } from "./evidence-proof.ts";

export const VOUCH_DOMAIN = "fastfence-vouch-v1";

/** What a voucher signs once the API acknowledged its record. */
export interface VouchClaim {
  /** The node whose event source recorded the vouch (its Lease carries the counter). */
  voucher: string;
  /** The node vouched for (the one asking). */
  vouchee: string;
  /** The asking node's nonce: this answer belongs to that one request. */
  nonce: string;
  /** The counter for the vouchee on the voucher's Lease after the record. */
  counter: number;
}

export interface VouchAnswer extends VouchClaim {
  keyId: string;
  sig: string;
}

export function vouchBytes(c: VouchClaim): Buffer {
  return Buffer.from(JSON.stringify([VOUCH_DOMAIN, c.voucher, c.vouchee, c.nonce, c.counter]), "utf8");
}

export function signVouch(c: VouchClaim, privateKey: KeyObject, keyId: string): VouchAnswer {
  return { ...c, keyId, sig: sign(null, vouchBytes(c), privateKey).toString("base64") };
}

export type VouchVerdict = "ok" | "WrongNonce" | "WrongNode" | "UnknownKey" | "BadSignature";

/**
 * Checks an answer the asking node got: for it (vouchee), for its nonce, from the peer it
 * asked (voucher), signed by a key published on that peer's heartbeat Lease.
 */
export function verifyVouch(
  a: VouchAnswer,
  expect: { vouchee: string; voucher: string; nonce: string },
  published: readonly string[],
): VouchVerdict {
  if (a.nonce !== expect.nonce) return "WrongNonce";
  if (a.vouchee !== expect.vouchee || a.voucher !== expect.voucher) return "WrongNode";
  const k = published.map(publicKeyOf).find((p) => p?.keyId === a.keyId);
  if (!k) return "UnknownKey";
  try {
    return verify(null, vouchBytes(a), k.key, Buffer.from(a.sig, "base64")) ? "ok" : "BadSignature";
  } catch {
    return "BadSignature";
  }
}

/** The vouches annotation's value, node → counter; anything malformed counts as empty. */
export function parseVouches(value: string | undefined): Record<string, number> {
  if (!value) return {};
  try {
    const v = JSON.parse(value) as unknown;
    if (typeof v !== "object" || v === null || Array.isArray(v)) return {};
    return Object.fromEntries(
      Object.entries(v).filter(
        (e): e is [string, number] => typeof e[1] === "number" && Number.isSafeInteger(e[1]),
      ),
    );
  } catch {
    return {};
  }
}

/** The annotation with the vouchee's counter bumped, and the new counter. */
export function bumpVouch(value: string | undefined, vouchee: string): { value: string; counter: number } {
  const cur = parseVouches(value);
  const counter = (cur[vouchee] ?? 0) + 1;
  return { value: JSON.stringify({ ...cur, [vouchee]: counter }), counter };
}
