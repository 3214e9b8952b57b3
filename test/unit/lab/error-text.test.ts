import { describe, expect, it } from "vitest";
import { step, StepError, withCauses } from "../../../lab/error-text.ts";

describe("a failed lab step, named", () => {
  it("names the causes under a bare message", () => {
    const refused = new Error("connect ECONNREFUSED 10.77.0.1:6443");
    expect(withCauses(new TypeError("fetch failed", { cause: refused }))).toBe(
      "fetch failed: connect ECONNREFUSED 10.77.0.1:6443",
    );
    expect(withCauses("a string")).toBe("a string");
  });

  it("names the step that failed, the innermost one when steps nest", async () => {
    const failed = await step("creating the workloads", () =>
      Promise.reject(new TypeError("fetch failed", { cause: new Error("socket hang up") })),
    ).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(StepError);
    expect((failed as StepError).step).toBe("creating the workloads");
    expect((failed as Error).message).toBe("creating the workloads: fetch failed: socket hang up");
    const nested = await step("the trial", () =>
      step("the fault (crash)", () => Promise.reject(new Error("x"))),
    ).catch((e: unknown) => e);
    expect((nested as StepError).step).toBe("the fault (crash)");
    expect(await step("fine", () => Promise.resolve(7))).toBe(7);
  });
});
