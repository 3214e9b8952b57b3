// The event catalog: every type has a schema, topic and stages; parseEvent accepts valid
// events and names every bad field of malformed ones (S5); the AsyncAPI 3 document.
/* eslint-disable @typescript-eslint/no-explicit-any -- walking an untyped AsyncAPI document */
import { describe, expect, test } from "vitest";
import {
  CATALOG,
  EVENT_TYPES,
  TOPICS,
  consumedBy,
  emittedBy,
  factKey,
  parseEvent,
} from "../../../events/catalog.ts";
import { asyncApiDocument } from "../../../events/asyncapi.ts";
import { envelope } from "../../../events/envelope.ts";
import { DeadLetterSchema } from "../../../events/schemas.ts";
import { InvalidInputError } from "../../../core/errors.ts";
import { observed, suspected } from "../../scenarios/fixtures.ts";

function issuesOf(raw: unknown): string[] {
  try {
    parseEvent(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).code).toBe("FF_INVALID_EVENT");
    return [...(err as InvalidInputError).issues];
  }
  throw new Error("expected parseEvent to throw");
}

describe("catalog", () => {
  test("every type is reverse-DNS versioned, keyed by subject, on a known topic", () => {
    for (const [type, e] of Object.entries(CATALOG)) {
      expect(type).toMatch(/^io\.fastfence\.[a-z.]+\.v\d+$/);
      expect(e.partitionKey).toBe("subject");
      expect(Object.values(TOPICS)).toContain(e.topic);
      expect(e.emittedBy.length).toBeGreaterThan(0);
    }
  });
  test("pipeline wiring: detect → confirm → fence → remediate-workloads → recover", () => {
    expect(consumedBy("detect")).toEqual([EVENT_TYPES.nodeObserved, EVENT_TYPES.nodeCondition]);
    expect(emittedBy("detect")).toEqual([EVENT_TYPES.nodeSuspected]);
    expect(consumedBy("confirm")).toEqual([EVENT_TYPES.nodeSuspected]);
    expect(emittedBy("confirm")).toEqual([EVENT_TYPES.fenceRequested, EVENT_TYPES.incidentBlocked]);
    expect(consumedBy("fence")).toEqual([EVENT_TYPES.fenceRequested, EVENT_TYPES.fenceFailed]);
    expect(consumedBy("remediate-workloads")).toEqual([EVENT_TYPES.nodeFenced]);
    expect(consumedBy("recover")).toEqual([EVENT_TYPES.nodeCondition, EVENT_TYPES.workloadsReleased]);
  });
});

describe("parseEvent", () => {
  test("accepts a valid observation (object, JSON string, bytes; data as JSON string)", () => {
    const ev = observed("b", "a", 3, 1000);
    expect(parseEvent(ev)).toEqual(ev);
    expect(parseEvent(JSON.stringify(ev)).type).toBe(EVENT_TYPES.nodeObserved);
    expect(parseEvent(new TextEncoder().encode(JSON.stringify(ev))).subject).toBe("a");
    expect(parseEvent({ ...ev, data: JSON.stringify(ev.data) }).data).toEqual(ev.data);
  });
  test("accepts an envelope built by envelope() from an outgoing event", () => {
    const s = suspected("b", "a", 1000);
    const built = envelope(
      { type: s.type, subject: s.subject, ffincident: s.ffincident, data: s.data },
      "/fastfence/detect/detect-0",
      1000,
      s,
    );
    expect(parseEvent(built).traceparent).toMatch(/^00-0123456789abcdef0123456789abcdef-[0-9a-f]{16}-01$/);
  });

  const good = observed("b", "a", 3, 1000);
  const bad: [string, unknown, string[]][] = [
    ["not JSON", "{nope", ["(root): not valid JSON"]],
    ["not an object", 42, ["(root): expected a CloudEvent object"]],
    ["wrong specversion", { ...good, specversion: "0.3" }, ["specversion:"]],
    ["missing id", { ...good, id: undefined }, ["id:"]],
    ["bad source", { ...good, source: "detect" }, ['source: must be "/fastfence/<component>/<replica>"']],
    [
      "unknown type",
      { ...good, type: "io.fastfence.node.exploded.v1" },
      ['type: unknown event type "io.fastfence.node.exploded.v1"'],
    ],
    ["bad subject", { ...good, subject: "Node_A" }, ["subject: must be a DNS-1123 subdomain"]],
    ["bad time", { ...good, time: "yesterday" }, ["time:"]],
    ["bad traceparent", { ...good, traceparent: "00-xyz" }, ["traceparent: must be a W3C traceparent"]],
    ["missing data", { ...good, data: undefined }, ["data: required"]],
    ["data not JSON", { ...good, data: "{oops" }, ["data: not valid JSON"]],
    [
      "bad nested field",
      { ...good, data: { ...(good.data as object), observer: { replica: "r", node: "B!" } } },
      ["data.observer.node: must be a DNS-1123 subdomain"],
    ],
    [
      "bad enum + missing field",
      { ...good, data: { ...(good.data as object), result: "dead", probe: undefined } },
      ["data.result:", "data.probe:"],
    ],
    [
      "negative misses",
      { ...good, data: { ...(good.data as object), consecutiveMisses: -1 } },
      ["data.consecutiveMisses:"],
    ],
    ["subject differs from data.target", { ...good, subject: "c" }, ['data.target: must equal subject "c"']],
    [
      "bad evidence inside a suspicion",
      {
        ...suspected("b", "a", 1000),
        data: { ...(suspected("b", "a", 1000).data as object), evidence: { kind: "probe" } },
      },
      ["data.evidence.observer:", "data.evidence.at:"],
    ],
  ];
  test.each(bad)("malformed: %s → FF_INVALID_EVENT naming the field", (_n, raw, expected) => {
    const issues = issuesOf(raw);
    for (const e of expected)
      expect(
        issues.some((i) => i.startsWith(e)),
        `${e} in ${JSON.stringify(issues)}`,
      ).toBe(true);
  });

  test("the error message lists every issue (for the HTTP 4xx body and the dead letter)", () => {
    try {
      parseEvent({ ...good, subject: "Bad", id: "" });
    } catch (err) {
      expect((err as Error).message).toMatch(
        /^invalid event io\.fastfence\.node\.observed\.v1: .*id:.*subject:/,
      );
    }
  });
});

