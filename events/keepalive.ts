// ISR keepalive records: what a Kafka-runtime replica writes to every partition of its
// output topics every FASTFENCE_KAFKA_KEEPALIVE_MS while its client cannot reach a broker
// (infra/runtime/keepalive.ts), so that no partition sits idle when a broker dies. A partition leader drops a dead follower from its ISR only once the
// follower falls behind, that is after a record arrives and replica.lag.time.max.ms passes
// without the follower fetching it; on an idle partition the first record after the death
// (the incident's next event) is the one that waits, and until the ISR shrinks it is
// invisible to consumers. Each pipeline topic is idle until the incident reaches it, so
// every hop paid about replica.lag.time.max.ms (measured: docs/lab.md "Measured on the
// shipped broker settings"). With records flowing everywhere all ISRs shrink together,
// soon after the death. Only during trouble: kept up all the time they would fill the
// brokers' disks (pipeline topics keep records for weeks). A keepalive is a transport record, not an
// event: no CloudEvent attributes, no value, one header. Consumers and readers skip it
// before decoding; it is never dead-lettered, traced or replayed. Pure: no I/O.
import type { KafkaRecord } from "./codec.ts";

/** The header that marks a keepalive record; its value is the writing replica's source. */
export const KEEPALIVE_HEADER = "ff_keepalive";

/** A keepalive record written by `source` (e.g. /fastfence/confirm/confirm-7d9f-x2). */
export function keepaliveRecord(source: string): KafkaRecord {
  return { key: null, value: null, headers: { [KEEPALIVE_HEADER]: source } };
}

/** Whether a record is a keepalive (to be skipped, never decoded). */
export function isKeepalive(rec: Pick<KafkaRecord, "headers">): boolean {
  return rec.headers[KEEPALIVE_HEADER] !== undefined;
}
