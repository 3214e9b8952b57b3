// powerOffAndConfirm (S1: only a read-back of exactly "off" confirms) and fencing levels
// (a failed or timed-out level moves on; every attempt recorded), with fake drivers.
import { describe, expect, it } from "vitest";
import {
  BmcAuthError,
  BmcUnreachableError,
  powerOffAndConfirm,
  type BmcDriver,
  type PowerStatus,
} from "../../../infra/bmc/driver.ts";
import { fenceWithLevels } from "../../../infra/bmc/levels.ts";
import { mapRedfishPowerState } from "../../../infra/bmc/redfish.ts";

function fake(kind: string, script: (PowerStatus | Error)[], offError?: Error): BmcDriver & { offs: number } {
  let i = 0;
  const d = {
    kind,
    target: `${kind}://fake`,
    offs: 0,
    async status() {
      const s = script[Math.min(i++, script.length - 1)]!;
      if (s instanceof Error) throw s;
      return s;
    },
    async off() {
      d.offs++;
      if (offError) throw offError;
    },
    async on() {},
  };
  return d;
}

const on = { state: "on", raw: "On" } as const;
const poweringOff = { state: "on", raw: "PoweringOff" } as const;
const off = { state: "off", raw: "Off" } as const;

// virtual time: sleep advances the clock instantly
function vclock() {
  let t = 1000;
  return { now: () => t, sleep: async (ms: number) => void (t += ms) };
}

describe("powerOffAndConfirm", () => {
  it("confirms only on an 'off' read-back, after transitional states", async () => {
    const c = vclock();
    const d = fake("x", [on, poweringOff, poweringOff, off]);
    const r = await powerOffAndConfirm(d, { timeoutMs: 10_000, pollMs: 100, ...c });
    expect(r.readbacks.map((x) => x.raw)).toEqual(["On", "PoweringOff", "PoweringOff", "Off"]);
    expect(r.confirmedAt).toBe(1300);
    expect(d.offs).toBe(1);
  });

  it("PoweringOff forever is FF_BMC_STILL_ON, never success", async () => {
    const c = vclock();
    await expect(
      powerOffAndConfirm(fake("x", [poweringOff]), { timeoutMs: 2000, pollMs: 100, ...c }),
    ).rejects.toMatchObject({ code: "FF_BMC_STILL_ON" });
  });

  it("unknown states never count as off; transient read errors are retried", async () => {
    const c = vclock();
    const d = fake("x", [new BmcUnreachableError("x", "ECONNRESET"), { state: "unknown", raw: "?" }, off]);
    const r = await powerOffAndConfirm(d, { timeoutMs: 5000, pollMs: 50, ...c });
    expect(r.readbacks.map((x) => x.error ?? x.state)).toEqual(["FF_BMC_UNREACHABLE", "unknown", "off"]);
  });

  it("an off command error is thrown as is; auth errors on read-back stop early", async () => {
    const c = vclock();
    await expect(
      powerOffAndConfirm(fake("x", [on], new BmcAuthError("x")), { timeoutMs: 5000, pollMs: 50, ...c }),
    ).rejects.toMatchObject({ code: "FF_BMC_AUTH_FAILED" });
    await expect(
      powerOffAndConfirm(fake("x", [new BmcAuthError("x")]), { timeoutMs: 5000, pollMs: 50, ...c }),
    ).rejects.toMatchObject({ code: "FF_BMC_AUTH_FAILED" });
  });

  it("can re-send off while the machine still reads on", async () => {
    const c = vclock();
    const d = fake("x", [on, on, on, on, off]);
    await powerOffAndConfirm(d, { timeoutMs: 5000, pollMs: 50, resendOffEvery: 2, ...c });
    expect(d.offs).toBe(3);
  });

  it("Redfish PowerState mapping: only exactly Off is off", () => {
    expect(mapRedfishPowerState("Off")).toBe("off");
    expect(mapRedfishPowerState("PoweringOff")).toBe("on");
    expect(mapRedfishPowerState("off")).toBe("unknown");
    expect(mapRedfishPowerState(undefined)).toBe("unknown");
  });
});

describe("fenceWithLevels", () => {
  it("falls through failing levels and records every attempt", async () => {
    const c = vclock();
    const out = await fenceWithLevels(
      [
        {
          name: "redfish",
          driver: fake("redfish", [on], new BmcAuthError("redfish://fake")),
          timeoutMs: 1000,
        },
        { name: "ipmi", driver: fake("ipmi", [poweringOff]), timeoutMs: 1000, pollMs: 100 },
        { name: "pdu", driver: fake("fence_apc", [on, off]), timeoutMs: 1000, pollMs: 100 },
      ],
      c,
    );
    expect(out.confirmed).toBe(true);
    expect(out.level).toBe(2);
    expect(out.attempts.map((a) => [a.name, a.result, a.errorCode])).toEqual([
      ["redfish", "failed", "FF_BMC_AUTH_FAILED"],
      ["ipmi", "failed", "FF_BMC_STILL_ON"],
      ["pdu", "confirmed-off", undefined],
    ]);
    expect(out.attempts[2]!.readbacks).toBe(2);
  });

  it("no level confirms: not confirmed", async () => {
    const c = vclock();
    const out = await fenceWithLevels(
      [{ name: "a", driver: fake("a", [on]), timeoutMs: 500, pollMs: 100 }],
      c,
    );
    expect(out).toMatchObject({
      confirmed: false,
      attempts: [{ result: "failed", errorCode: "FF_BMC_STILL_ON" }],
    });
  });
});
