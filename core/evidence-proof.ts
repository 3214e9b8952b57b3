// Evidence bound to its origin: the canonical bytes of one observer's probe claim, the
// Ed25519 signature over them, and the key registry format (an annotation on the observer
// node's heartbeat Lease, which only that node's identity may write). The event source
// signs with a private key that never leaves its memory; detect and confirm verify with
// the keys the API publishes for the node the claim names. Pure computation (node:crypto
// sign/verify): no I/O, never reads the clock, never sees a private key it did not get.
import { createHash, createPublicKey, sign, verify, type KeyObject } from "node:crypto";

/** Domain separation: a signature over an observation can never be reused for anything else. */
export const OBSERVATION_DOMAIN = "fastfence-observation-v3";

/** The heartbeat Lease annotation holding the replica's current key: "<keyId>:<base64 SPKI DER>". */
export const OBSERVER_KEY_ANNOTATION = "fastfence.io/observer-key";
/** The key it replaced (a rolling restart leaves evidence signed with it in flight). */
export const OBSERVER_PREVIOUS_KEY_ANNOTATION = "fastfence.io/observer-key-previous";

/** What an observer signs: every field of a node.observed event that a decision reads. */
export interface ObservationClaim {
  /** Observer replica (pod name). */
  observer: string;
  /** The node the observer runs on: the key must be one published for this node. */
  observerNode: string;
  target: string;
  /**
   * The target's boot ID as the observer last saw it in the API when it probed: ties the
   * claim to one incarnation, so a miss of a boot that has since ended never counts
   * against the next one (S3). Empty when the API gave the node no boot ID.
   */
  targetBootId: string;
  result: "missed" | "restored";
  consecutiveMisses: number;
  firstMissAt?: string | undefined;
  at: string;
  /** Observer's own clock: when it last saw the target's heartbeat Lease change. */
  heartbeatSeenAt?: string | undefined;
  /** Observer's own clock: the latest that renewal can have been written (absent: not dated). */
  heartbeatRenewedBy?: string | undefined;
  /** Whether the observer's heartbeat-Lease watch was listed and live when it probed. */
  heartbeatSynced?: boolean | undefined;
}

export interface Proof {
  /** First 16 hex digits of sha256 over the public key's SPKI DER. */
  keyId: string;
  /** Ed25519 signature over claimBytes, base64. */
  sig: string;
}

/**
 * The signed byte string: a JSON array in a fixed field order, the domain first. A JSON
 * array of strings, numbers, booleans and nulls has exactly one encoding here, so signer
 * and verifier agree byte for byte; an absent optional field is null, never skipped.
 */
export function claimBytes(c: ObservationClaim): Buffer {
  return Buffer.from(
    JSON.stringify([
      OBSERVATION_DOMAIN,
      c.observer,
      c.observerNode,
      c.target,
      c.result,
      c.consecutiveMisses,
      c.firstMissAt ?? null,
      c.at,
      c.heartbeatSeenAt ?? null,
      c.heartbeatRenewedBy ?? null,
      c.heartbeatSynced === true,
      c.targetBootId,
    ]),
    "utf8",
  );
}

/** The key id of a public key given as SPKI DER. */
export function keyIdOf(spkiDer: Buffer): string {
  return createHash("sha256").update(spkiDer).digest("hex").slice(0, 16);
}

/** The annotation value publishing `publicKey` ("<keyId>:<base64 SPKI DER>"). */
export function keyAnnotation(publicKey: KeyObject): string {
  const der = publicKey.export({ type: "spki", format: "der" });
  return `${keyIdOf(der)}:${der.toString("base64")}`;
}

/** Signs a claim with an Ed25519 private key. */
export function signClaim(claim: ObservationClaim, privateKey: KeyObject, keyId: string): Proof {
  return { keyId, sig: sign(null, claimBytes(claim), privateKey).toString("base64") };
}

export type ProofVerdict = "ok" | "UnknownObserverKey" | "BadSignature";

const keyCache = new Map<string, KeyObject | null>();

/** The public key of one annotation value, if it is well formed and its keyId matches its DER. */
export function publicKeyOf(annotation: string): { keyId: string; key: KeyObject } | undefined {
  const i = annotation.indexOf(":");
  if (i <= 0) return undefined;
  const keyId = annotation.slice(0, i);
  let key = keyCache.get(annotation);
  if (key === undefined) {
    key = null;
    try {
      const der = Buffer.from(annotation.slice(i + 1), "base64");
      const k = createPublicKey({ key: der, format: "der", type: "spki" });
      if (k.asymmetricKeyType === "ed25519" && keyIdOf(der) === keyId) key = k;
    } catch {
      key = null;
    }
    if (keyCache.size > 256) keyCache.clear();
    keyCache.set(annotation, key);
  }
  return key ? { keyId, key } : undefined;
}

/**
 * Verifies `proof` over `claim` with one of `published` (the annotation values the API
 * holds for the claim's observer node). UnknownObserverKey: no published key has the
 * proof's keyId (another node's key, an unpublished key, a rotated-out key).
 */
export function verifyClaim(
  claim: ObservationClaim,
  proof: Proof,
  published: readonly string[],
): ProofVerdict {
  const match = published.map(publicKeyOf).find((k) => k?.keyId === proof.keyId);
  if (!match) return "UnknownObserverKey";
  let ok = false;
  try {
    ok = verify(null, claimBytes(claim), match.key, Buffer.from(proof.sig, "base64"));
  } catch {
    ok = false;
  }
  return ok ? "ok" : "BadSignature";
}
