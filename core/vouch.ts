// Peer vouching, the rules (issue 18 item 4; docs/design.md "Watchdog fencing"): what a
// node whose own heartbeat renewal fails signs when it asks a peer to vouch, what the peer
// signs once it has recorded that vouch through the API server, the counter it bumps on its
// own heartbeat Lease (core/watchdog.ts VOUCH_ANNOTATION), and how many peers must vouch.
// Both the request and the answer are signed with the signer's observer key (the one
// published on its heartbeat Lease) and checked against the keys that Lease publishes: a
// request is bound to the peer asked, a fresh nonce and a time within VOUCH_REQUEST_MAX_AGE_MS,
// an answer to the asking node and its nonce, so neither can be forged, replayed or reused
// for another node. A node counts as vouched for only with vouchQuorum(clusterSize) distinct
// peers (never fewer than two), so one dishonest peer is never enough. Pure computation
// (node:crypto sign/verify): no I/O, never reads a clock.
import { sign, verify, type KeyObject } from "node:crypto";
import { publicKeyOf } from "./evidence-proof.ts";

export const VOUCH_DOMAIN = "fastfence-vouch-v1";
export const VOUCH_REQUEST_DOMAIN = "fastfence-vouch-request-v1";
/** How far a request's `at` may be from the voucher's wall clock, either way (ms). */
export const VOUCH_REQUEST_MAX_AGE_MS = 10_000;

/**
 * Distinct peers (besides the node itself) whose recorded vouch lets an isolated node keep
 * petting: a strict majority of the cluster counting the node, and never fewer than two —
 * "the API, or two distinct peers" on three nodes. A cluster of one or two nodes cannot vouch
 * (Infinity): its only peer would be enough alone.
 */
export function vouchQuorum(clusterSize: number): number {
  if (clusterSize < 3) return Infinity;
  return Math.max(2, Math.floor(clusterSize / 2));
}

/** What an asking node signs: who it is, whom it asks, its fresh nonce and its wall time. */
export interface VouchRequestClaim {
  vouchee: string;
  voucher: string;
  nonce: string;
  /** The asking node's wall clock, epoch ms. */
  at: number;
}

export interface VouchRequest extends VouchRequestClaim {
  keyId: string;
  sig: string;
}

export function vouchRequestBytes(c: VouchRequestClaim): Buffer {
  return Buffer.from(JSON.stringify([VOUCH_REQUEST_DOMAIN, c.vouchee, c.voucher, c.nonce, c.at]), "utf8");
}

export function signVouchRequest(c: VouchRequestClaim, privateKey: KeyObject, keyId: string): VouchRequest {
  return { ...c, keyId, sig: sign(null, vouchRequestBytes(c), privateKey).toString("base64") };
}

export type VouchRequestVerdict = "ok" | "Malformed" | "WrongNode" | "Stale" | "UnknownKey" | "BadSignature";

/**
 * Checks a request the voucher got: well formed, addressed to this voucher, dated within
 * VOUCH_REQUEST_MAX_AGE_MS of `now` (the voucher's wall clock), signed by a key published on
 * the vouchee's heartbeat Lease. A replay inside the window is the server's to refuse (nonce).
 */
export function verifyVouchRequest(
  r: unknown,
  expect: { voucher: string; now: number },
  published: (vouchee: string) => readonly string[],
): { verdict: VouchRequestVerdict; request?: VouchRequest } {
  const q = r as Partial<VouchRequest> | null;
  if (
    !q ||
    typeof q.vouchee !== "string" ||
    typeof q.voucher !== "string" ||
    typeof q.nonce !== "string" ||
    typeof q.at !== "number" ||
    typeof q.keyId !== "string" ||
    typeof q.sig !== "string"
  )
    return { verdict: "Malformed" };
  const req = q as VouchRequest;
  if (req.voucher !== expect.voucher || req.vouchee === expect.voucher) return { verdict: "WrongNode" };
  if (!Number.isFinite(req.at) || Math.abs(expect.now - req.at) > VOUCH_REQUEST_MAX_AGE_MS)
    return { verdict: "Stale" };
  const k = published(req.vouchee)
    .map(publicKeyOf)
    .find((p) => p?.keyId === req.keyId);
  if (!k) return { verdict: "UnknownKey" };
  try {
    const c = { vouchee: req.vouchee, voucher: req.voucher, nonce: req.nonce, at: req.at };
    const ok = verify(null, vouchRequestBytes(c), k.key, Buffer.from(req.sig, "base64"));
    return ok ? { verdict: "ok", request: req } : { verdict: "BadSignature" };
  } catch {
    return { verdict: "BadSignature" };
  }
}

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
