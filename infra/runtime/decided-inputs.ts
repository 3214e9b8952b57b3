// What one replica remembers of the inputs it decided with a write, by PureStage.sameAs
// key: so a copy of an input (every detect replica forwards the same evidence) can be
// answered without reading the view again. Memory only, bounded, per replica; it never
// decides anything itself and never answers for a key older than the window asked for.

import type { HandlerResult } from "./contract.ts";

/** How many keys a replica remembers (a burst of evidence is far smaller). */
const MAX_KEYS = 4096;

export class DecidedInputs {
  private readonly at = new Map<string, number>();

  /** The answer to a copy: ignored (DuplicateEvidence) if `key` was decided with a write within `windowMs` of `now`. */
  copyOf(key: string, now: number, windowMs: number): HandlerResult | undefined {
    const t = this.at.get(key);
    if (t === undefined || now - t > windowMs) return undefined;
    const reason = `this replica already wrote the same input ${now - t} ms ago`;
    return { outcome: { kind: "ignored", code: "DuplicateEvidence", reason }, emit: [] };
  }

  remember(key: string, now: number): void {
    this.at.delete(key);
    this.at.set(key, now);
    if (this.at.size <= MAX_KEYS) return;
    // Oldest first (insertion order): drop the oldest half.
    let drop = this.at.size / 2;
    for (const k of this.at.keys()) {
      if (drop-- <= 0) break;
      this.at.delete(k);
    }
  }
}
