// The FencingPolicy's timeout chain (core/policy.ts): BMC call < level timeoutMs ≤ round
// (powerOffTimeoutMs) < round + ROUND_RECORD_MARGIN_MS < fencing Lease. The defaults keep
// it; the zod reader refuses each break naming the fields; the generated CRD carries the
// same rules as CEL with the same messages (the real API server's refusal is in
// test/integration/admission-fencingpolicy.test.ts).
import { describe, expect, it } from "vitest";
import { ZodError } from "zod";
import { crdSchemas } from "../../../core/crdschema.ts";
import {
  DEFAULT_POLICY,
  MAX_POWER_OFF_TIMEOUT_MS,
  ROUND_RECORD_MARGIN_MS,
  resolvePolicy,
  roundDeadline,
  type FencingPolicySpecInput,
} from "../../../core/policy.ts";

const level = (timeoutMs?: number) => ({
  driver: "redfish" as const,
  address: "redfish+https://10.0.0.1/redfish/v1/Systems/1",
  credentialsSecret: "bmc",
  ...(timeoutMs !== undefined ? { timeoutMs } : {}),
});
const withLevels = (timeouts: NonNullable<FencingPolicySpecInput["timeouts"]>, ...levels: number[]) => ({
  timeouts,
  fencing: { nodes: [{ nodeSelector: { names: ["w1"] }, levels: levels.map((t) => level(t)) }] },
});

function issuesOf(spec: FencingPolicySpecInput): { path: PropertyKey[]; message: string }[] {
  try {
    resolvePolicy(spec);
  } catch (err) {
    expect(err).toBeInstanceOf(ZodError);
    return (err as ZodError).issues.map((i) => ({ path: i.path, message: i.message }));
  }
  return [];
}

describe("FencingPolicy timeout chain", () => {
  it("the defaults keep the chain: call < level ≤ round < round + margin < lease", () => {
    const t = DEFAULT_POLICY.timeouts;
    const lv = resolvePolicy({ fencing: { nodes: [{ nodeSelector: { names: ["w1"] }, levels: [level()] }] } })
      .fencing.nodes[0]!.levels[0]!;
    expect(t.bmcCallTimeoutMs).toBe(5000);
    expect(lv.timeoutMs).toBe(20_000);
    expect(t.powerOffTimeoutMs).toBe(30_000);
    expect(t.leaseDurationMs).toBe(40_000);
    expect(t.bmcCallTimeoutMs).toBeLessThan(lv.timeoutMs);
    expect(lv.timeoutMs).toBeLessThanOrEqual(t.powerOffTimeoutMs);
    expect(roundDeadline(0, t.powerOffTimeoutMs)).toBe(t.powerOffTimeoutMs + ROUND_RECORD_MARGIN_MS);
    expect(t.leaseDurationMs).toBeGreaterThan(roundDeadline(0, t.powerOffTimeoutMs));
  });

  it("accepts a chain set for a BMC that needs 8 s per call", () => {
    expect(
      issuesOf(
        withLevels(
          { bmcCallTimeoutMs: 10_000, powerOffTimeoutMs: 60_000, leaseDurationMs: 70_000 },
          45_000,
          15_000,
        ),
      ),
    ).toEqual([]);
  });

  it.each([
    [
      "a lease shorter than the round plus its margin",
      { powerOffTimeoutMs: 30_000, leaseDurationMs: 35_000 },
      ["timeouts", "leaseDurationMs"],
      "timeouts.leaseDurationMs must exceed timeouts.powerOffTimeoutMs + 5000 ms",
    ],
    [
      "a BMC call as long as the round",
      { bmcCallTimeoutMs: 30_000, powerOffTimeoutMs: 30_000 },
      ["timeouts", "bmcCallTimeoutMs"],
      "timeouts.bmcCallTimeoutMs must be below timeouts.powerOffTimeoutMs",
    ],
  ])("refuses %s, naming the fields", (_, timeouts, path, message) => {
    const issues = issuesOf({ timeouts });
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toEqual(path);
    expect(issues[0]!.message).toContain(message);
  });

  it.each([
    ["longer than the round", 40_000],
    ["not longer than one BMC call", 5000],
  ])("refuses a level timeout %s, naming the level", (_, timeoutMs) => {
    const issues = issuesOf(withLevels({}, 10_000, timeoutMs));
    expect(issues).toEqual([
      {
        path: ["fencing", "nodes", 0, "levels", 1, "timeoutMs"],
        message:
          "every fencing.nodes[].levels[].timeoutMs must be above timeouts.bmcCallTimeoutMs and at most timeouts.powerOffTimeoutMs",
      },
    ]);
  });

  it("caps the round so the Knative timeouts can exceed it, and levels at the same cap", () => {
    expect(issuesOf({ timeouts: { powerOffTimeoutMs: MAX_POWER_OFF_TIMEOUT_MS + 1 } })[0]!.path).toEqual([
      "timeouts",
      "powerOffTimeoutMs",
    ]);
    expect(issuesOf(withLevels({}, MAX_POWER_OFF_TIMEOUT_MS + 1)).length).toBeGreaterThan(0);
    expect(
      issuesOf({ timeouts: { powerOffTimeoutMs: MAX_POWER_OFF_TIMEOUT_MS, leaseDurationMs: 600_000 } }),
    ).toEqual([]);
  });

  it("the CRD carries the same rules as CEL, with the same messages, and bounds their cost", () => {
    const spec = crdSchemas().fencingPolicySpec as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const t = spec.properties.timeouts;
    expect(t["x-kubernetes-validations"]).toEqual([
      {
        rule: "!has(self.bmcCallTimeoutMs) || !has(self.powerOffTimeoutMs) || self.bmcCallTimeoutMs < self.powerOffTimeoutMs",
        message: "timeouts.bmcCallTimeoutMs must be below timeouts.powerOffTimeoutMs",
      },
      {
        rule: "!has(self.leaseDurationMs) || !has(self.powerOffTimeoutMs) || self.leaseDurationMs > self.powerOffTimeoutMs + 5000",
        message: issuesOf({ timeouts: { leaseDurationMs: 1000 } })[0]!.message,
      },
    ]);
    expect(spec["x-kubernetes-validations"]).toEqual([
      expect.objectContaining({
        message: issuesOf(withLevels({}, 40_000))[0]!.message,
        rule: expect.stringContaining("l.timeoutMs <= self.timeouts.powerOffTimeoutMs") as string,
      }),
    ]);
    const nodes = spec.properties.fencing.properties.nodes;
    expect(nodes.maxItems).toBe(2000);
    expect(nodes.items.properties.levels.maxItems).toBe(8);
    expect(t.properties.powerOffTimeoutMs.maximum).toBe(MAX_POWER_OFF_TIMEOUT_MS);
  });
});
