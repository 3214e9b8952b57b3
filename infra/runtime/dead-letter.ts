// Builds dead-letter records in the catalog's DeadLetter shape (events/schemas.ts): the
// reason and error code (and, for an event a stage rejected, the outcome's stable reason
// code), which consumer gave up, where the original came from, and the original bytes and
// headers — so nothing received is ever lost (S5). A record is bounded: a copy of an
// oversized original (or with huge keys, headers or issue lists) is cut, marked
// `truncated` with the original's size and SHA-256, so a dead letter always fits the
// dead-letter topic (DEAD_LETTER_MAX_BYTES, far below Kafka's default 1 MiB
// max.message.bytes) and an oversized record can never block its partition by failing to
// be dead-lettered. Malformed records (not events at all, or events that fail their schema)
// of one partition handed over together, ten or more, share a dead letter per error code:
// the first one's copy and reason, how many there were, all their offsets as ranges (never
// cut: a list too long for one letter is split over several) and how often each other
// reason came up — so a flood costs the brokers a few records, not one per bad
// record and replica, and every bad record's offset is still named in a dead letter (S5;
// the originals stay in their topic for its retention). byteBatches groups dead letters
// into produce calls that fit. Pure.
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
  {
    value: 32 * 1024,
    key: 512,
    headerChars: 8 * 1024,
    issues: 20,
    issueChars: 300,
    reason: 1000,
    otherReasons: 20,
  },
  {
    value: 1024,
    key: 128,
    headerChars: 0,
    issues: 3,
    issueChars: 200,
    reason: 300,
    otherReasons: 3,
  },
] as const;

type Limits = (typeof LIMITS)[number];

function clip(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max);
}

/** The original record as a dead letter copies it. */
export interface OriginalRecord {
  value: Buffer | null;
  headers: Record<string, string>;
  key: string | null;
}

/** A record a consumer gave up on, before its dead letter is built. */
export interface FailedRecord {
  error: FastfenceError;
  original: OriginalRecord;
  origin: DeadLetterOrigin;
  /**
   * The record is not an event (undecodable, or failing the event schema), so several of
   * one partition may share a dead letter. False for an event a stage rejected or could not
   * handle: each of those keeps its own.
   */
  malformed: boolean;
}

/** What a dead letter standing for several malformed records adds to the first one's. */
interface Coalesced {
  count: number;
  /** Their offsets as ranges ("5-9,11"), at most OFFSET_RANGES_MAX_CHARS: never cut. */
  offsets: string;
  /** Reasons other than the first record's, with how many records failed for each. */
  otherReasons: Map<string, number>;
}

/**
 * Longest offset list one dead letter carries. A group whose ranges are longer is split
 * into several letters, so no offset is ever cut from a list; with the minimal copy the
 * letter still fits DEAD_LETTER_MAX_BYTES (digits, commas and hyphens need no escaping).
 */
const OFFSET_RANGES_MAX_CHARS = 4 * 1024;

/**
 * Records sorted by offset, in consecutive chunks whose offsets written as ranges
 * ("5-9,11,14-20") fit `maxChars`, each with that text.
 */
function rangeChunks(
  sorted: readonly FailedRecord[],
  maxChars: number,
): { members: FailedRecord[]; offsets: string }[] {
  const chunks: { members: FailedRecord[]; offsets: string }[] = [];
  let members: FailedRecord[] = [];
  let closed = ""; // the chunk's finished ranges
  let start = 0n;
  let end = 0n; // the open range
  const text = (s: bigint, e: bigint) => {
    const open = s === e ? `${s}` : `${s}-${e}`;
    return closed ? `${closed},${open}` : open;
  };
  for (const f of sorted) {
    const o = BigInt(f.origin.offset);
    if (members.length && o === end + 1n && text(start, o).length <= maxChars) end = o;
    else if (members.length && `${text(start, end)},${o}`.length <= maxChars) {
      closed = text(start, end);
      start = end = o;
    } else {
      if (members.length) chunks.push({ members, offsets: text(start, end) });
      members = [];
      closed = "";
      start = end = o;
    }
    members.push(f);
  }
  if (members.length) chunks.push({ members, offsets: text(start, end) });
  return chunks;
}

