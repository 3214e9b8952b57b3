// The shape of every fastfence event: a CloudEvents 1.0 envelope with two extension
// attributes, `ffincident` (the incident's correlation id) and `traceparent` (W3C
// distributed tracing). This module only declares types and builds envelopes; the
// zod schemas live in events/schemas.ts and the catalog in events/catalog.ts.
// It must never perform I/O.
import type { OutgoingEvent } from "../core/decision.ts";
import { randomUUID } from "node:crypto";

/** Extension attribute carrying the incident correlation id (lowercase alnum, per spec). */
export const INCIDENT_EXTENSION = "ffincident";

export interface FfEvent<T = unknown> {
  specversion: "1.0";
  id: string;
  /** Emitting component and replica, e.g. "/fastfence/detect/detect-7d9f-abc". */
  source: string;
  /** Reverse-DNS, versioned, e.g. "io.fastfence.node.suspected.v1". */
  type: string;
  /** The node the event is about. */
  subject: string;
  /** RFC 3339 time the event was produced. */
  time: string;
  datacontenttype: "application/json";
  /** Incident correlation id; absent on observations that precede any incident. */
  ffincident?: string;
  /** W3C traceparent: "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>". */
  traceparent?: string;
  data: T;
}

/** An event a handler wants published; the runtime fills id, source and time. */
export type { OutgoingEvent };

function hex(bytes: number): string {
  return randomUUID()
    .replace(/-/g, "")
    .padEnd(32, "0")
    .slice(0, bytes * 2);
}

/** A child traceparent: same trace id as `parent` (or a new trace), new span id. */
export function childTraceparent(parent?: string): string {
  const m = parent ? /^00-([0-9a-f]{32})-[0-9a-f]{16}-([0-9a-f]{2})$/.exec(parent) : null;
  const traceId = m?.[1] ?? hex(16);
  const flags = m?.[2] ?? "01";
  return `00-${traceId}-${hex(8)}-${flags}`;
}

/**
 * Completes an outgoing event into a full envelope, continuing the cause's trace. With
 * `traceparent` (the span that produced the event, infra/tracing.ts) the event carries
 * exactly that; without (tracing off) a child of the cause's, or a new trace.
 */
export function envelope<T>(
  out: OutgoingEvent<T>,
  source: string,
  nowMs: number,
  cause?: Pick<FfEvent, "traceparent" | "ffincident">,
  traceparent?: string,
): FfEvent<T> {
  const incident = out.ffincident ?? cause?.ffincident;
  return {
    specversion: "1.0",
    id: randomUUID(),
    source,
    type: out.type,
    subject: out.subject,
    time: new Date(nowMs).toISOString(),
    datacontenttype: "application/json",
    ...(incident ? { [INCIDENT_EXTENSION]: incident } : {}),
    traceparent: traceparent ?? childTraceparent(cause?.traceparent),
    data: out.data,
  };
}
