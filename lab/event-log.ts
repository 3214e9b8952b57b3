// What a trial reads back from the lab: the NodeFence incidents in the API (retrying
// while the API server is busy) and the event log, every pipeline topic of the event
// catalog (optionally the observations) plus the dead letters, decoded, as the read-only
// audit Kafka user (a timed-out read is tried again with a fresh client). Read only: it never writes to the API or to Kafka.
import { FastfenceError } from "../core/errors.ts";
import { NODE_LABEL, type NodeFence } from "../core/incident.ts";
import { parseEvent, TOPICS } from "../events/catalog.ts";
import { decodeKafka } from "../events/codec.ts";
import { isKeepalive } from "../events/keepalive.ts";
import type { FfEvent } from "../events/envelope.ts";
import { sleep } from "../harness/env/base.ts";
import { createKafkaBus } from "../infra/bus/kafka-bus.ts";
import { labKafkaSecurity } from "./kafka.ts";
import type { Lab } from "./lab.ts";
import { NAMESPACE } from "./types.ts";

/** The pipeline's topics: every catalog topic but the observations and the dead letters. */
const PIPELINE_TOPICS = Object.values(TOPICS).filter(
  (t) => t !== TOPICS.observations && t !== TOPICS.deadLetter,
);

/** The incidents in the API, or only those of `node` (its label, core/incident.ts). */
export async function listIncidents(lab: Lab, node?: string): Promise<NodeFence[]> {
  for (let i = 0; ; i++) {
    try {
      const l = (await lab.custom.listNamespacedCustomObject({
        group: "fastfence.io",
        version: "v1alpha1",
        plural: "nodefences",
        namespace: NAMESPACE,
        ...(node ? { labelSelector: `${NODE_LABEL}=${node}` } : {}),
      })) as { items: NodeFence[] };
      return l.items;
    } catch (err) {
      if (i >= 50) throw err;
      await sleep(200);
    }
  }
}

export interface EventLog {
  events: FfEvent[];
  deadLetters: Record<string, unknown>[];
}

/**
 * How long an event-log read keeps trying (see readEventLog): past the shipped brokers'
 * 9 s session, after which a dead broker's leaderships have moved.
 */
const READ_DEADLINE_MS = 40_000;

/**
 * Whether a failed read may succeed when tried again: a timeout (FF_BUS_UNAVAILABLE), or a
 * Kafka error the client marks retriable (a refused connection to a broker that just died
 * or restarts, a leadership still moving).
 */
export function retriableRead(err: unknown): boolean {
  if (err instanceof FastfenceError) return err.code === "FF_BUS_UNAVAILABLE";
  return (err as { retriable?: unknown } | null)?.retriable === true;
}

/**
 * Read the event log (pipeline topics, optionally observations) and the dead letters.
 * A read that fails retriably is tried again with a fresh client and group, for up to
 * READ_DEADLINE_MS: right after a fault the first client may still hold metadata, a
 * coordinator or connections on the node that was just cut off, and with the shipped
 * broker settings the dead broker leads its partitions for 9 s (its connections refused).
 */
export async function readEventLog(lab: Lab, withObservations = false): Promise<EventLog> {
  const deadline = Date.now() + READ_DEADLINE_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await readOnce(lab, withObservations);
    } catch (err) {
      if (!retriableRead(err) || Date.now() >= deadline) throw err;
      lab.log(`event log read ${attempt} failed (${(err as Error).message}); reading again`);
      await sleep(1000);
    }
  }
}

async function readOnce(lab: Lab, withObservations: boolean): Promise<EventLog> {
  // the read-only audit principal, as `fastfence trace` reads
  const bus = createKafkaBus({
    brokers: lab.brokers,
    clientId: `lab-reader-${Date.now()}`,
    security: labKafkaSecurity("audit"),
  });
  try {
    const recs = await bus.readAll(
      [...PIPELINE_TOPICS, ...(withObservations ? [TOPICS.observations] : []), TOPICS.deadLetter],
      { timeoutMs: 30_000 },
    );
    const events: FfEvent[] = [];
    const deadLetters: Record<string, unknown>[] = [];
    for (const r of recs) {
      if (isKeepalive(r)) continue; // transport records, not events
      try {
        if (r.topic === TOPICS.deadLetter)
          deadLetters.push(JSON.parse(r.value?.toString("utf8") ?? "{}") as Record<string, unknown>);
        else events.push(parseEvent(decodeKafka(r)));
      } catch {
        deadLetters.push({ undecodable: true, topic: r.topic, offset: r.offset });
      }
    }
    return { events, deadLetters };
  } finally {
    await bus.close().catch(() => undefined);
  }
}
