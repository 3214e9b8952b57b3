// This event-source replica's signing identity: an Ed25519 key pair generated at start,
// the private key kept only in memory (never written, logged or sent), the public key
// published on the replica's own node heartbeat Lease (fastfence-alive-<node>) as
// "<keyId>:<base64 SPKI DER>". Signs the claims of node.observed events
// (core/evidence-proof.ts) and the answers to peers' vouch requests (core/vouch.ts). It performs no I/O itself; event-source.ts publishes the key.
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import {
  OBSERVER_KEY_ANNOTATION,
  OBSERVER_PREVIOUS_KEY_ANNOTATION,
  keyAnnotation,
  signClaim,
  type ObservationClaim,
  type Proof,
} from "../core/evidence-proof.ts";
import { claimOfObservation } from "../events/observation-claim.ts";
import {
  signVouch,
  signVouchRequest,
  type VouchAnswer,
  type VouchClaim,
  type VouchRequest,
  type VouchRequestClaim,
} from "../core/vouch.ts";
import type { NodeObserved } from "../events/schemas.ts";

export class ObserverKey {
  readonly annotation: string;
  readonly keyId: string;
  private readonly privateKey: KeyObject;
  constructor() {
    const { publicKey, privateKey } = generateKeyPairSync("ed25519");
    this.privateKey = privateKey;
    this.annotation = keyAnnotation(publicKey);
    this.keyId = this.annotation.slice(0, this.annotation.indexOf(":"));
  }

  /**
   * The heartbeat Lease annotations given the current ones: this key as current; the key it
   * replaces (if another) as previous, so evidence signed with it before a restart still verifies.
   */
  annotations(current: Readonly<Record<string, string>>): Record<string, string> {
    const cur = current[OBSERVER_KEY_ANNOTATION];
    const previous = cur && cur !== this.annotation ? cur : current[OBSERVER_PREVIOUS_KEY_ANNOTATION];
    return {
      [OBSERVER_KEY_ANNOTATION]: this.annotation,
      ...(previous && previous !== this.annotation ? { [OBSERVER_PREVIOUS_KEY_ANNOTATION]: previous } : {}),
    };
  }

  sign(claim: ObservationClaim): Proof {
    return signClaim(claim, this.privateKey, this.keyId);
  }

  /** A vouch answer (core/vouch.ts), signed only after the API acknowledged the record. */
  signVouch(c: VouchClaim): VouchAnswer {
    return signVouch(c, this.privateKey, this.keyId);
  }

  /** A request to a peer to vouch for this node (core/vouch.ts). */
  signVouchRequest(c: VouchRequestClaim): VouchRequest {
    return signVouchRequest(c, this.privateKey, this.keyId);
  }

  /** The observation with its proof. */
  signObservation(d: NodeObserved): NodeObserved {
    const { proof: _old, ...rest } = d;
    return { ...rest, proof: this.sign(claimOfObservation(rest)) };
  }
}