describe("dead letter and AsyncAPI", () => {
  test("dead-letter record schema", () => {
    const rec = {
      reason: "invalid event",
      code: "FF_INVALID_EVENT",
      consumer: "detect/detect-0",
      topic: TOPICS.observations,
      partition: 0,
      offset: "42",
      originalBase64: Buffer.from("{nope").toString("base64"),
      originalHeaders: { ce_type: "x" },
      failedAt: "2025-01-01T00:00:00Z",
    };
    expect(DeadLetterSchema.parse(rec)).toEqual(rec);
    expect(DeadLetterSchema.safeParse({ ...rec, partition: -1 }).success).toBe(false);
  });
  test("AsyncAPI 3 document: a channel per topic, a message per type, operations per stage", () => {
    const doc = asyncApiDocument() as Record<string, any>;
    expect(doc.asyncapi).toBe("3.0.0");
    expect(
      Object.values(doc.channels)
        .map((c: any) => c.address)
        .sort(),
    ).toEqual(Object.values(TOPICS).sort());
    expect(Object.keys(doc.components.messages)).toHaveLength(Object.keys(CATALOG).length + 1);
    expect(doc.components.messages.nodeObserved.payload.properties.data.properties.observer.required).toEqual(
      ["replica", "node"],
    );
    expect(doc.operations["confirm.send.fenceRequested"]).toMatchObject({
      action: "send",
      channel: { $ref: "#/channels/fenceRequests" },
    });
    expect(doc.operations["fence.receive.fenceRequested"]).toMatchObject({ action: "receive" });
    // every $ref resolves
    const json = JSON.stringify(doc);
    for (const m of json.matchAll(/"\$ref":"#\/([^"]+)"/g)) {
      const target = m[1]!.split("/").reduce((o: any, k) => o?.[k], doc);
      expect(target, m[1]).toBeDefined();
    }
  });
});

describe("factKey (which copies a consumer replica skips)", () => {
  test("two detect replicas' suspicions from the same observation are one fact", () => {
    const one = suspected("b", "a", 1000) as unknown as Record<string, unknown>;
    const other = { ...one, id: "another-id", source: "/fastfence/detect/detect-node-c" };
    expect(factKey(other)).toBe(factKey(one));
  });
  test("evidence from another observer or another time is another fact", () => {
    const one = suspected("b", "a", 1000) as unknown as Record<string, unknown>;
    expect(factKey(suspected("c", "a", 1000) as unknown as Record<string, unknown>)).not.toBe(factKey(one));
    expect(factKey(suspected("b", "a", 1200) as unknown as Record<string, unknown>)).not.toBe(factKey(one));
  });
  test("a copy dated after the receiver's clock has no key: decided in full (FutureTimestamp), never skipped", () => {
    const one = suspected("b", "a", 1000) as unknown as Record<string, unknown>;
    const t = Date.parse(one.time as string);
    expect(factKey(one, t)).toBe(factKey(one));
    expect(factKey({ ...one, time: new Date(t + 60_000).toISOString() }, t)).toBeUndefined();
  });
  test("other types are identified by their id; malformed input by its id or nothing", () => {
    const ev = observed("b", "a", 3, 1000) as unknown as Record<string, unknown>;
    expect(factKey(ev)).toBe(ev.id);
    expect(factKey({ type: EVENT_TYPES.nodeSuspected, id: "x1", data: "not an object" })).toBe("x1");
    expect(factKey({ type: 42 })).toBeUndefined();
  });
});
