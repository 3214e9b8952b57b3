// The lab reset's "agent ready" test (lab/trial-reset.ts): agent.json survives a power-off,
// so only a ready status written in the node's current boot counts.
import { describe, expect, test } from "vitest";
import { agentReadySinceBoot } from "../../../lab/trial-reset.ts";

const T = Date.parse("2026-12-03T16:00:00Z");
const at = (ms: number) => new Date(T + ms).toISOString();

describe("agent ready since the last power-on", () => {
  const log = [
    { at: T - 60_000, action: "on" as const },
    { at: T, action: "off" as const },
    { at: T + 1_000, action: "on" as const },
  ];
  test("a ready status from before the last power-on is stale", () => {
    expect(agentReadySinceBoot({ ready: true, startedAt: at(-50_000) }, log)).toBe(false);
  });
  test("ready in the current boot counts; not ready or no status does not", () => {
    expect(agentReadySinceBoot({ ready: true, startedAt: at(1_200) }, log)).toBe(true);
    expect(agentReadySinceBoot({ ready: false, startedAt: at(1_200) }, log)).toBe(false);
    expect(agentReadySinceBoot(undefined, log)).toBe(false);
  });
  test("a node never power-cycled: its first status counts", () => {
    expect(agentReadySinceBoot({ ready: true, startedAt: at(0) }, [])).toBe(true);
  });
});