function body(
  error: FastfenceError,
  original: OriginalRecord,
  origin: DeadLetterOrigin,
  nowMs: number,
  l: Limits,
  more?: Coalesced,
): DeadLetter {
  const allIssues = issuesOf(error);
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
  const message = reasonOf(error);
  const reason = clip(message, l.reason);
  const key = original.key === null ? undefined : clip(original.key, l.key);
  const byCount = more ? [...more.otherReasons].sort((x, y) => y[1] - x[1]) : [];
  const others = byCount.slice(0, l.otherReasons).map(([r, count]) => ({ reason: clip(r, l.reason), count }));
  const truncated =
    byCount.length > others.length ||
    others.some((o, n) => o.reason !== byCount[n]?.[0]) ||
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
    ...(more ? { count: more.count, offsets: more.offsets } : {}),
    ...(others.length ? { otherReasons: others } : {}),
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

/** An invalid input's issues (InvalidInputError), none for other errors. */
function issuesOf(error: FastfenceError): string[] {
  return "issues" in error && Array.isArray(error.issues) ? (error.issues as string[]) : [];
}

/** The reason a dead letter gives for `error` (an invalid input's issues are given apart). */
function reasonOf(error: FastfenceError): string {
  const issues = issuesOf(error);
  const tail = issues.length ? `: ${issues.join("; ")}` : "";
  return tail && error.message.endsWith(tail) ? error.message.slice(0, -tail.length) : error.message;
}

/**
 * One failed record's dead letter, or, with `more`, the dead letter of several malformed
 * records of its partition (the first one's copy and reason).
 */
export function deadLetterRecord(
  error: FastfenceError,
  original: OriginalRecord,
  origin: DeadLetterOrigin,
  nowMs: number,
  more?: Coalesced,
): KafkaRecord {
  let value = Buffer.from(JSON.stringify(body(error, original, origin, nowMs, LIMITS[0], more)));
  // Escaping can grow odd bytes up to six times; the minimal form always fits.
  if (value.length > DEAD_LETTER_MAX_BYTES)
    value = Buffer.from(JSON.stringify(body(error, original, origin, nowMs, LIMITS[1], more)));
  const key = original.key === null ? null : clip(original.key, LIMITS[0].key);
  return {
    key,
    value,
    headers: {
      "content-type": "application/json",
      "fastfence-dlq-code": error.code,
      ...(error instanceof RejectedEventError ? { "fastfence-dlq-reason-code": error.reasonCode } : {}),
      ...(more ? { "fastfence-dlq-count": String(more.count) } : {}),
      "fastfence-dlq-consumer": origin.consumer,
    },
  };
}

/**
 * Malformed records of one partition and error code, handed over together, that share one
 * dead letter: fewer get one each, with their whole copies. Ten keeps a stray bad record
 * or two fully copied, and turns a flood (handed over up to a thousand at a time) into a
 * letter per thousand.
 */
export const COALESCE_FROM = 10;

/**
 * The dead letters of records one consumer gave up on, in order: one per rejected or
 * failed event, and for the malformed records among them one per partition and error code
 * once there are COALESCE_FROM of them (else one each; more when their offset ranges are
 * longer than one letter carries). Every failed record's offset is in exactly one of them.
 * Pure.
 */
export function deadLetterRecords(failed: readonly FailedRecord[], nowMs: number): KafkaRecord[] {
  const groups = new Map<string, FailedRecord[]>();
  const order: (FailedRecord | string)[] = [];
  for (const f of failed) {
    if (!f.malformed) {
      order.push(f);
      continue;
    }
    const g = `${f.origin.topic}\u0000${f.origin.partition}\u0000${f.error.code}`;
    const members = groups.get(g);
    if (members) members.push(f);
    else {
      groups.set(g, [f]);
      order.push(g);
    }
  }
  const single = (f: FailedRecord) => deadLetterRecord(f.error, f.original, f.origin, nowMs);
  return order.flatMap((item) => {
    if (typeof item !== "string") return [single(item)];
    const members = groups.get(item)!;
    if (members.length < COALESCE_FROM) return members.map(single);
    const sorted = [...members].sort((x, y) => {
      const a = BigInt(x.origin.offset);
      const b = BigInt(y.origin.offset);
      return a < b ? -1 : a > b ? 1 : 0;
    });
    return rangeChunks(sorted, OFFSET_RANGES_MAX_CHARS).map(({ members: chunk, offsets }) => {
      const [first, ...rest] = chunk as [FailedRecord, ...FailedRecord[]];
      if (!rest.length) return single(first);
      const firstReason = reasonOf(first.error);
      const otherReasons = new Map<string, number>();
      for (const f of rest) {
        const r = reasonOf(f.error);
        if (r !== firstReason) otherReasons.set(r, (otherReasons.get(r) ?? 0) + 1);
      }
      return deadLetterRecord(first.error, first.original, first.origin, nowMs, {
        count: chunk.length,
        offsets,
        otherReasons,
      });
    });
  });
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
