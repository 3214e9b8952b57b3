// The last look in the round (issue 18): fenceWithLevels asks it just before each level's off
// command, and an abandon sends no off command at that level or any later one; the look's
// effects (infra/fence/last-look.ts) count a missed probe or a read that failed as nothing
// seen, and stay within about the probe timeout.
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BmcDriver, PowerStatus } from "../../../infra/bmc/driver.ts";
import { AttemptSchema, type LastLook } from "../../../core/incident.ts";
import { fenceWithLevels, type OffGateVerdict } from "../../../infra/bmc/levels.ts";
import { see } from "../../../infra/fence/last-look.ts";
import type { LastLookPlan } from "../../../core/decision.ts";
import { kubeAnswering } from "../../scenarios/memory-adapters.ts";

function fake(script: PowerStatus[]): BmcDriver & { offs: number } {
  let i = 0;
  const d = {
    kind: "x",
    target: "x://fake",
    offs: 0,
    async status() {
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
const look: LastLook = { reason: "NodeResponding", probe: "answered", heartbeat: "silent", back: false };
const abandon: OffGateVerdict = { go: false, look, message: "last look: answered" };

describe("fenceWithLevels with a last look", () => {
  it("abandon before level 1: no off command anywhere, one abandoned attempt", async () => {
    const a = fake([off]);
    const b = fake([off]);
    const asked: number[] = [];
    const out = await fenceWithLevels(
      [
        { protocol: "redfish", driver: a, timeoutMs: 1000 },
        { protocol: "ipmi", driver: b, timeoutMs: 1000 },
      ],
      { round: 1, by: "fence-0", ...vclock(), beforeOff: async (l) => (asked.push(l), abandon) },
    );
    expect(out.confirmed).toBe(false);
    expect([a.offs, b.offs, asked]).toEqual([0, 0, [0]]);
    expect(out.attempts).toHaveLength(1);
    expect(out.attempts[0]).toMatchObject({ level: 0, result: "abandoned", lastLook: look });
    expect(out.attempts[0]!.commandAt).toBeUndefined();
    expect(AttemptSchema.parse(out.attempts[0])).toEqual(out.attempts[0]);
  });

  it("looks again before every level: go at level 1 (still on), abandon at level 2", async () => {
    const a = fake([on]);
    const b = fake([off]);
    const asked: number[] = [];
    const out = await fenceWithLevels(
      [
        { protocol: "redfish", driver: a, timeoutMs: 500, pollMs: 100 },
        { protocol: "ipmi", driver: b, timeoutMs: 1000 },
      ],
      {
        round: 2,
        by: "fence-0",
        ...vclock(),
        beforeOff: async (l) => (asked.push(l), l === 0 ? { go: true } : abandon),
      },
    );
    expect([a.offs, b.offs, asked]).toEqual([1, 0, [0, 1]]);
    expect(out.attempts.map((x) => x.result)).toEqual(["still-on", "abandoned"]);
  });

  it("go: the off command follows the look", async () => {
    const a = fake([off]);
    const out = await fenceWithLevels([{ protocol: "redfish", driver: a, timeoutMs: 1000 }], {
      round: 1,
      by: "fence-0",
      ...vclock(),
      beforeOff: async () => ({ go: true }),
    });
    expect(out.confirmed).toBe(true);
    expect(a.offs).toBe(1);
  });
});

describe("the look's effects (loopback only)", () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((s) => s.destroy());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  // The API reads fail (an unreachable API server) or hang: they count as unread, never as life.
  const failing = kubeAnswering(() => Promise.reject(new Error("api down")));
  const hanging = kubeAnswering(() => new Promise(() => undefined));
  const plan = (p: number): LastLookPlan => ({
    node: "a",
    bootId: "b1",
    probe: { host: "127.0.0.1", port: p, timeoutMs: 200 },
    heartbeatLease: "fastfence-alive-a",
    confirmedAt: new Date(0).toISOString(),
    maxClockSkewMs: 2000,
  });

  it("a listening probe address answers; failed reads are unread", async () => {
    const seen = await see({ kube: failing, namespace: "ff" }, plan(port));
    expect(seen).toEqual({ probe: "answered", lease: "unread", node: "unread" });
  });

  it("a refused probe is missed; hung reads end within the budget", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const freePort = (closed.address() as { port: number }).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const t0 = performance.now();
    const seen = await see({ kube: hanging, namespace: "ff" }, plan(freePort));
    expect(seen).toEqual({ probe: "missed", lease: "unread", node: "unread" });
    expect(performance.now() - t0).toBeLessThan(600);
  });
});
