// When an observer starts a probe of a target, and whether a finished probe's result
// counts. A probe starts every probe interval even while earlier ones still wait out their
// timeout (at most `maxInFlight` per target), so a silent node is missed once per interval,
// not once per interval plus timeout. Results count in the order their probes began: one
// that a later probe's result overtook is dropped, so a slow old miss never breaks the
// streak of, or starts one after, a newer answer. Pure bookkeeping: never probes, never
// reads the clock.

/** A started probe: hand it back to `done` when it finishes. */
export type ProbeTicket = number;

export class ProbeSchedule {
  private readonly maxInFlight: number;
  private readonly inFlight = new Map<string, number>();
  /** Per target, the ticket of the latest probe whose result counted. */
  private readonly taken = new Map<string, ProbeTicket>();
  private seq = 0;

  /**
   * @param maxInFlight probes of one target that may wait for an answer at once (≥ 1). With
   *   the defaults (every 200 ms, 250 ms timeout) a silent target has two in flight; more only
   *   bounds a policy whose timeout is many intervals long.
   */
  constructor(maxInFlight = 3) {
    if (!Number.isInteger(maxInFlight) || maxInFlight < 1)
      throw new RangeError(`maxInFlight must be a whole number ≥ 1, got ${maxInFlight}`);
    this.maxInFlight = maxInFlight;
  }

  /** A probe of `target` starts now: its ticket, or undefined when the target has maxInFlight waiting. */
  start(target: string): ProbeTicket | undefined {
    const n = this.inFlight.get(target) ?? 0;
    if (n >= this.maxInFlight) return undefined;
    this.inFlight.set(target, n + 1);
    return ++this.seq;
  }

  /** The probe with `ticket` finished: whether its result counts (no later probe's result did). */
  done(target: string, ticket: ProbeTicket): boolean {
    const n = (this.inFlight.get(target) ?? 1) - 1;
    if (n > 0) this.inFlight.set(target, n);
    else this.inFlight.delete(target);
    if (ticket < (this.taken.get(target) ?? 0)) return false;
    this.taken.set(target, ticket);
    return true;
  }

  /** Probes of `target` waiting for an answer now. */
  waiting(target: string): number {
    return this.inFlight.get(target) ?? 0;
  }
}
