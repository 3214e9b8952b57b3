// Needs real FIFO device (the lab's watchdog emulation): pets and resets on wall-clock timers.
// The watchdog agent (source/watchdog-agent.ts) on the lab's emulated device
// (lab/watchdog.ts: a real FIFO read by a host-side timer), with real timers and short
// settings: it pets only while its heartbeat renewals are acknowledged, the timer fires
// within grace + timeout once they stop, a graceful stop disarms it for good, a power
// switch leaves it unarmed until the next boot arms it, a missing device is reported
// as not armed with the reason, a node the policy asks no watchdog of never opens it, and
// "not armed" is recorded (acknowledged) before the device is ever disarmed: when the policy
// stops asking, and on a graceful stop, which leaves it armed if the record never lands.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseWatchdogReport, WATCHDOG_ANNOTATION } from "../../core/watchdog.ts";
import { createLogger } from "../../infra/log.ts";
import { EmulatedWatchdog } from "../../lab/watchdog.ts";
import { startWatchdogAgent, type WatchdogWanted } from "../../source/watchdog-agent.ts";

const dir = mkdtempSync(join(tmpdir(), "ff-watchdog-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const log = createLogger("watchdog-test", { level: "silent" });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const SETTINGS = { timeoutMs: 1_000, renewGraceMs: 300, petIntervalMs: 100 };
/** The emulated FIFO counts only in the lab's explicit emulation mode (infra/watchdog/device.ts). */
const LAB = { ...SETTINGS, emulation: "lab-fifo" } as const;

async function rig(name: string) {
  let firedAt: number | undefined;
  const wd = new EmulatedWatchdog(join(dir, name), SETTINGS.timeoutMs, () => (firedAt = Date.now()));
  wd.start();
  const agent = await startWatchdogAgent({
    config: { devicePath: wd.path, ...LAB },
    node: "node-a",
    bootId: () => "boot-1",
    clusterSize: () => 3,
    log,
  });
  let renewing: NodeJS.Timeout | undefined = setInterval(() => agent.onRenewed(), 100);
  agent.onRenewed();
  return {
    wd,
    agent,
    firedAt: () => firedAt,
    stopRenewing: () => {
      clearInterval(renewing);
      renewing = undefined;
      return Date.now();
    },
    done: () => {
      clearInterval(renewing);
      wd.stop();
    },
  };
}

/** Until `cond` holds or `withinMs` passed (the caller asserts it after). */
async function becomes(cond: () => boolean, withinMs: number): Promise<void> {
  const end = Date.now() + withinMs;
  while (!cond() && Date.now() < end) await sleep(50);
}

describe("watchdog agent on the emulated device", () => {
  it("keeps the node up while renewals are acknowledged, and lets it reset once they stop", async () => {
    const r = await rig("a");
    try {
      await sleep(3 * SETTINGS.timeoutMs);
      expect(r.wd.armed()).toBe(true);
      expect(r.firedAt()).toBeUndefined();
      expect(parseWatchdogReport(r.agent.annotations()[WATCHDOG_ANNOTATION])).toEqual({
        ok: true,
        report: {
          armed: true,
          timeoutMs: SETTINGS.timeoutMs,
          bootId: "boot-1",
          renewGraceMs: SETTINGS.renewGraceMs,
        },
      });
      const stoppedAt = r.stopRenewing();
      await sleep(SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 700);
      const fired = r.firedAt();
      expect(fired).toBeDefined();
      // It fires no earlier than the timeout after the last renewal's grace could have let it pet.
      expect(fired! - stoppedAt).toBeGreaterThanOrEqual(SETTINGS.timeoutMs);
      expect(fired! - stoppedAt).toBeLessThanOrEqual(SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 400);
      console.log(`reset ${fired! - stoppedAt} ms after the last renewal (grace 300 + timeout 1000 ms)`);
    } finally {
      r.done();
    }
  });

  it("a graceful stop disarms it: no reset, however long the node stays quiet", async () => {
    const r = await rig("b");
    try {
      await sleep(500);
      await r.agent.stop();
      r.stopRenewing();
      expect(r.wd.armed()).toBe(false);
      await sleep(SETTINGS.renewGraceMs + 2 * SETTINGS.timeoutMs);
      expect(r.firedAt()).toBeUndefined();
    } finally {
      r.done();
    }
  });

  it("a power switch (a fence's off, the lab's power-on) leaves it unarmed: a timer armed before never fires after", async () => {
    const r = await rig("p");
    try {
      await sleep(500);
      expect(r.wd.armed()).toBe(true);
      // the node stops petting (as its processes die at a power-off, without the magic close)
      r.stopRenewing();
      await sleep(SETTINGS.renewGraceMs + 2 * SETTINGS.petIntervalMs);
      expect(r.wd.armed()).toBe(true); // still armed: its timeout has not run out
      r.wd.powerReset();
      expect(r.wd.armed()).toBe(false);
      await sleep(SETTINGS.timeoutMs + 500);
      expect(r.firedAt()).toBeUndefined();
      // the next boot's first write arms it again
      r.agent.onRenewed();
      await sleep(3 * SETTINGS.petIntervalMs);
      expect(r.wd.armed()).toBe(true);
    } finally {
      await r.agent.stop();
      r.done();
    }
  });

  it("is not armed before its first acknowledged renewal (a node booting without the API is never reset)", async () => {
    let fired = false;
    const wd = new EmulatedWatchdog(join(dir, "c"), SETTINGS.timeoutMs, () => (fired = true));
    wd.start();
    const agent = await startWatchdogAgent({
      config: { devicePath: wd.path, ...LAB },
      node: "node-a",
      bootId: () => "boot-1",
      clusterSize: () => 3,
      log,
    });
    try {
      await sleep(SETTINGS.timeoutMs + 500);
      expect(wd.armed()).toBe(false);
      expect(fired).toBe(false);
      expect(parseWatchdogReport(agent.annotations()[WATCHDOG_ANNOTATION])).toMatchObject({
        ok: true,
        report: { armed: false, reason: /first acknowledged heartbeat renewal/ },
      });
    } finally {
      await agent.stop();
      wd.stop();
    }
  });

  it("a device that cannot be opened is reported as not armed, with the reason", async () => {
    const agent = await startWatchdogAgent({
      config: { devicePath: join(dir, "no-such-device"), ...LAB },
      node: "node-a",
      bootId: () => "boot-1",
      clusterSize: () => 3,
      log,
    });
    agent.onRenewed();
    await sleep(100);
    const report = parseWatchdogReport(agent.annotations()[WATCHDOG_ANNOTATION]);
    expect(report).toMatchObject({
      ok: true,
      report: { armed: false, reason: /cannot open watchdog .*ENOENT/ },
    });
    await agent.stop();
  });

  it("not asked for by the policy: never opened, reported not armed (requested: false)", async () => {
    const wd = new EmulatedWatchdog(join(dir, "n"), SETTINGS.timeoutMs, () => undefined);
    wd.start();
    const agent = await startWatchdogAgent({
      config: { devicePath: wd.path, ...LAB },
      node: "node-a",
      bootId: () => "boot-1",
      clusterSize: () => 3,
      wanted: () => ({ arm: false, reason: "no watchdog level", requested: false }),
      log,
    });
    try {
      agent.onRenewed();
      await sleep(3 * SETTINGS.petIntervalMs);
      expect(wd.armed()).toBe(false);
      expect(agent.report()).toMatchObject({ armed: false, requested: false, reason: "no watchdog level" });
    } finally {
      await agent.stop();
      wd.stop();
    }
  });

  it("the policy stops asking: 'not armed' is recorded first, then disarmed; a failed record keeps it armed", async () => {
    const wd = new EmulatedWatchdog(join(dir, "r"), SETTINGS.timeoutMs, () => undefined);
    wd.start();
    let want: WatchdogWanted = { arm: true };
    let ack = false;
    const records: { armedReported: boolean; deviceArmed: boolean }[] = [];
    const agent = await startWatchdogAgent({
      config: { devicePath: wd.path, ...LAB },
      node: "node-a",
      bootId: () => "boot-1",
      clusterSize: () => 3,
      wanted: () => want,
      record: async () => {
        records.push({ armedReported: agent.report().armed, deviceArmed: wd.armed() });
        return ack;
      },
      stopRecordMs: 500,
      log,
    });
    const renewing = setInterval(() => agent.onRenewed(), 100);
    try {
      agent.onRenewed();
      await sleep(3 * SETTINGS.petIntervalMs);
      expect(wd.armed()).toBe(true);
      want = { arm: false, reason: "no watchdog level", requested: false };
      await sleep(3 * SETTINGS.petIntervalMs);
      // the API does not acknowledge: still armed (and petted), reported not armed
      expect(records.length).toBeGreaterThan(0);
      expect(wd.armed()).toBe(true);
      expect(agent.report()).toMatchObject({ armed: false, requested: false });
      ack = true;
      // the record lands on the next pet round, then the disarm (polled: a loaded machine is late)
      await becomes(() => !wd.armed(), 3000);
      expect(wd.armed()).toBe(false);
      expect(records.every((r) => !r.armedReported && r.deviceArmed)).toBe(true);
      // asked for again: armed again; a stop whose record never lands leaves it armed
      want = { arm: true };
      await becomes(() => wd.armed(), 3000);
      expect(wd.armed()).toBe(true);
      ack = false;
      clearInterval(renewing);
      await agent.stop();
      expect(wd.armed()).toBe(true);
    } finally {
      clearInterval(renewing);
      await agent.stop();
      wd.stop();
    }
  });

  it("a record that fails with an error keeps it armed: neither the policy's release nor a stop disarms it", async () => {
    const wd = new EmulatedWatchdog(join(dir, "e"), SETTINGS.timeoutMs, () => undefined);
    wd.start();
    let want: WatchdogWanted = { arm: true };
    let calls = 0;
    const agent = await startWatchdogAgent({
      config: { devicePath: wd.path, ...LAB },
      node: "node-a",
      bootId: () => "boot-1",
      clusterSize: () => 3,
      wanted: () => want,
      record: () => {
        calls++;
        return Promise.reject(new Error("the API server refused the write"));
      },
      stopRecordMs: 400,
      log,
    });
    const renewing = setInterval(() => agent.onRenewed(), 100);
    try {
      agent.onRenewed();
      await sleep(3 * SETTINGS.petIntervalMs);
      expect(wd.armed()).toBe(true);
      want = { arm: false, reason: "no watchdog level", requested: false };
      await sleep(5 * SETTINGS.petIntervalMs);
      expect(calls).toBeGreaterThan(0);
      expect(wd.armed()).toBe(true); // still armed and petted: the record never landed
      clearInterval(renewing);
      await agent.stop();
      expect(wd.armed()).toBe(true); // left armed: the node resets rather than disarm silently
    } finally {
      clearInterval(renewing);
      wd.stop();
    }
  });

  it("a stop while the device is being opened: 'not armed' recorded, then disarmed, never left armed unpetted", async () => {
    let fired = false;
    const wd = new EmulatedWatchdog(join(dir, "o"), SETTINGS.timeoutMs, () => (fired = true));
    wd.start();
    const order: string[] = [];
    const agent = await startWatchdogAgent({
      config: { devicePath: wd.path, ...LAB },
      node: "node-a",
      bootId: () => "boot-1",
      clusterSize: () => 3,
      record: async () => {
        order.push(`record armed=${agent.report().armed} device=${wd.armed()}`);
        return true;
      },
      log,
    });
    try {
      agent.onRenewed(); // starts the open
      await agent.stop(); // before the open finished
      await sleep(SETTINGS.renewGraceMs + SETTINGS.timeoutMs + 500);
      expect(fired).toBe(false);
      expect(wd.armed()).toBe(false);
      expect(order.every((o) => o.startsWith("record armed=false"))).toBe(true);
    } finally {
      wd.stop();
    }
  });
});
