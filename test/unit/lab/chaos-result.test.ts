import { describe, expect, it } from "vitest";
import { mergeResults, resultOfLog, type ChaosResult } from "../../../lab/chaos-result.ts";

const run = (over: Partial<ChaosResult>): ChaosResult => ({
  schedules: 10,
  seeds: ["1..10"],
  faults: { crash: 2, hang: 1 },
  violations: 0,
  livenessFailures: 0,
  errors: 0,
  failedSeeds: [],
  wallSeconds: 600,
  ...over,
});

describe("chaos RESULT lines", () => {
  it("reads the last RESULT line of a log, and names a log without one", () => {
    const log = `[ 1 s] lab up\nRESULT {"schedules":1}\n[ 2 s] more\nRESULT ${JSON.stringify(run({}))}\n`;
    expect(resultOfLog("a.log", log).schedules).toBe(10);
    expect(() => resultOfLog("b.log", "[ 1 s] lab up\n")).toThrow(/b\.log: no RESULT line/);
  });

  it("sums counts, lists seeds in order and keeps one control plane, or says mixed", () => {
    const a = run({ controlPlane: "compact", bmcLies: 1 });
    const b = run({
      seeds: ["11..20"],
      faults: { crash: 1, "bmc-lying": 2 },
      errors: 1,
      failedSeeds: [14],
      controlPlane: "compact",
    });
    const m = mergeResults([a, b]);
    expect(m).toMatchObject({ schedules: 20, seeds: ["1..10", "11..20"], errors: 1, failedSeeds: [14] });
    expect(m.faults).toEqual({ crash: 3, hang: 1, "bmc-lying": 2 });
    expect(m).toMatchObject({ bmcLies: 1, wallSeconds: 1200, controlPlane: "compact" });
    // A run from before the compact plane names none: it ran on the host.
    expect(mergeResults([a, run({})]).controlPlane).toBe("mixed");
    expect(mergeResults([run({}), run({ controlPlane: "host" })]).controlPlane).toBe("host");
  });
});
