// powerOffAndConfirm (S1: only a read-back of exactly "off" confirms) and fencing levels
// (a failed or timed-out level moves on; every attempt recorded as the NodeFence Attempt
// itself), with fake drivers.
import { describe, expect, it } from "vitest";
import {
  attemptResultOf,
  BmcAuthError,
  BmcUnreachableError,
  powerOffAndConfirm,
  type BmcDriver,
  type PowerStatus,
} from "../../../infra/bmc/driver.ts";
import { AttemptSchema } from "../../../core/incident.ts";
import { fenceWithLevels } from "../../../infra/bmc/levels.ts";
import { mapRedfishPowerState } from "../../../infra/bmc/redfish.ts";

function fake(
  kind: string,
  script: (PowerStatus | Error)[],
  offError?: Error,
): BmcDriver & { offs: number; reads: number } {
  let i = 0;
  const d = {
    kind,
    target: `${kind}://fake`,
    offs: 0,
    reads: 0,
    async status() {
      d.reads++;
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
    expect(r).toMatchObject({ result: "off-confirmed", readBackState: "Off", commandAt: 1000 });
    expect(r.readBackAt).toBe(1300);
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
  const round = { round: 2, by: "fence-0" };

  it("falls through failing levels and records every attempt", async () => {
    const c = vclock();
    const pdu = fake("fence_apc", [on, off]);
    const out = await fenceWithLevels(
      [
        {
          protocol: "redfish",
          driver: fake("redfish", [on], new BmcAuthError("redfish://fake")),
          timeoutMs: 1000,
        },
        { protocol: "ipmi", driver: fake("ipmi", [poweringOff]), timeoutMs: 1000, pollMs: 100 },
        { protocol: "fence-agent", driver: pdu, timeoutMs: 1000, pollMs: 100 },
      ],
      { ...round, ...c },
    );
    expect(out.confirmed).toBe(true);
    expect(out.level).toBe(2);
    expect(out.attempts.map((a) => [a.level, a.driver, a.result, a.errorCode])).toEqual([
      [0, "redfish", "auth-failed", "FF_BMC_AUTH_FAILED"],
      [1, "ipmi", "still-on", "FF_BMC_STILL_ON"],
      [2, "fence-agent", "off-confirmed", undefined],
    ]);
    expect(pdu.reads).toBe(2);
    // The attempts are the NodeFence records as stored: nothing renames them afterwards.
    for (const a of out.attempts) expect(AttemptSchema.parse(a)).toEqual(a);
    expect(out.attempts.every((a) => a.round === 2 && a.by === "fence-0")).toBe(true);
    // S1: only the confirmed attempt carries a read-back, Off, taken after its command.
    expect(out.attempts[2]).toMatchObject({ readBackState: "Off" });
    expect(Date.parse(out.attempts[2]!.readBackAt!)).toBeGreaterThanOrEqual(
      Date.parse(out.attempts[2]!.commandAt!),
    );
    for (const a of out.attempts.slice(0, 2)) {
      expect(a.readBackState).toBeUndefined();
      expect(a.readBackAt).toBeUndefined();
    }
  });

  it("no level confirms: not confirmed", async () => {
    const c = vclock();
    const out = await fenceWithLevels(
      [{ protocol: "ipmi", driver: fake("a", [on]), timeoutMs: 500, pollMs: 100 }],
      { ...round, ...c },
    );
    expect(out).toMatchObject({
      confirmed: false,
      attempts: [{ result: "still-on", errorCode: "FF_BMC_STILL_ON" }],
    });
    expect(out.attempts[0]!.readBackState).toBeUndefined();
  });

  it("a round cancelled mid-level records that level's attempt and tries no further level", async () => {
    const ac = new AbortController();
    const hanging: BmcDriver = {
      kind: "ipmi",
      target: "ipmi://fake",
      async status(o) {
        // the round is cancelled while this read-back hangs
        const hang = new Promise<never>((_, reject) =>
          o.signal?.addEventListener("abort", () => reject(o.signal?.reason)),
        );
        ac.abort(new Error("shutting down"));
        return hang;
      },
      async off() {},
      async on() {},
    };
    const later = fake("redfish", [off]);
    const out = await fenceWithLevels(
      [
        { protocol: "ipmi", driver: hanging, timeoutMs: 5000, pollMs: 100 },
        { protocol: "redfish", driver: later, timeoutMs: 5000, pollMs: 100 },
      ],
      { ...round, now: Date.now, signal: ac.signal },
    );
    expect(out.confirmed).toBe(false);
    expect(out.attempts).toEqual([
      expect.objectContaining({ level: 0, driver: "ipmi", result: "timeout", errorCode: "FF_BMC_TIMEOUT" }),
    ]);
    expect(out.attempts[0]!.readBackState).toBeUndefined();
    expect(later.offs).toBe(0);
  });
});

describe("attemptResultOf", () => {
  it("maps a failed power-off's error code to the NodeFence Attempt result, never off-confirmed", () => {
    expect(attemptResultOf("FF_BMC_STILL_ON", false)).toBe("still-on");
    expect(attemptResultOf("FF_BMC_UNREACHABLE", false)).toBe("unreachable");
    expect(attemptResultOf("FF_BMC_AUTH_FAILED", false)).toBe("auth-failed");
    expect(attemptResultOf("FF_BMC_TIMEOUT", false)).toBe("timeout");
    expect(attemptResultOf("FF_BMC_PROTOCOL", false)).toBe("error");
    expect(attemptResultOf("FF_INVALID_CONFIG", false)).toBe("error");
    // cancelled: a specific result still wins, anything else ran out of time
    expect(attemptResultOf("FF_BMC_UNREACHABLE", true)).toBe("unreachable");
    expect(attemptResultOf("FF_CANCELLED", true)).toBe("timeout");
  });
});
