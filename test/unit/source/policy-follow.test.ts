// The event source follows the FencingPolicy (source/policy-follow.ts): which settings it
// takes from a policy, how an edit is named field by field, and the follower's loop handing
// every re-read policy to the running source, keeping what it has when a read fails.
import { describe, expect, it } from "vitest";
import { resolvePolicy, type FencingPolicySpec } from "../../../core/policy.ts";
import { systemClock } from "../../../core/clock.ts";
import { createLogger } from "../../../infra/log.ts";
import { settingsChanges, sourceSettings, startPolicyFollower } from "../../../source/policy-follow.ts";

const log = createLogger("policy-follow-test", { level: "silent" });

describe("sourceSettings and settingsChanges", () => {
  it("takes probe.* and suspicion.leaseStaleMs", () => {
    const p = resolvePolicy({ probe: { intervalMs: 300 }, suspicion: { leaseStaleMs: 20_000 } });
    expect(sourceSettings(p)).toEqual({ probe: p.probe, leaseStaleMs: 20_000 });
  });
  it("names every changed field, and nothing when equal", () => {
    const a = sourceSettings(resolvePolicy({}));
    expect(settingsChanges(a, sourceSettings(resolvePolicy({})))).toEqual([]);
    const b = sourceSettings(
      resolvePolicy({
        probe: { intervalMs: 500, timeoutMs: 400, observersPerNode: 3, heartbeatIntervalMs: 500 },
        suspicion: { leaseStaleMs: 10_000 },
      }),
    );
    expect(settingsChanges(a, b)).toEqual([
      "probe.intervalMs",
      "probe.timeoutMs",
      "probe.observersPerNode",
      "probe.heartbeatIntervalMs",
      "suspicion.leaseStaleMs",
    ]);
  });
});

describe("startPolicyFollower", () => {
  it("applies each read, and skips a failed one", async () => {
    const applied: FencingPolicySpec[] = [];
    const reads = [resolvePolicy({ probe: { intervalMs: 300 } }), new Error("API down"), resolvePolicy({})];
    let i = 0;
    const loop = startPolicyFollower({
      read: async () => {
        const r = reads[Math.min(i++, reads.length - 1)]!;
        if (r instanceof Error) throw r;
        return r;
      },
      source: { applyPolicy: (p) => (applied.push(p), []) },
      clock: systemClock,
      log,
      periodMs: 10,
    });
    await new Promise((r) => setTimeout(r, 100));
    loop.stop();
    expect(applied[0]!.probe.intervalMs).toBe(300);
    expect(applied[1]!.probe.intervalMs).toBe(200);
    expect(i).toBeGreaterThanOrEqual(3);
  });
});
