// When probes start and which results count (source/probe-schedule.ts): a probe every
// interval even while earlier ones wait out their timeout, at most maxInFlight per target,
// and results counted in the order their probes began.
import { describe, expect, test } from "vitest";
import { ProbeSchedule } from "../../../source/probe-schedule.ts";

describe("ProbeSchedule", () => {
  test("a silent target gets a probe every interval while earlier ones still wait, up to maxInFlight", () => {
    const s = new ProbeSchedule(2);
    const first = s.start("a");
    const second = s.start("a");
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(s.start("a")).toBeUndefined(); // a third would exceed maxInFlight
    expect(s.start("b")).toBeDefined(); // other targets are counted apart
    expect(s.waiting("a")).toBe(2);
    expect(s.done("a", first!)).toBe(true); // the first miss counts
    expect(s.waiting("a")).toBe(1);
    expect(s.start("a")).toBeDefined(); // and frees a place
  });

  test("results count in the order their probes began: an overtaken one is dropped", () => {
    const s = new ProbeSchedule();
    const old = s.start("a")!; // waits out its timeout: a miss
    const fresh = s.start("a")!; // answered at once
    expect(s.done("a", fresh)).toBe(true);
    expect(s.done("a", old)).toBe(false); // the old miss must not follow the newer answer
    expect(s.waiting("a")).toBe(0);
    // the next probe's result counts again
    const next = s.start("a")!;
    expect(s.done("a", next)).toBe(true);
  });

  test("results finishing in start order all count (each miss of a silent node)", () => {
    const s = new ProbeSchedule();
    const tickets = [s.start("a")!, s.start("a")!];
    expect(tickets.map((t) => s.done("a", t))).toEqual([true, true]);
    const t3 = s.start("a")!;
    expect(s.done("a", t3)).toBe(true);
  });

  test("maxInFlight below 1 is refused, naming it", () => {
    expect(() => new ProbeSchedule(0)).toThrow(/maxInFlight must be a whole number ≥ 1, got 0/);
  });
});
