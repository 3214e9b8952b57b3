// Dead letters are bounded: an oversized original (value, key, headers, issue list) is
// copied truncated, marked so, with its size and SHA-256, and the record always fits
// DEAD_LETTER_MAX_BYTES; malformed records of one partition share a dead letter per error
// code that names every one's offset, while each rejected event keeps its own;
// byteBatches groups dead letters into produce calls that fit.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { FastfenceError, InvalidInputError, RejectedEventError } from "../../../core/errors.ts";
import { DeadLetterSchema } from "../../../events/schemas.ts";
import {
  DEAD_LETTER_BATCH_BYTES,
  DEAD_LETTER_MAX_BYTES,
  byteBatches,
  deadLetterRecord,
  COALESCE_FROM,
  deadLetterRecords,
  type FailedRecord,
} from "../../../infra/runtime/dead-letter.ts";
import type { KafkaRecord } from "../../../events/codec.ts";

const origin = { consumer: "detect/r1", topic: "fastfence.observations", partition: 0, offset: "9" };
const invalid = (issues: string[] = []) => new InvalidInputError("FF_INVALID_EVENT", "invalid event", issues);

describe("deadLetterRecord bounds", () => {
  it("keeps a small original whole, with its size and no truncation mark", () => {
    const value = Buffer.from('{"a":1}');
    const body = DeadLetterSchema.parse(
      JSON.parse(
        deadLetterRecord(invalid(), { key: "k", value, headers: { h: "v" } }, origin, 0).value!.toString(),
      ),
    );
    expect(Buffer.from(body.originalBase64, "base64")).toEqual(value);
    expect(body).toMatchObject({ originalBytes: 7, originalHeaders: { h: "v" } });
    expect(body.truncated).toBeUndefined();
  });

  it("gives an invalid event's issues once: in issues, not again in the reason", () => {
    const body = DeadLetterSchema.parse(
      JSON.parse(
        deadLetterRecord(
          invalid(["data.target: required", "data.at: required"]),
          { key: null, value: Buffer.from("{}"), headers: {} },
          origin,
          0,
        ).value!.toString(),
      ),
    );
    expect(body).toMatchObject({
      reason: "invalid event",
      issues: ["data.target: required", "data.at: required"],
    });
  });

  it("truncates a record near Kafka's 1 MiB limit, says so, and fits", () => {
    const value = Buffer.alloc(1_000_000, 0x41);
    const rec = deadLetterRecord(invalid(["record too large"]), { key: "k", value, headers: {} }, origin, 0);
    expect(rec.value!.length).toBeLessThanOrEqual(DEAD_LETTER_MAX_BYTES);
    const body = DeadLetterSchema.parse(JSON.parse(rec.value!.toString()));
    expect(body).toMatchObject({
      truncated: true,
      originalBytes: 1_000_000,
      originalSha256: createHash("sha256").update(value).digest("hex"),
    });
    expect(Buffer.from(body.originalBase64, "base64")).toEqual(value.subarray(0, 32 * 1024));
  });

  it("fits however hostile the key, headers, issues and escaping are", () => {
    const nasty = "\u0001".repeat(200_000); // each escapes to six bytes of JSON
    const headers = Object.fromEntries(
      Array.from({ length: 200 }, (_, i) => [`h${i}`, nasty.slice(0, 5000)]),
    );
    const rec = deadLetterRecord(
      invalid(Array.from({ length: 10_000 }, () => nasty.slice(0, 10_000))),
      { key: nasty, value: Buffer.from(nasty), headers },
      origin,
      0,
    );
    expect(rec.value!.length).toBeLessThanOrEqual(DEAD_LETTER_MAX_BYTES);
    expect(rec.key!.length).toBeLessThanOrEqual(512);
    const body = DeadLetterSchema.parse(JSON.parse(rec.value!.toString()));
    expect(body).toMatchObject({ truncated: true, originalBytes: 200_000 });
  });
});

