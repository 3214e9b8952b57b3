// The power side of the timeout chain (core/policy.ts), with fake drivers on virtual time:
// every BMC call gets at most the per-call budget (policy timeouts.bmcCallTimeoutMs, no
// longer a hard-coded 5 s), getting the driver ready gets the level's budget, a running
// level gets at most what is left of the round, and a level that would start after the
// round's budget is not started.
import { describe, expect, it } from "vitest";
import { powerOffAndConfirm, type BmcCallOptions, type BmcDriver } from "../../../infra/bmc/driver.ts";
import { fenceWithLevels } from "../../../infra/bmc/levels.ts";

/** A driver that records the budget of every call and reads `reads` (then "on" forever). */
function recording(name: string, reads: ("on" | "off")[] = []) {
  const calls: { call: string; timeoutMs: number }[] = [];
  let i = 0;
  const d: BmcDriver & { calls: typeof calls } = {
    kind: name,
    target: `${name}://fake`,
    calls,
    async prepare(o: BmcCallOptions) {
      calls.push({ call: "prepare", timeoutMs: o.timeoutMs });
    },
    async status(o: BmcCallOptions) {
      calls.push({ call: "status", timeoutMs: o.timeoutMs });
      const s = reads[i++] ?? "on";
      return { state: s, raw: s === "off" ? "Off" : "On" };
    },
    async off(o: BmcCallOptions) {
      calls.push({ call: "off", timeoutMs: o.timeoutMs });
    },
    async on() {},
  };
  return d;
}

function vclock(start = 1000) {
  let t = start;
  return { now: () => t, sleep: async (ms: number) => void (t += ms), advance: (ms: number) => (t += ms) };
}

describe("the per-call budget", () => {
  it("caps every off and status call at callTimeoutMs, and gives prepare the level's budget", async () => {
    const c = vclock();
    const d = recording("x", ["on", "off"]);
    await powerOffAndConfirm(d, { timeoutMs: 20_000, pollMs: 100, callTimeoutMs: 8000, ...c });
    expect(d.calls).toEqual([
      { call: "prepare", timeoutMs: 20_000 },
      { call: "off", timeoutMs: 8000 },
      { call: "status", timeoutMs: 8000 },
      { call: "status", timeoutMs: 8000 },
    ]);
  });

  it("a call near the end of the level gets only what is left", async () => {
    const c = vclock();
    const d = recording("x");
    await expect(
      powerOffAndConfirm(d, { timeoutMs: 1000, pollMs: 300, callTimeoutMs: 5000, ...c }),
    ).rejects.toMatchObject({ code: "FF_BMC_STILL_ON" });
    const budgets = d.calls.filter((x) => x.call === "status").map((x) => x.timeoutMs);
    expect(budgets).toEqual([1000, 700, 400, 100]);
  });

  it("defaults to the policy's default call budget (5000 ms)", async () => {
    const c = vclock();
    const d = recording("x", ["off"]);
    await powerOffAndConfirm(d, { timeoutMs: 20_000, pollMs: 100, ...c });
    expect(d.calls.find((x) => x.call === "off")!.timeoutMs).toBe(5000);
  });
});

describe("the round's budget", () => {
  it("cuts the running level to what is left and does not start a level after the round", async () => {
    const c = vclock();
    const [a, b, z] = [recording("a"), recording("b"), recording("z", ["off"])];
    const level = (driver: BmcDriver) => ({
      protocol: "redfish" as const,
      driver,
      timeoutMs: 20_000,
      pollMs: 1000,
      callTimeoutMs: 5000,
    });
    const out = await fenceWithLevels([level(a), level(b), level(z)], {
      round: 1,
      by: "r1",
      ...c,
      roundEndsAt: 1000 + 30_000,
    });
    expect(out.confirmed).toBe(false);
    expect(out.attempts.map((x) => [x.level, x.result, x.startedAt, x.finishedAt])).toEqual([
      [0, "still-on", iso(1000), iso(21_000)],
      [1, "still-on", iso(21_000), iso(31_000)],
    ]);
    expect(b.calls[0]).toEqual({ call: "prepare", timeoutMs: 10_000 });
    expect(z.calls).toEqual([]); // never started: the round's 30 s were spent
  });

  it("without a round budget every level gets its own timeoutMs", async () => {
    const c = vclock();
    const [a, b] = [recording("a"), recording("b", ["off"])];
    const out = await fenceWithLevels(
      [a, b].map((driver) => ({ protocol: "ipmi" as const, driver, timeoutMs: 20_000, pollMs: 1000 })),
      { round: 1, by: "r1", ...c },
    );
    expect(out).toMatchObject({ confirmed: true, level: 1 });
    expect(b.calls[0]).toEqual({ call: "prepare", timeoutMs: 20_000 });
  });
});

const iso = (ms: number) => new Date(ms).toISOString();
