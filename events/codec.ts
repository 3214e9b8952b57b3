// Wire codecs for fastfence events: CloudEvents binary content mode over Kafka (ce_*
// headers, key = subject, value = JSON data) and over HTTP (binary or structured mode,
// for the Knative runtime). Built on the `cloudevents` SDK's bindings; the SDK neither
// validates nor serialises `data` for Kafka, so this module stringifies data itself and
// hands decoded envelopes to the zod catalog (parseEvent) for validation. It never
// performs I/O and never lets a malformed message throw anything but InvalidInputError.
import { CloudEvent, HTTP, Kafka, type Headers, type KafkaMessage } from "cloudevents";
import { InvalidInputError } from "../core/errors.ts";
import type { FfEvent } from "./envelope.ts";

export interface KafkaRecord {
  key: string | null;
  value: Buffer | null;
  headers: Record<string, string>;
}

const ENVELOPE_KEYS = ["specversion", "id", "source", "type", "subject", "time", "datacontenttype"] as const;

function toSdkEvent(ev: FfEvent): CloudEvent<string> {
  const { data, ...attrs } = ev;
  return new CloudEvent<string>({ ...attrs, data: JSON.stringify(data) }, false);
}

/** Encodes an event as a Kafka record in CloudEvents binary content mode. */
export function encodeKafka(ev: FfEvent): KafkaRecord {
  const msg = Kafka.binary(toSdkEvent(ev));
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(msg.headers)) if (v !== undefined) headers[k] = String(v);
  return { key: ev.subject, value: Buffer.from(JSON.stringify(ev.data)), headers };
}

/** Plain attributes of a decoded CloudEvent, with `data` parsed from JSON. */
function fromSdkEvent(ce: CloudEvent<unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(ce))
    if (v !== undefined && k !== "data" && k !== "data_base64") out[k] = v;
  let data: unknown = ce.data;
  if (typeof data === "string") {
    try {
      data = JSON.parse(data);
    } catch (err) {
      throw new InvalidInputError("FF_INVALID_EVENT", "event data is not valid JSON", [
        `data: ${(err as Error).message}`,
      ]);
    }
  } else if (Buffer.isBuffer(data) || data instanceof Uint8Array) {
    try {
      data = JSON.parse(Buffer.from(data).toString("utf8"));
    } catch (err) {
      throw new InvalidInputError("FF_INVALID_EVENT", "event data is not valid JSON", [
        `data: ${(err as Error).message}`,
      ]);
    }
  }
  out.data = data;
  return out;
}

/**
 * Decodes a Kafka record (binary or structured mode) into an unvalidated envelope
 * object. Throws InvalidInputError naming what is missing; validate the result with
 * the catalog's parseEvent.
 */
export function decodeKafka(rec: KafkaRecord): Record<string, unknown> {
  if (rec.value === null) throw new InvalidInputError("FF_INVALID_EVENT", "Kafka record has no value");
  const headers: Headers = {};
  for (const [k, v] of Object.entries(rec.headers)) headers[k.toLowerCase()] = v;
  const structured = (headers["content-type"] ?? "").startsWith("application/cloudevents+json");
  if (!structured) {
    const missing = ENVELOPE_KEYS.filter((k) => k !== "datacontenttype" && headers[`ce_${k}`] === undefined);
    if (missing.length)
      throw new InvalidInputError(
        "FF_INVALID_EVENT",
        "not a CloudEvent in binary content mode",
        missing.map((k) => `header ce_${k} is missing`),
      );
  }
  let ce: CloudEvent<unknown>;
  try {
    const msg: KafkaMessage<string> = {
      key: rec.key ?? "",
      value: rec.value.toString("utf8"),
      headers,
      body: rec.value.toString("utf8"),
    };
    ce = Kafka.toEvent(msg) as CloudEvent<unknown>;
  } catch (err) {
    throw new InvalidInputError("FF_INVALID_EVENT", "malformed CloudEvent", [(err as Error).message]);
  }
  return fromSdkEvent(ce);
}

/** Decodes an HTTP request (binary or structured mode) into an unvalidated envelope. */
export function decodeHttp(
  headers: Record<string, string | string[] | undefined>,
  body: string,
): Record<string, unknown> {
  const flat: Headers = {};
  for (const [k, v] of Object.entries(headers))
    if (v !== undefined) flat[k.toLowerCase()] = Array.isArray(v) ? v.join(",") : v;
  const ctype = flat["content-type"] ?? "";
  if (!ctype.startsWith("application/cloudevents") && flat["ce-specversion"] === undefined)
    throw new InvalidInputError("FF_INVALID_EVENT", "not a CloudEvent", [
      "expected ce-* headers (binary mode) or content-type application/cloudevents+json (structured mode)",
    ]);
  let ce: CloudEvent<unknown>;
  try {
    const r = HTTP.toEvent({ headers: flat, body });
    if (Array.isArray(r)) throw new Error("batched CloudEvents are not supported");
    ce = r as CloudEvent<unknown>;
  } catch (err) {
    throw new InvalidInputError("FF_INVALID_EVENT", "malformed CloudEvent", [(err as Error).message]);
  }
  return fromSdkEvent(ce);
}

/** Encodes an event as an HTTP response/request in binary content mode. */
export function encodeHttp(ev: FfEvent): { headers: Record<string, string>; body: string } {
  const msg = HTTP.binary(toSdkEvent(ev));
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(msg.headers)) if (v !== undefined) headers[k] = String(v);
  headers["content-type"] = "application/json";
  return { headers, body: JSON.stringify(ev.data) };
}