describe("deadLetterRecords", () => {
  const parse = (r: KafkaRecord) => DeadLetterSchema.parse(JSON.parse(r.value!.toString()));
  const bad = (offset: number, reason = "not a CloudEvent", partition = 0): FailedRecord => ({
    error: new InvalidInputError("FF_INVALID_EVENT", reason, [`record ${offset}`]),
    original: { key: `k${offset}`, value: Buffer.from(`junk ${offset}`), headers: {} },
    origin: { ...origin, partition, offset: String(offset) },
    malformed: true,
  });
  const rejected = (offset: number): FailedRecord => ({
    error: new RejectedEventError("UntrustedConfirmation", `forged ${offset}`),
    original: { key: null, value: Buffer.from("{}"), headers: {} },
    origin: { ...origin, offset: String(offset) },
    malformed: false,
  });

  it(`gives fewer than ${COALESCE_FROM} malformed records of a partition a plain dead letter each`, () => {
    const few = Array.from({ length: COALESCE_FROM - 1 }, (_, i) => bad(i));
    const letters = deadLetterRecords(few, 0);
    expect(letters.map((l) => parse(l).offset)).toEqual(few.map((f) => f.origin.offset));
    const body = parse(letters[0]!);
    expect(body).toMatchObject({ offset: "0", issues: ["record 0"] });
    expect(body.count).toBeUndefined();
    expect(letters[0]!.headers["fastfence-dlq-count"]).toBeUndefined();
  });

  it("folds a partition's malformed records into one letter naming every offset and reason", () => {
    const failed = [bad(10), bad(11, "malformed CloudEvent"), bad(12), bad(14), bad(15), bad(20)];
    for (let o = 30; o < 34; o++) failed.push(bad(o));
    const letters = deadLetterRecords(failed, 0);
    expect(letters).toHaveLength(1);
    const body = parse(letters[0]!);
    expect(body).toMatchObject({
      count: 10,
      offset: "10",
      offsets: "10-12,14-15,20,30-33",
      reason: "not a CloudEvent",
      issues: ["record 10"],
      key: "k10",
      otherReasons: [{ reason: "malformed CloudEvent", count: 1 }],
    });
    expect(Buffer.from(body.originalBase64, "base64").toString()).toBe("junk 10");
    expect(body.truncated).toBeUndefined();
    expect(letters[0]!.headers["fastfence-dlq-count"]).toBe("10");
  });

  it("keeps partitions and error codes apart, and every rejected event on its own", () => {
    const run = (from: number, partition: number, code: "FF_INVALID_EVENT" | "FF_INTERNAL") =>
      Array.from({ length: COALESCE_FROM }, (_, i) => ({
        ...bad(from + i, "x", partition),
        error: code === "FF_INTERNAL" ? new FastfenceError(code, "x") : new InvalidInputError(code, "x"),
      }));
    const letters = deadLetterRecords(
      [rejected(1), ...run(2, 0, "FF_INVALID_EVENT"), ...run(20, 1, "FF_INVALID_EVENT")].concat(
        run(40, 0, "FF_INTERNAL"),
        [rejected(60)],
        run(70, 0, "FF_INVALID_EVENT"),
      ),
      0,
    ).map(parse);
    expect(letters.map((l) => [l.partition, l.code, l.reasonCode, l.offsets ?? l.offset])).toEqual([
      [0, "FF_INVALID_EVENT", "UntrustedConfirmation", "1"],
      [0, "FF_INVALID_EVENT", undefined, "2-11,70-79"],
      [1, "FF_INVALID_EVENT", undefined, "20-29"],
      [0, "FF_INTERNAL", undefined, "40-49"],
      [0, "FF_INVALID_EVENT", "UntrustedConfirmation", "60"],
    ]);
  });

  it("stays within bounds for a flood of distinct reasons and scattered offsets, and names every offset", () => {
    const failed = Array.from({ length: 20_000 }, (_, i) => bad(2 * i, `reason ${i % 500}`));
    const letters = deadLetterRecords(failed, 0);
    expect(letters.length).toBeGreaterThan(1); // "0,2,4,…" for 20000 offsets is longer than one letter carries
    expect(letters.length).toBeLessThan(100);
    const named: number[] = [];
    for (const l of letters) {
      expect(l.value!.length).toBeLessThanOrEqual(DEAD_LETTER_MAX_BYTES);
      const body = parse(l);
      expect(body.offsets!.length).toBeLessThanOrEqual(4096);
      expect(body.truncated).toBe(true); // 500 reasons: the 20 most frequent are kept
      expect(body.otherReasons!.length).toBeLessThanOrEqual(20);
      for (const o of body.offsets!.split(",")) named.push(Number(o));
      expect(body.count).toBe(body.offsets!.split(",").length);
    }
    expect(named).toEqual(failed.map((f) => Number(f.origin.offset)));
  });

  it("splits a list too long for one letter, and a lone record left over gets a plain letter", () => {
    // 16-digit offsets two apart: 241 of them make 4096 characters ("o1,o2,…"), the 242nd does not fit
    const failed = Array.from({ length: 242 }, (_, i) => bad(1e15 + 2 * i));
    const letters = deadLetterRecords(failed, 0).map(parse);
    expect(letters.map((l) => l.count)).toEqual([241, undefined]);
    expect(letters[0]!.offsets!.length).toBe(4096);
    expect(letters[1]).toMatchObject({ offset: String(1e15 + 2 * 241), key: `k${1e15 + 2 * 241}` });
  });
});

describe("byteBatches", () => {
  it("keeps order and puts at most DEAD_LETTER_BATCH_BYTES in a group", () => {
    const recs = Array.from({ length: 100 }, (_, i) => ({
      key: String(i),
      value: Buffer.alloc(60_000),
      headers: {},
    }));
    const groups = byteBatches(recs);
    expect(groups.flat()).toEqual(recs);
    for (const g of groups)
      expect(g.reduce((n, r) => n + (r.value?.length ?? 0), 0)).toBeLessThanOrEqual(DEAD_LETTER_BATCH_BYTES);
    expect(groups.length).toBeGreaterThan(10);
    expect(byteBatches([])).toEqual([]);
  });
});
