// kafkajs messages as the bus's records: topic, partition, offset, broker timestamp, key
// and value as received, headers as strings (the first value of a repeated header). Pure
// conversion shared by the group consumer and the one-shot reader; it never logs or
// inspects a record's value (event data).
import type { IHeaders, KafkaMessage } from "kafkajs";
import type { BusRecord } from "./bus.ts";

export function toHeaders(h: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) {
    if (v === undefined) continue;
    const first = Array.isArray(v) ? v[0] : v;
    if (first !== undefined) out[k] = Buffer.isBuffer(first) ? first.toString("utf8") : String(first);
  }
  return out;
}

export function toRecord(topic: string, partition: number, message: KafkaMessage): BusRecord {
  return {
    topic,
    partition,
    offset: message.offset,
    timestamp: Number(message.timestamp),
    key: message.key ? message.key.toString("utf8") : null,
    value: message.value,
    headers: toHeaders(message.headers),
  };
}
