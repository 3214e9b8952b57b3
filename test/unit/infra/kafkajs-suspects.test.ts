// kafkajs-suspects.ts: how long a broker that went silent stays suspect, and what clears it.
// The BrokerPool patches run against real brokers (test/integration/bus-kafka-idle-producer.test.ts).
import { describe, expect, test } from "vitest";
import { clearSuspect, isSuspect, markSuspect, SUSPECT_MS } from "../../../infra/bus/kafkajs-suspects.ts";

const T0 = 1_000_000;

describe("suspect brokers", () => {
  test("a broker nobody marked is not suspect", () => {
    expect(isSuspect("10.0.0.9", 9092, T0)).toBe(false);
  });

  test("a marked broker is suspect for SUSPECT_MS, then not", () => {
    markSuspect("10.0.0.1", 9092, T0);
    expect(isSuspect("10.0.0.1", 9092, T0 + SUSPECT_MS - 1)).toBe(true);
    expect(isSuspect("10.0.0.1", 9092, T0 + SUSPECT_MS)).toBe(false);
  });

  test("the mark is per address: another port of the host is not suspect", () => {
    markSuspect("10.0.0.2", 9092, T0);
    expect(isSuspect("10.0.0.2", 9093, T0)).toBe(false);
  });

  test("data from the broker clears the mark at once", () => {
    markSuspect("10.0.0.3", 9092, T0);
    clearSuspect("10.0.0.3", 9092);
    expect(isSuspect("10.0.0.3", 9092, T0)).toBe(false);
  });

  test("a new mark extends the time", () => {
    markSuspect("10.0.0.4", 9092, T0);
    markSuspect("10.0.0.4", 9092, T0 + 5_000);
    expect(isSuspect("10.0.0.4", 9092, T0 + SUSPECT_MS + 1_000)).toBe(true);
  });
});
