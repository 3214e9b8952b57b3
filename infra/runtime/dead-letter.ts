// Builds dead-letter records in the catalog's DeadLetter shape (events/schemas.ts): the
// reason and error code (and, for an event a stage rejected, the outcome's stable reason
// code), which consumer gave up, where the original came from, and the original bytes and
// headers — so nothing received is ever lost (S5). A record is bounded: a copy of an
// oversized original (or with huge keys, headers or issue lists) is cut, marked
// `truncated` with the original's size and SHA-256, so a dead letter always fits the
// dead-letter topic (DEAD_LETTER_MAX_BYTES, far below Kafka's default 1 MiB
// max.message.bytes) and an oversized record can never block its partition by failing to
// be dead-lettered. byteBatches groups dead letters into produce calls that fit. Pure.
import { createHash } from "node:crypto";
import { RejectedEventError, type FastfenceError } from "../../core/errors.ts";
import type { KafkaRecord } from "../../events/codec.ts";
import type { DeadLetter } from "../../events/schemas.ts";

export interface DeadLetterOrigin {
  /** "<function>/<replica>" */
  consumer: string;
  topic: string;
  partition: number;
  offset: string;
}

/**
 * Largest dead-letter value, bytes. The topics keep Kafka's default max.message.bytes
 * (1048588, which bounds a whole produce batch per partition): a 64 KiB record leaves room
 * to publish many in one batch (kafka-runtime.ts publishes at most DEAD_LETTER_BATCH_BYTES
 * per produce call).
 */
export const DEAD_LETTER_MAX_BYTES = 64 * 1024;

/** How much is copied, at most, in the normal and in the minimal form. */
const LIMITS = [
  { value: 32 * 1024, key: 512, headerChars: 8 * 1024, issues: 20, issueChars: 300, reason: 1000 },
  { value: 1024, key: 128, headerChars: 0, issues: 3, issueChars: 200, reason: 300 },
] as const;

type Limits = (typeof LIMITS)[number];

function clip(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max);
}

function body(
  error: FastfenceError,
  original: { value: Buffer | null; headers: Record<string, string>; key: string | null },
  origin: DeadLetterOrigin,
  nowMs: number,
  l: Limits,
): DeadLetter {
  const allIssues = "issues" in error && Array.isArray(error.issues) ? (error.issues as string[]) : [];
  const issues = allIssues.slice(0, l.issues).map((i) => clip(i, l.issueChars));
  const value = original.value ?? Buffer.alloc(0);
  const headers: Record<string, string> = {};
  let used = 0;
  let headersCut = false;
  for (const [k, v] of Object.entries(original.headers)) {
    if (used + k.length + v.length > l.headerChars) {
      headersCut = true;
      continue;
    }
    headers[k] = v;
    used += k.length + v.length;
  }
  // An InvalidInputError's message ends with its issues, which the record carries anyway.
  const tail = allIssues.length ? `: ${allIssues.join("; ")}` : "";
  const message = tail && error.message.endsWith(tail) ? error.message.slice(0, -tail.length) : error.message;
  const reason = clip(message, l.reason);
  const key = original.key === null ? undefined : clip(original.key, l.key);
  const truncated =
    value.length > l.value ||
    headersCut ||
    issues.length < allIssues.length ||
    issues.some((i, n) => i !== allIssues[n]) ||
    reason !== message ||
    key !== (original.key ?? undefined);
  return {
    reason,
    code: error.code,
    ...(error instanceof RejectedEventError ? { reasonCode: error.reasonCode } : {}),
    ...(issues.length ? { issues } : {}),
    ...origin,
    ...(key !== undefined ? { key } : {}),
    originalBase64: value.subarray(0, l.value).toString("base64"),
    originalHeaders: headers,
    originalBytes: value.length,
    ...(truncated
      ? { truncated: true, originalSha256: createHash("sha256").update(value).digest("hex") }
      : {}),
    failedAt: new Date(nowMs).toISOString(),
  };
}

export function deadLetterRecord(
  error: FastfenceError,
  original: { value: Buffer | null; headers: Record<string, string>; key: string | null },
  origin: DeadLetterOrigin,
  nowMs: number,
): KafkaRecord {
  let value = Buffer.from(JSON.stringify(body(error, original, origin, nowMs, LIMITS[0])));
  // Escaping can grow odd bytes up to six times; the minimal form always fits.
  if (value.length > DEAD_LETTER_MAX_BYTES)
    value = Buffer.from(JSON.stringify(body(error, original, origin, nowMs, LIMITS[1])));
  const key = original.key === null ? null : clip(original.key, LIMITS[0].key);
  return {
    key,
    value,
    headers: {
      "content-type": "application/json",
      "fastfence-dlq-code": error.code,
      ...(error instanceof RejectedEventError ? { "fastfence-dlq-reason-code": error.reasonCode } : {}),
      "fastfence-dlq-consumer": origin.consumer,
    },
  };
}

/**
 * Bytes of dead letters sent in one produce call, at most: Kafka limits a whole record
 * batch per partition to max.message.bytes (default 1048588), so half of that leaves room
 * for the batch and record overhead.
 */
export const DEAD_LETTER_BATCH_BYTES = 512 * 1024;

/** Splits records into consecutive groups of at most `maxBytes` (a larger single record alone). Pure. */
export function byteBatches(
  records: readonly KafkaRecord[],
  maxBytes = DEAD_LETTER_BATCH_BYTES,
): KafkaRecord[][] {
  const out: KafkaRecord[][] = [];
  let cur: KafkaRecord[] = [];
  let size = 0;
  for (const r of records) {
    let n = (r.value?.length ?? 0) + (r.key?.length ?? 0) + 64;
    for (const [k, v] of Object.entries(r.headers)) n += k.length + v.length + 8;
    if (cur.length && size + n > maxBytes) {
      out.push(cur);
      cur = [];
      size = 0;
    }
    cur.push(r);
    size += n;
  }
  if (cur.length) out.push(cur);
  return out;
}
