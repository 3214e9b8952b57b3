// What every @platformatic/kafka client of the bus shares: the connection options built
// from KafkaBusConfig (every connect, request and metadata age bounded, few fast retries,
// so a broker that refuses, vanishes or freezes is left for another within about a
// second), TLS + SCRAM from kafka-security.ts, and the conversion of consumed messages to
// BusRecords. Pure: it never connects, and never logs or inspects record values.
import type { BaseOptions, Message } from "@platformatic/kafka";
import type { BusRecord } from "./bus.ts";
import type { KafkaSecurity } from "./kafka-security.ts";

/** The bus settings the clients use (KafkaBusConfig, defaults applied). */
export interface ClientSettings {
  brokers: string;
  clientId: string;
  requestTimeoutMs: number;
  connectionTimeoutMs: number;
  metadataMaxAgeMs: number;
}

/**
 * Retries of one operation (a produce, a metadata or offset request): each try is bounded
 * by requestTimeoutMs (the library then drops that connection, so a frozen broker's socket
 * is not reused), and the next starts after RETRY_DELAY_MS with fresh metadata.
 */
export const RETRIES = 3;
export const RETRY_DELAY_MS = 100;

/** Connection and retry options for a client of the bus. */
export function clientOptions(cfg: ClientSettings, security: KafkaSecurity, suffix = ""): BaseOptions {
  const sasl = security.sasl;
  return {
    clientId: `${cfg.clientId}${suffix}`,
    bootstrapBrokers: cfg.brokers
      .split(",")
      .map((b) => b.trim())
      .filter(Boolean),
    // TCP connect plus TLS and SASL handshake: a frozen broker accepts the TCP connection
    // (the kernel answers) but never completes the handshake.
    connectTimeout: cfg.connectionTimeoutMs,
    requestTimeout: cfg.requestTimeoutMs,
    // The broker-side wait of a produce with acks from all in-sync replicas.
    timeout: cfg.requestTimeoutMs,
    retries: RETRIES,
    retryDelay: RETRY_DELAY_MS,
    metadataMaxAge: cfg.metadataMaxAgeMs,
    autocreateTopics: false,
    ...(security.ssl ? { tls: { ...security.ssl } } : {}),
    ...(sasl
      ? { sasl: { mechanism: "SCRAM-SHA-512", username: sasl.username, password: sasl.password } }
      : {}),
  };
}

/** A consumed message as a bus record (headers as strings: the first value of a repeated header). */
export function toRecord(m: Message): BusRecord {
  const headers: Record<string, string> = {};
  for (const [k, v] of m.headerEntries) {
    const name = k.toString("utf8");
    if (!(name in headers)) headers[name] = v ? v.toString("utf8") : "";
  }
  return {
    topic: m.topic,
    partition: m.partition,
    offset: m.offset.toString(),
    timestamp: Number(m.timestamp),
    key: m.key && m.key.length > 0 ? m.key.toString("utf8") : null,
    value: m.value ?? null,
    headers,
  };
}
