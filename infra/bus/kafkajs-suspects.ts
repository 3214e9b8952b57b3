// Fix 7 of kafkajs-failover.ts: seeds and metadata refreshes away from a broker that just
// went silent. kafkajs takes a client's seed broker from the front of its list and moves it
// only after a connection error, and sends each metadata refresh to any connected broker.
// An idle producer (a stage publishes only when an incident moves) has one connection, to
// its seed: when that broker froze, its next send waited a request timeout there, then
// reconnected to the same seed and waited a connection timeout (2.3 s in the lab's hangs;
// docs/lab.md, "Where the hangs' time goes"). Here a broker is suspect for SUSPECT_MS after
// a request to it timed out with nothing received since it was sent (fix 5's case) or a
// connection to it timed out, in any client of the process, until it sends data again
// (kafkajs-failover.ts marks and clears). While some broker is suspect, a metadata refresh
// goes to a connected broker that is not, or else connects one that is not, before kafkajs'
// own choice; and a client with no connected broker moves its seed past suspect ones
// first. With no suspect broker kafkajs' own code runs unchanged. It never closes a
// connection, sends a request or touches a record itself.

/** How long a broker stays suspect after a silent timeout, unless it sends data first, ms. */
export const SUSPECT_MS = 10_000;

/** "host:port" → until when that broker is suspect; shared by every client of the process. */
const suspects = new Map<string, number>();
const address = (host: string | undefined, port: number | undefined) => `${host}:${port}`;

/** `host:port` went silent on a client of this process. */
export function markSuspect(host: string | undefined, port: number | undefined, now = Date.now()): void {
  suspects.set(address(host, port), now + SUSPECT_MS);
}

/** `host:port` sent data: it is not silent. */
export function clearSuspect(host: string | undefined, port: number | undefined): void {
  suspects.delete(address(host, port));
}

/** Whether `host:port` went silent within SUSPECT_MS and has sent nothing since. */
export function isSuspect(host: string | undefined, port: number | undefined, now = Date.now()): boolean {
  const key = address(host, port);
  const until = suspects.get(key);
  if (until === undefined) return false;
  if (until > now) return true;
  suspects.delete(key);
  return false;
}

/** A broker of kafkajs' BrokerPool. */
interface PoolBroker {
  connectionPool?: { host?: string; port?: number };
  isConnected(): boolean;
}

interface BrokerPoolLike {
  brokers: Record<string, PoolBroker>;
  seedBroker?: PoolBroker;
  hasConnectedBrokers(): boolean;
  createSeedBroker(): Promise<void>;
  findBroker(q: { nodeId: string }): Promise<PoolBroker>;
}

/** What fix 7 replaces on kafkajs' BrokerPool. */
export interface BrokerPoolProto {
  connect(this: BrokerPoolLike): Promise<unknown>;
  findConnectedBroker(this: BrokerPoolLike): Promise<PoolBroker>;
}

/** How many suspect seeds a connect passes over at most (a bootstrap list is a few brokers). */
const MAX_SEED_SKIPS = 8;

const suspectBroker = (b: PoolBroker | undefined) =>
  b !== undefined && isSuspect(b.connectionPool?.host, b.connectionPool?.port);

/** Replaces BrokerPool's findConnectedBroker and connect (once; the caller checks they exist). */
export function patchBrokerPool(proto: BrokerPoolProto): void {
  const findConnectedBroker = proto.findConnectedBroker;
  const connect = proto.connect;
  proto.findConnectedBroker = async function () {
    const ids = Object.keys(this.brokers);
    if (!suspectBroker(this.seedBroker) && !ids.some((id) => suspectBroker(this.brokers[id])))
      return findConnectedBroker.call(this);
    const trusted = ids.filter((id) => !suspectBroker(this.brokers[id]));
    const start = Math.floor(Math.random() * trusted.length); // kafkajs picks at random too
    const inTurn = [...trusted.slice(start), ...trusted.slice(0, start)];
    const connected = inTurn.find((id) => this.brokers[id]!.isConnected());
    if (connected !== undefined) return this.findBroker({ nodeId: connected });
    for (const id of inTurn) {
      try {
        return await this.findBroker({ nodeId: id }); // connects it
      } catch {
        // not reachable either: the next one
      }
    }
    // No known broker to ask (a client that has read no metadata yet knows only its seed):
    // kafkajs falls back to the seed, so move it past suspect ones first.
    await skipSuspectSeeds(this);
    return findConnectedBroker.call(this);
  };
  proto.connect = async function () {
    if (!this.hasConnectedBrokers()) await skipSuspectSeeds(this);
    return connect.call(this);
  };
}

/**
 * Moves `pool`'s seed past suspect brokers (createSeedBroker disconnects the seed and takes
 * the next of the list); when every broker of the list is suspect it stops after
 * MAX_SEED_SKIPS, and kafkajs tries the one it ends on.
 */
async function skipSuspectSeeds(pool: BrokerPoolLike): Promise<void> {
  try {
    for (let i = 0; i < MAX_SEED_SKIPS && suspectBroker(pool.seedBroker); i++) await pool.createSeedBroker();
  } catch {
    // kafkajs' own connect goes on with whatever seed it has: never worse than without fix 7
  }
}
