// Which failed event-log reads the lab tries again (lab/event-log.ts retriableRead): a
// timeout, and the Kafka errors the client marks retriable (a refused connection to the
// broker that just died — with Kafka's 9 s broker session it still leads its
// partitions — or a leadership still moving); nothing else, so a real fault is not hidden.
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { FastfenceError } from "../../../core/errors.ts";
import { retriableRead } from "../../../lab/event-log.ts";

const require = createRequire(import.meta.url);
const { KafkaJSConnectionError, KafkaJSProtocolError, KafkaJSNonRetriableError } = require("kafkajs") as {
  KafkaJSConnectionError: new (m: string) => Error;
  KafkaJSProtocolError: new (e: { message: string; type: string; code: number; retriable: boolean }) => Error;
  KafkaJSNonRetriableError: new (m: string) => Error;
};

describe("retriableRead", () => {
  it("tries a timeout and kafkajs' retriable errors again", () => {
    expect(retriableRead(new FastfenceError("FF_BUS_UNAVAILABLE", "read timed out"))).toBe(true);
    expect(
      retriableRead(new KafkaJSConnectionError("Connection error: connect ECONNREFUSED 10.77.0.10:9092")),
    ).toBe(true);
    const notLeader = new KafkaJSProtocolError({
      message: "This server is not the leader for that topic-partition",
      type: "NOT_LEADER_FOR_PARTITION",
      code: 6,
      retriable: true,
    });
    expect(retriableRead(notLeader)).toBe(true);
  });

  it("gives up on anything else", () => {
    expect(retriableRead(new FastfenceError("FF_INVALID_EVENT", "bad"))).toBe(false);
    expect(retriableRead(new KafkaJSNonRetriableError("authorization failed"))).toBe(false);
    expect(retriableRead(new Error("boom"))).toBe(false);
    expect(retriableRead(undefined)).toBe(false);
  });
});
