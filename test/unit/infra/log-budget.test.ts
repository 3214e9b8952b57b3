// The dispatcher logs invalid events within a per-second budget: a flood of bad records
// costs at most that many lines a second, and the next line logged says how many were not.
import { describe, expect, it } from "vitest";
import { LogBudget } from "../../../infra/runtime/dispatch.ts";

describe("LogBudget", () => {
  it("allows n lines a second, then counts the refused ones into the next allowed line", () => {
    const b = new LogBudget(2);
    expect([b.take(0), b.take(10), b.take(20), b.take(30)]).toEqual([0, 0, undefined, undefined]);
    expect(b.take(1000)).toBe(2);
    expect(b.take(1001)).toBe(0);
    expect(b.take(1002)).toBeUndefined();
  });
});
