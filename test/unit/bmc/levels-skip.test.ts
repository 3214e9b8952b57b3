// The escalation after a lying BMC (issue 18, the look after the power-off): fenceWithLevels
// never sends anything to a skipped level (one that read back Off while the node ran), goes
// straight to the next, and records that level's attempt under its own index.
import { describe, expect, it } from "vitest";
import type { BmcDriver, PowerStatus } from "../../../infra/bmc/driver.ts";
import { fenceWithLevels } from "../../../infra/bmc/levels.ts";

function fake(script: PowerStatus[]): BmcDriver & { offs: number; statuses: number } {
  let i = 0;
  const d = {
    kind: "x",
    target: "x://fake",
    offs: 0,
    statuses: 0,
    async status() {
      d.statuses++;
      return script[Math.min(i++, script.length - 1)]!;
    },
    async off() {
      d.offs++;
    },
    async on() {},
  };
  return d;
}
const on = { state: "on", raw: "On" } as const;
const off = { state: "off", raw: "Off" } as const;
function vclock() {
  let t = 1000;
  return { now: () => t, sleep: async (ms: number) => void (t += ms) };
}

describe("fenceWithLevels with skipped levels", () => {
  it("skips the lying level 1 entirely; level 2 powers off and reads back Off", async () => {
    const liar = fake([off]);
    const honest = fake([on, off]);
    const out = await fenceWithLevels(
      [
        { protocol: "redfish", driver: liar, timeoutMs: 1000 },
        { protocol: "ipmi", driver: honest, timeoutMs: 1000 },
      ],
      { round: 2, by: "fence-0", ...vclock(), skip: [0] },
    );
    expect([liar.offs, liar.statuses]).toEqual([0, 0]);
    expect(honest.offs).toBe(1);
    expect(out.confirmed).toBe(true);
    expect(out.attempts).toHaveLength(1);
    expect(out.attempts[0]).toMatchObject({
      level: 1,
      driver: "ipmi",
      result: "off-confirmed",
      readBackState: "Off",
    });
  });

  it("every level skipped: no BMC call, no attempt, not confirmed", async () => {
    const a = fake([off]);
    const out = await fenceWithLevels([{ protocol: "redfish", driver: a, timeoutMs: 1000 }], {
      round: 2,
      by: "fence-0",
      ...vclock(),
      skip: [0],
    });
    expect([a.offs, a.statuses, out.confirmed, out.attempts]).toEqual([0, 0, false, []]);
  });
});
