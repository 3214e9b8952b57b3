// Hosts one function as a plain Kafka consumer (local runner, lab, tests). It consumes
// from, and publishes to, the topics its CatalogView names: the catalog's per-stage
// topics, or the one FASTFENCE_KAFKA_TOPIC (host.ts catalogViewFor). Each record goes
// through the shared dispatcher; emitted events are published and the offset is
// committed only after that (at-least-once; handlers are idempotent through
// resourceVersion-guarded writes); copies of a fact it already handled (events/catalog.ts
// factKey) are skipped, and so are other stages' event types (by the ce_type header,
// before any decoding). Invalid, oversized, failed or rejected records go to the
// dead-letter topic with the original bytes (truncated when large; a rejected one with
// the stage's reason code), in as few produce calls per fetched batch as fit, so a flood
// of bad records costs little and never stalls a partition. It never commits an offset
// for a record whose outcome was not recorded. A `traceparent` record header (not the
// event's ce_traceparent) is the delivery's trace context (infra/tracing.ts). Keepalive
// records (events/keepalive.ts) are skipped unread; with `keepaliveMs` the replica writes
// them to its own output topics (infra/runtime/keepalive.ts).
import { FastfenceError, InvalidInputError } from "../../core/errors.ts";
import { settlesWithin, type Clock } from "../../core/clock.ts";
import { acksFor, factKey, isEventType } from "../../events/catalog.ts";
import { decodeKafka, encodeKafka } from "../../events/codec.ts";
import type { FfEvent } from "../../events/envelope.ts";
import type { StageInfo } from "../../functions/contract.ts";
import type { EventHandler } from "./contract.ts";
import type { Bus, BusRecord, Subscription } from "../bus/bus.ts";
import type { Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";
import type { Tracing } from "../tracing.ts";
import { isKeepalive } from "../../events/keepalive.ts";
import { byteBatches, deadLetterRecords, type FailedRecord } from "./dead-letter.ts";
import { runKeepalive } from "./keepalive.ts";
import { createDispatcher, type CatalogView, type DispatchConfig } from "./dispatch.ts";

/**
 * Largest record taken as an event, bytes. Events are a few KiB; a larger record is
 * dead-lettered (with a truncated copy) without being decoded.
 */
export const MAX_EVENT_BYTES = 256 * 1024;

export interface KafkaRuntimeConfig {
  /**
   * "each-replica" (default): every replica reads every partition in its own consumer
   * group, so a replica on a dead node stalls nothing (no session timeout, no
   * rebalance); duplicates are harmless because every state change is a
   * resourceVersion-guarded write. "shared": one group per function, partitions split
   * between replicas; less duplicate work, but a dead member's partitions wait for the
   * session timeout.
   */
  groupMode: "each-replica" | "shared";
  /** Replica id (pod name), used in the group id and the event `source`. */
  replica: string;
  dispatch?: Partial<DispatchConfig>;
  /** How long to keep retrying the first subscription, ms. Default 120000 (brokers starting up). */
  subscribeTimeoutMs?: number;
  /**
   * How long stop() waits for the consumer to leave its group, ms. Default 5000
   * (STOP_LEAVE_WAIT_MS). Leaving asks the group coordinator, and a frozen coordinator
   * (connections open, nothing answering) holds that for the client's retries, tens of
   * seconds: past this wait stop() returns and the leave goes on in the background. Records
   * are no longer handled by then (stop aborts handling first), so nothing is committed
   * that was not handled; a shared group's other members get this member's partitions
   * once the leave or its session ends.
   */
  stopLeaveWaitMs?: number;
  /**
   * ISR keepalive interval, ms (events/keepalive.ts, infra/runtime/keepalive.ts): while
   * the bus reports an unreachable broker, every this often one keepalive record to every
   * partition of the stage's output topics, so a dead broker leaves every ISR at once and
   * no later hop waits replica.lag.time.max.ms. Default 0: off.
   */
  keepaliveMs?: number;
}

/** KafkaRuntimeConfig.stopLeaveWaitMs's default. */
export const STOP_LEAVE_WAIT_MS = 5000;

/** A bounded set of the most recently added ids (oldest forgotten first). */
export class RecentIds {
  private readonly ids = new Set<string>();
  private readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  has(id: string): boolean {
    return this.ids.has(id);
  }
  add(id: string): void {
    this.ids.delete(id);
    this.ids.add(id);
    if (this.ids.size > this.max) this.ids.delete(this.ids.values().next().value as string);
  }
}

export interface KafkaRuntime {
  ready: Promise<void>;
  stop(): Promise<void>;
}

/**
 * The topics a function's consumer reads: wherever the catalog view publishes the event
 * types it subscribes to. With the catalog's topics these are its subscriptions' topics;
 * with a single topic (catalogViewFor(FASTFENCE_KAFKA_TOPIC)) that one topic, so a
 * function consumes from the same topic it and its peers publish to.
 */
export function consumedTopics(
  def: Pick<StageInfo, "subscriptions">,
  catalog: Pick<CatalogView, "topicOf">,
): string[] {
  return [...new Set(def.subscriptions.flatMap((s) => s.types.map((t) => catalog.topicOf(t))))];
}

/** The topics a function publishes to: those of the event types it emits, and dead letters. */
export function outputTopics(
  def: Pick<StageInfo, "emits">,
  catalog: Pick<CatalogView, "topicOf" | "deadLetterTopic">,
): string[] {
  return [...new Set([...def.emits.map((t) => catalog.topicOf(t)), catalog.deadLetterTopic])];
}

export async function startKafkaRuntime(opts: {
  def: StageInfo;
  handler: EventHandler;
  bus: Bus;
  catalog: CatalogView;
  clock: Clock;
  log: Logger;
  metrics: FunctionMetrics;
  config: KafkaRuntimeConfig;
  /** Called after each record's outcome is recorded (tests and trace tooling). */
  onResult?: (rec: BusRecord, emitted: FfEvent[]) => void;
  /** Default: noTracing. */
  tracing?: Tracing;
}): Promise<KafkaRuntime> {
  const { def, bus, catalog, clock, log, config } = opts;
  const source = `/fastfence/${def.name}/${config.replica}`;
  const dispatcher = createDispatcher({ ...opts, source, config: config.dispatch ?? {} });
  const stopping = new AbortController();
  const topics = consumedTopics(def, catalog);
  const groupId =
    config.groupMode === "shared" ? `fastfence-${def.name}` : `fastfence-${def.name}-${config.replica}`;

  // Facts this replica has fully handled (outcome recorded, emitted events published).
  // Hedged publishing can put one event on several partitions, and every detect replica
  // emits the same suspicion from the same observation; their copies are skipped here
  // instead of re-running the handler (API reads, re-emits) on machines that are busy
  // fencing. An optimisation only: every handler is idempotent.
  const handled = new RecentIds(4096);
  const subscribed = new Set(def.subscriptions.flatMap((s) => s.types));

  /**
   * One record's outcome: handled (emitted events published), skipped, or given up on:
   * its dead letter the caller must publish before the record's offset is committed (S5).
   */
  async function handle(rec: BusRecord): Promise<FailedRecord | undefined> {
    if (isKeepalive(rec)) return undefined; // a transport record, not an event
    const size = rec.value?.length ?? 0;
    if (size <= MAX_EVENT_BYTES) {
      // Cheap rejection: a known type this function does not subscribe to (another
      // stage's event on a shared topic) is skipped before decoding and validation.
      const type = rec.headers.ce_type;
      if (type !== undefined && isEventType(type) && !subscribed.has(type)) {
        opts.metrics.eventsIn.inc({ function: def.name, type });
        return undefined;
      }
    }
    let raw: Record<string, unknown> | undefined;
    let undecodable: unknown;
    if (size > MAX_EVENT_BYTES)
      undecodable = new InvalidInputError(
        "FF_INVALID_EVENT",
        `record of ${size} bytes is larger than any event (limit ${MAX_EVENT_BYTES} bytes)`,
      );
    else
      try {
        raw = decodeKafka(rec);
      } catch (err) {
        undecodable = err; // the dispatcher dead-letters it with this reason
      }
    const fact = raw ? factKey(raw, clock.now()) : undefined;
    if (fact !== undefined && handled.has(fact)) {
      opts.metrics.outcomes.inc({ function: def.name, outcome: "duplicate" });
      log.debug(
        { incident: "none", node: rec.key ?? "unknown", eventId: raw?.id, fact },
        "copy of a handled event skipped",
      );
      return undefined;
    }
    const decode = () => {
      if (raw) return raw;
      throw undecodable;
    };
    const result = await dispatcher.dispatch(decode, stopping.signal, {
      traceparent: rec.headers.traceparent,
    });
    if (result.kind === "dead-letter" && stopping.signal.aborted) {
      // Shutting down mid-delivery: leave the offset uncommitted so the record is
      // redelivered (to this group's next member or this replica's restart), not dead-lettered.
      throw result.error;
    }
    if (result.kind === "dead-letter")
      return {
        error: result.error,
        original: rec,
        origin: {
          consumer: `${def.name}/${config.replica}`,
          topic: rec.topic,
          partition: rec.partition,
          offset: rec.offset,
        },
        malformed: result.event === undefined,
      };
    if (result.kind === "done") {
      const byTopic = new Map<string, FfEvent[]>();
      for (const ev of result.emitted) {
        const key = `${catalog.topicOf(ev.type)}\u0000${acksFor(ev.type)}`;
        byTopic.set(key, [...(byTopic.get(key) ?? []), ev]);
      }
      for (const [key, evs] of byTopic) {
        const [topic, acks] = key.split("\u0000") as [string, "leader" | "all"];
        await bus.publish(topic, evs.map(encodeKafka), { acks });
      }
      if (fact !== undefined) handled.add(fact);
      opts.onResult?.(rec, result.emitted);
    }
    return undefined;
  }

  /**
   * Consecutive records of one partition: each handled in order, then the batch's dead
   * letters (one per failed event, one per error code for the malformed records:
   * deadLetterRecords) published in as few produce calls as fit (byteBatches), unhedged,
   * while the bus hands over the next batch — so a valid event never waits for the dead
   * letters before it. `settled` is what lets the bus commit the batch's offsets: no
   * offset is committed before its dead letter is acknowledged (S5).
   */
  async function onBatch(recs: BusRecord[]): Promise<{ settled: Promise<void> } | undefined> {
    const dead: { rec: BusRecord; failed: FailedRecord }[] = [];
    for (const rec of recs) {
      const failed = await handle(rec);
      if (failed) dead.push({ rec, failed });
    }
    if (!dead.length) return undefined;
    const letters = deadLetterRecords(
      dead.map((d) => d.failed),
      clock.now(),
    );
    const settled = (async () => {
      for (const group of byteBatches(letters))
        await bus.publish(catalog.deadLetterTopic, group, { hedge: false });
      for (const d of dead) opts.onResult?.(d.rec, []);
    })();
    return { settled };
  }

  // Brokers may still be starting (or one may be down): keep trying to join for a while
  // instead of failing the replica at its first connection error.
  let sub: Subscription | undefined;
  const deadline = clock.now() + (config.subscribeTimeoutMs ?? 120_000);
  for (let attempt = 1; !sub; attempt++) {
    try {
      sub = await bus.subscribe({
        groupId,
        topics,
        fromBeginning: false,
        onRecord: async (rec) => void (await (await onBatch([rec]))?.settled),
        onBatch,
      });
    } catch (err) {
      if (clock.now() > deadline)
        throw new FastfenceError(
          "FF_BUS_UNAVAILABLE",
          `cannot subscribe ${def.name} to ${topics.join(", ")}`,
          {
            cause: err,
            retriable: true,
          },
        );
      log.warn({ incident: "none", node: "none", attempt, err }, "subscribing failed; retrying");
      await clock.sleep(Math.min(2000, 200 * attempt));
    }
  }
  // Connect the producer and learn the output topics' partition counts now, not at the
  // first event of an incident (a new process's first publish otherwise connects, does a
  // SASL handshake and reads metadata while a broker may be dead: seconds on the path).
  try {
    await bus.preparePublishing?.(outputTopics(def, catalog));
  } catch (err) {
    log.warn(
      { incident: "none", node: "none", groupId, err },
      "preparing to publish failed; the first publish will connect",
    );
  }
  log.info({ incident: "none", node: "none", groupId, topics }, "kafka runtime started");
  const outputs = [...new Set(def.emits.map((t) => catalog.topicOf(t)))].filter(
    (t) => t !== catalog.deadLetterTopic,
  );
  void runKeepalive({
    bus,
    topics: outputs,
    everyMs: config.keepaliveMs ?? 0,
    source,
    clock,
    log,
    signal: stopping.signal,
  });
  return {
    ready: sub.ready,
    stop: async () => {
      stopping.abort(new FastfenceError("FF_CANCELLED", "runtime stopping"));
      const waitMs = config.stopLeaveWaitMs ?? STOP_LEAVE_WAIT_MS;
      const left = sub
        .close()
        .catch((err: unknown) =>
          log.warn({ incident: "none", node: "none", groupId, err }, "leaving the consumer group failed"),
        );
      const inTime = await settlesWithin(clock, waitMs, left);
      if (!inTime)
        log.warn(
          { incident: "none", node: "none", groupId, waitMs },
          `the consumer has not left its group within ${waitMs} ms (a broker not answering); stopped without waiting`,
        );
    },
  };
}
