// The FencingPolicy `Valid` condition as a pure function of what a read found: its
// reason and message, when lastTransitionTime moves, and when a stored condition already
// says it (so replicas do not rewrite each other's status).
import { describe, expect, it } from "vitest";
import { alreadyReported, policyCondition, verdictMessage } from "../../../infra/kube/policy-status.ts";

const T0 = Date.parse("2026-01-01T00:00:00Z");
const invalid = {
  valid: false as const,
  issues: ["spec.corroboration.quorum: Too small: expected number to be >=2"],
};

describe("policyCondition", () => {
  it("True with SpecValid for a valid spec, False with InvalidSpec naming the fields otherwise", () => {
    expect(policyCondition({ valid: true }, 3, undefined, T0)).toEqual({
      type: "Valid",
      status: "True",
      reason: "SpecValid",
      message: "fastfence uses this spec",
      observedGeneration: 3,
      lastTransitionTime: "2026-01-01T00:00:00.000Z",
    });
    const c = policyCondition({ ...invalid, inForceGeneration: 2 }, 3, undefined, T0);
    expect(c).toMatchObject({ status: "False", reason: "InvalidSpec", observedGeneration: 3 });
    expect(c.message).toContain("spec.corroboration.quorum");
    expect(c.message).toContain("(generation 2) in force");
  });

  it("says when no valid policy is in force (events are dead-lettered)", () => {
    expect(verdictMessage(invalid)).toContain("FF_INVALID_CONFIG");
  });

  it("keeps lastTransitionTime while the status stays, moves it when the status flips", () => {
    const first = policyCondition(invalid, 2, undefined, T0);
    expect(policyCondition(invalid, 3, first, T0 + 5000).lastTransitionTime).toBe(first.lastTransitionTime);
    expect(policyCondition({ valid: true }, 4, first, T0 + 5000).lastTransitionTime).toBe(
      "2026-01-01T00:00:05.000Z",
    );
  });

  it("bounds the message however many fields are bad", () => {
    const many = { valid: false as const, issues: Array.from({ length: 500 }, (_, i) => `spec.f${i}: bad`) };
    expect(verdictMessage(many).length).toBeLessThan(1100);
  });
});

describe("alreadyReported", () => {
  const stored = policyCondition({ ...invalid, inForceGeneration: 1 }, 2, undefined, T0);
  it("ignores the message (it names each process's in-force generation)", () => {
    expect(alreadyReported(stored, policyCondition(invalid, 2, stored, T0))).toBe(true);
  });
  it("reports a new generation, a flipped status, or a missing condition", () => {
    expect(alreadyReported(stored, policyCondition(invalid, 3, stored, T0))).toBe(false);
    expect(alreadyReported(stored, policyCondition({ valid: true }, 2, stored, T0))).toBe(false);
    expect(alreadyReported(undefined, stored)).toBe(false);
  });
});
