// The per-observer stages of a trial (lab/trial-check.ts observerStages): which observer's
// suspicion came last, and whether its probe streak or its publication was late.
import { describe, expect, it } from "vitest";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { observerStages } from "../../../lab/trial-check.ts";

const T0 = 1_000_000;
const t = (ms: number) => new Date(T0 + ms).toISOString();

function suspicion(
  node: string,
  observerNode: string,
  ms: number,
  evidence: { kind?: string; firstMissAt?: number } = {},
): FfEvent {
  return {
    specversion: "1.0",
    id: `s-${observerNode}-${ms}`,
    source: "/fastfence/detect/x",
    type: EVENT_TYPES.nodeSuspected,
    time: t(ms),
    data: {
      node,
      evidence: {
        kind: evidence.kind ?? "probe",
        observer: `source-${observerNode}`,
        observerNode,
        ...(evidence.firstMissAt !== undefined ? { firstMissAt: t(evidence.firstMissAt) } : {}),
      },
    },
  } as unknown as FfEvent;
}

describe("observerStages", () => {
  it("gives each observer node its first suspicion and the start of its miss streak", () => {
    const events = [
      suspicion("node-c", "node-b", 4800, { firstMissAt: 4300 }),
      suspicion("node-c", "node-a", 1300, { firstMissAt: 900 }),
      suspicion("node-c", "node-a", 1800, { firstMissAt: 900 }),
    ];
    expect(observerStages(events, "node-c", T0)).toEqual({
      "suspected@node-a": 1300,
      "firstMiss@node-a": 900,
      "suspected@node-b": 4800,
      "firstMiss@node-b": 4300,
    });
  });

  it("skips other nodes, condition evidence and suspicions from before the fault", () => {
    const events = [
      suspicion("node-a", "node-b", 1000, { firstMissAt: 500 }),
      suspicion("node-c", "node-b", 1200, { kind: "condition" }),
      suspicion("node-c", "node-a", -50, { firstMissAt: -400 }),
      suspicion("node-c", "node-a", 1500),
    ];
    expect(observerStages(events, "node-c", T0)).toEqual({ "suspected@node-a": 1500 });
  });
});
