// The settings of a Kafka bus, shared by both clients behind infra/bus/bus.ts (kafkajs:
// kafkajs-bus.ts; @platformatic/kafka: platformatic-bus.ts), and which client to use
// (FASTFENCE_KAFKA_CLIENT). Every timeout here bounds one connect, request or metadata
// age, so a broker that refuses, vanishes or freezes is left for another within it.
// Types and a pure parser only; this module must never connect anywhere.
import { InvalidInputError } from "../../core/errors.ts";
import type { Logger } from "../log.ts";
import type { Bus } from "./bus.ts";
import type { KafkaSecurity } from "./kafka-security.ts";

/** The Kafka client libraries the bus can run on. */
export const KAFKA_CLIENTS = ["kafkajs", "platformatic"] as const;
export type KafkaClient = (typeof KAFKA_CLIENTS)[number];

/**
 * The client named by FASTFENCE_KAFKA_CLIENT (default "kafkajs"). Throws InvalidInputError
 * (FF_INVALID_CONFIG) for any other value.
 */
export function kafkaClientFrom(value: string | undefined): KafkaClient {
  const v = value === undefined || value === "" ? "kafkajs" : value;
  if ((KAFKA_CLIENTS as readonly string[]).includes(v)) return v as KafkaClient;
  throw new InvalidInputError("FF_INVALID_CONFIG", "invalid Kafka client", [
    `FASTFENCE_KAFKA_CLIENT: "${v}" is not one of ${KAFKA_CLIENTS.join(", ")}`,
  ]);
}

/** A bus on a Kafka cluster: the Bus interface plus the list of existing topics. */
export interface KafkaBus extends Bus {
  /** The topics that exist on the cluster (optionally only those `wanted`), sorted. */
  topics(wanted?: (t: string) => boolean): Promise<string[]>;
}

export interface KafkaBusConfig {
  /** Comma-separated host:port list. Several brokers: a dead one is skipped. */
  brokers: string;
  /** Client id sent to the broker, e.g. "fastfence-detect-<pod>". */
  clientId: string;
  /**
   * Consumer group session timeout, ms. Default 6000 (the broker's default
   * group.min.session.timeout.ms). Lower means a dead consumer's partitions move
   * sooner, but a long GC pause or CPU starvation can cause needless rebalances.
   * The broker must allow it (group.min.session.timeout.ms).
   */
  sessionTimeoutMs?: number;
  /** Heartbeat interval, ms. Default sessionTimeoutMs / 3. */
  heartbeatIntervalMs?: number;
  /**
   * Per-request timeout, ms. Default 1000. A request to a dead broker (metadata, produce)
   * is given up on after this and retried elsewhere; after a node death every client's
   * first metadata refresh may pick that broker, so this bounds the detection stall. Too
   * low for a loaded broker causes needless retries.
   */
  requestTimeoutMs?: number;
  /** TCP connect timeout, ms. Default 1000 (a dead node's address never answers). */
  connectionTimeoutMs?: number;
  /**
   * Longest age of the client's partition-leader map, ms. Default 1000. kafkajs refreshes
   * it only when it expires or on a "not leader" answer, not when a leader's broker stops
   * answering: until the next refresh a consumer keeps fetching from the dead broker, and
   * every failed fetch stops all of its fetches (healthy brokers too) for a backoff. So this
   * bounds the consumer stall after a broker death (plus the controller's
   * broker.session.timeout.ms to move the leaders). Each refresh is one small Metadata
   * request per client; 1 s costs nothing measurable. Higher (kafkajs: 300000) means a
   * stall of up to that long.
   */
  metadataMaxAgeMs?: number;
  /**
   * Hedged publishing, ms. Default 300. A record goes to one partition (round-robin; events
   * need no cross-partition order, the incident state is in the API); if that partition's
   * leader has not acknowledged within this time (it may sit on a dead node), the same
   * record is also sent to the next partition, and so on (up to 3), and later records
   * start elsewhere for a few seconds. Duplicates are harmless (every consumer write is
   * resourceVersion-guarded; consumers skip copies of an event they handled). 0 turns
   * hedging off.
   */
  hedgeAfterMs?: number;
  /**
   * Acknowledgement: "all" (default; every in-sync replica — a record survives a broker
   * loss, but a dead follower delays acks until the controller fences it, about
   * broker.session.timeout.ms) or "leader" (faster through a broker death, but a record
   * acknowledged just before its leader dies can be lost).
   */
  acks?: "all" | "leader";
  /**
   * TLS and SASL (kafka-security.ts, from the FASTFENCE_KAFKA_* settings). Required, so
   * every caller decides: `{}` is a plaintext, unauthenticated connection.
   */
  security: KafkaSecurity;
  log?: Logger;
}

/**
 * The least connect and request timeout of a one-shot read or topic listing, ms, on either
 * client. A read is not on the fencing path, and a fetch of megabytes (a dead-letter topic
 * after a flood) or a TLS and SCRAM handshake on a busy machine may take longer than the
 * fencing path's 1 s: with those, every fetch of such a read timed out and the read failed
 * as a whole (CI, kafka-runtime-flood).
 */
export const READ_REQUEST_TIMEOUT_MS = 10_000;

/** A bus's settings with every default applied (what both clients run with). */
export type BusSettings = Required<Omit<KafkaBusConfig, "log" | "security">> & { log?: Logger };

/** The defaults of KafkaBusConfig, in one place for both clients (documented on each field). */
export function busSettings(cfg: KafkaBusConfig): BusSettings {
  const sessionTimeoutMs = cfg.sessionTimeoutMs ?? 6000;
  return {
    brokers: cfg.brokers,
    clientId: cfg.clientId,
    sessionTimeoutMs,
    heartbeatIntervalMs: cfg.heartbeatIntervalMs ?? Math.max(100, Math.floor(sessionTimeoutMs / 3)),
    requestTimeoutMs: cfg.requestTimeoutMs ?? 1000,
    connectionTimeoutMs: cfg.connectionTimeoutMs ?? 1000,
    metadataMaxAgeMs: cfg.metadataMaxAgeMs ?? 1000,
    hedgeAfterMs: cfg.hedgeAfterMs ?? 300,
    acks: cfg.acks ?? "all",
    ...(cfg.log ? { log: cfg.log } : {}),
  };
}
