// CloudEvents wire codecs: Kafka binary mode round trip, HTTP binary and structured
// decoding, and clear InvalidInputErrors for malformed input (never a crash).
import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../../core/errors.ts";
import { decodeHttp, decodeKafka, encodeHttp, encodeKafka } from "../../../events/codec.ts";
import { envelope } from "../../../events/envelope.ts";

const ev = envelope(
  { type: "io.fastfence.test.v1", subject: "node-a", ffincident: "node-a-1", data: { x: [1, "ü"] } },
  "/fastfence/t/r",
  0,
);

describe("Kafka binary mode", () => {
  it("round-trips every attribute and the data", () => {
    const rec = encodeKafka(ev);
    expect(rec.key).toBe("node-a");
    expect(rec.headers).toMatchObject({
      ce_id: ev.id,
      ce_type: ev.type,
      ce_ffincident: "node-a-1",
      ce_traceparent: ev.traceparent,
    });
    expect(decodeKafka(rec)).toMatchObject({ ...ev });
  });

  it.each([
    ["no value", { key: null, value: null, headers: {} }, /no value/],
    ["no ce_ headers", { key: null, value: Buffer.from("{}"), headers: {} }, /header ce_id is missing/],
    [
      "data that is not JSON",
      { ...encodeKafka(ev), value: Buffer.from("{oops") },
      /malformed CloudEvent|not valid JSON/,
    ],
  ])("rejects %s with InvalidInputError", (_n, rec, msg) => {
    let err: unknown;
    try {
      decodeKafka(rec);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(String((err as Error).message)).toMatch(msg);
  });
});

describe("HTTP", () => {
  it("decodes binary mode produced by encodeHttp", () => {
    const { headers, body } = encodeHttp(ev);
    expect(decodeHttp(headers, body)).toMatchObject({
      id: ev.id,
      data: { x: [1, "ü"] },
      ffincident: "node-a-1",
    });
  });

  it("decodes structured mode", () => {
    expect(decodeHttp({ "content-type": "application/cloudevents+json" }, JSON.stringify(ev))).toMatchObject({
      id: ev.id,
      type: ev.type,
    });
  });

  it("rejects a request that is not a CloudEvent", () => {
    expect(() => decodeHttp({ "content-type": "text/plain" }, "hi")).toThrow(InvalidInputError);
  });
});

describe("dead-letter records", () => {
  it("match the catalog's DeadLetter schema and keep the original bytes", async () => {
    const { deadLetterRecord } = await import("../../../infra/runtime/dead-letter.ts");
    const { DeadLetterSchema } = await import("../../../events/schemas.ts");
    const original = { key: "node-a", value: Buffer.from([0xff, 0x00, 0x7b]), headers: { ce_type: "x" } };
    const rec = deadLetterRecord(
      new InvalidInputError("FF_INVALID_EVENT", "invalid event", ["data.target: required"]),
      original,
      { consumer: "detect/r1", topic: "fastfence.observations", partition: 2, offset: "41" },
      0,
    );
    const body = DeadLetterSchema.parse(JSON.parse(rec.value!.toString()));
    expect(Buffer.from(body.originalBase64, "base64")).toEqual(original.value);
    expect(body).toMatchObject({
      code: "FF_INVALID_EVENT",
      issues: ["data.target: required"],
      consumer: "detect/r1",
      offset: "41",
    });
    expect(body.reasonCode).toBeUndefined();
  });

  it("carry a rejected event's stable reason code (body and header)", async () => {
    const { deadLetterRecord } = await import("../../../infra/runtime/dead-letter.ts");
    const { DeadLetterSchema } = await import("../../../events/schemas.ts");
    const { RejectedEventError } = await import("../../../core/errors.ts");
    const rec = deadLetterRecord(
      new RejectedEventError(
        "PowerOffUnproven",
        "incident a-1 is FencedOff without a recorded Off read-back",
      ),
      { key: "a", value: Buffer.from("{}"), headers: {} },
      { consumer: "remediate-workloads/r1", topic: "fastfence.fence-results", partition: 0, offset: "7" },
      0,
    );
    const body = DeadLetterSchema.parse(JSON.parse(rec.value!.toString()));
    expect(body).toMatchObject({
      code: "FF_INVALID_EVENT",
      reasonCode: "PowerOffUnproven",
      reason: "incident a-1 is FencedOff without a recorded Off read-back",
    });
    expect(rec.headers).toMatchObject({
      "fastfence-dlq-code": "FF_INVALID_EVENT",
      "fastfence-dlq-reason-code": "PowerOffUnproven",
    });
  });
});
