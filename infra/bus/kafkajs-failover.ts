// Two fixes to kafkajs 2.2.4's consumer for the moment a broker dies, applied once to its
// ConsumerGroup class. kafkajs is pinned and no longer released, so these live here,
// small and tested (test/integration/bus-kafka.test.ts kills the group coordinator),
// instead of in a fork. Both only change what happens after a connection error; they
// never touch offsets, records or the group protocol itself.
//
// 1. Dead group coordinator. kafkajs finds the coordinator when it joins and keeps that
//    broker: when it dies, every heartbeat fails with a connection error, which kafkajs
//    treats as a generic failure (pause all fetches for a backoff, re-deliver uncommitted
//    records, repeat) and never looks the coordinator up again until the consumer crashes
//    and restarts. After such a failure we look the coordinator up again (as the Java
//    client does) and retry the heartbeat once; if the group has not moved yet, the
//    original error goes on as before.
// 2. Dead partition leader. kafkajs fetches from each broker separately, but a connection
//    error from one of them stops them all for a backoff, again and again until the
//    partition-leader map (refreshed only when it expires) no longer names the dead
//    broker. We treat such an error like kafkajs already treats a closed connection: that
//    broker's fetch returns nothing (after a short pause, so it does not spin), the others
//    go on, and the map is expired so the next fetch reads the new leaders as soon as the
//    controller has moved them.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

interface ConsumerGroupProto {
  heartbeat(this: ConsumerGroupLike, opts: unknown): Promise<unknown>;
  recoverFromFetch(this: ConsumerGroupLike, e: unknown): Promise<unknown>;
  __fastfenceFailover?: true;
}

interface BrokerLike {
  nodeId: number;
}

interface ConsumerGroupLike {
  groupId?: string;
  coordinator?: BrokerLike;
  cluster?: {
    brokerPool?: { metadataExpireAt: number | null };
    findGroupCoordinator?(q: { groupId: string }): Promise<BrokerLike>;
  };
}

const CONNECTION_ERRORS = new Set([
  "KafkaJSConnectionError",
  "KafkaJSConnectionClosedError",
  "KafkaJSRequestTimeoutError",
]);

function isConnectionError(e: unknown): boolean {
  for (let x: unknown = e, depth = 0; x && depth < 4; depth++) {
    if (x instanceof Error && CONNECTION_ERRORS.has(x.name)) return true;
    x = (x as { cause?: unknown; originalError?: unknown }).originalError ?? (x as { cause?: unknown }).cause;
  }
  return false;
}

/** How long a fetch from an unreachable broker pauses before that broker is tried again. */
const DEAD_BROKER_PAUSE_MS = 100;

let applied = false;

/** Applies both fixes (idempotent). Returns false if kafkajs' internals are not as expected. */
export function applyKafkaJsFailoverFixes(): boolean {
  if (applied) return true;
  const ConsumerGroup = require("kafkajs/src/consumer/consumerGroup.js") as { prototype: ConsumerGroupProto };
  const proto = ConsumerGroup.prototype;
  if (typeof proto.heartbeat !== "function" || typeof proto.recoverFromFetch !== "function") return false;
  if (proto.__fastfenceFailover) return (applied = true);
  const heartbeat = proto.heartbeat;
  const recoverFromFetch = proto.recoverFromFetch;
  proto.heartbeat = async function (opts) {
    try {
      return await heartbeat.call(this, opts);
    } catch (e) {
      const cluster = this.cluster;
      if (!isConnectionError(e) || !cluster?.findGroupCoordinator || !this.groupId) throw e;
      const found = await cluster.findGroupCoordinator({ groupId: this.groupId }).catch(() => undefined);
      if (!found || found.nodeId === this.coordinator?.nodeId) throw e;
      this.coordinator = found;
      return await heartbeat.call(this, opts);
    }
  };
  proto.recoverFromFetch = async function (e) {
    if (!isConnectionError(e)) return recoverFromFetch.call(this, e);
    if (this.cluster?.brokerPool) this.cluster.brokerPool.metadataExpireAt = null;
    await new Promise((r) => setTimeout(r, DEAD_BROKER_PAUSE_MS));
    return undefined; // this broker's fetch yields no batches; the other brokers' go on
  };
  proto.__fastfenceFailover = true;
  return (applied = true);
}
