// Reports that a Kafka client could not reach a broker: a fetch or heartbeat that failed with
// a connection error or timed out (kafkajs-failover.ts), a publish to a partition that
// failed or missed the hedge deadline (hedge.ts). Listeners (the ISR keepalive,
// infra/runtime/keepalive.ts) learn that something is wrong with a broker right now, not
// which one or why. Listeners must be quick and must not throw; a throwing one is ignored.
// Holds no state but the listeners; never logs.

export type TroubleListener = () => void;

/** A set of listeners and the call that tells them all. */
export class BrokerTrouble {
  private readonly listeners = new Set<TroubleListener>();

  /** Adds a listener; returns the call that removes it. */
  on(listener: TroubleListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  report(): void {
    for (const l of this.listeners)
      try {
        l();
      } catch {
        // a listener's own failure is not the reporter's
      }
  }
}

/**
 * The process-wide reports of the kafkajs failover fixes: they patch kafkajs' classes once
 * for every client in the process, so their reports are for every kafkajs bus here.
 */
export const kafkaJsTrouble = new BrokerTrouble();
