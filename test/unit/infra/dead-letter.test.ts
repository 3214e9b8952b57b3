// Dead letters are bounded: an oversized original (value, key, headers, issue list) is
// copied truncated, marked so, with its size and SHA-256, and the record always fits
// DEAD_LETTER_MAX_BYTES; byteBatches groups dead letters into produce calls that fit.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../core/errors.ts";
import { DeadLetterSchema } from "../../../events/schemas.ts";
import {
  DEAD_LETTER_BATCH_BYTES,
  DEAD_LETTER_MAX_BYTES,
  byteBatches,
  deadLetterRecord,
} from "../../../infra/runtime/dead-letter.ts";

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
