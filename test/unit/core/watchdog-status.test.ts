import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { formatWatchdogReport } from "../../../core/watchdog.ts";
import { parseNodeTimeout, summariseWatchdogs } from "../../../core/watchdog-status.ts";
import { watchdogsCondition, watchdogsEvent } from "../../../infra/kube/watchdog-status.ts";
import { openWatchdogDevice } from "../../../infra/watchdog/device.ts";
import { resolvePolicy } from "../../../core/policy.ts";
import { watchdogArming, watchdogArmingFor, watchdogDevice } from "../../../source/watchdog-settings.ts";

const armed = formatWatchdogReport({ armed: true, timeoutMs: 10_000, bootId: "b" });
const unarmed = formatWatchdogReport({
  armed: false,
  timeoutMs: 10_000,
  bootId: "b",
  reason: "cannot open watchdog /host/dev/watchdog: ENOENT",
});

describe("parseNodeTimeout", () => {
  it.each([
    [undefined, { ok: true, timeoutMs: undefined }],
    ["", { ok: true, timeoutMs: undefined }],
    ["10000", { ok: true, timeoutMs: 10_000 }],
    ["999", { ok: false }],
    ["600001", { ok: false }],
    ["10s", { ok: false }],
    ["1.5e4", { ok: true, timeoutMs: 15_000 }],
  ])("%j → %j", (v, want) => expect(parseNodeTimeout(v)).toMatchObject(want));
});

describe("summariseWatchdogs (the WatchdogsArmed condition)", () => {
  it("True when every Ready node reports armed", () => {
    const s = summariseWatchdogs([
      { node: "b", ready: true, report: armed },
      { node: "a", ready: true, report: armed },
    ]);
    expect(s).toMatchObject({ status: "True", reason: "AllReportedArmed", notArmed: [] });
    expect([...s.armed]).toEqual([
      ["a", 1],
      ["b", 1],
    ]);
  });
  it("False listing Ready nodes not armed, absent or malformed, with reasons; NotReady ones only in the gauge", () => {
    const s = summariseWatchdogs([
      { node: "c", ready: true, report: unarmed },
      { node: "a", ready: true, report: armed },
      { node: "d", ready: true, report: undefined },
      { node: "e", ready: true, report: "{" },
      { node: "f", ready: false, report: unarmed },
    ]);
    expect(s.status).toBe("False");
    expect(s.reason).toBe("WatchdogNotArmed");
    expect(s.notArmed.map((n) => n.node)).toEqual(["c", "d", "e"]);
    expect(s.message).toContain("c: cannot open watchdog /host/dev/watchdog: ENOENT");
    expect(s.message).toContain("d: no watchdog report");
    expect(s.armed.get("f")).toBe(0);
    expect(s.armed.get("a")).toBe(1);
  });
  it("NoWatchdogReports when no node reports one (watchdogs not deployed), and no gauge rows", () => {
    const s = summariseWatchdogs([{ node: "a", ready: true, report: undefined }]);
    expect(s).toMatchObject({ status: "False", reason: "NoWatchdogReports", notArmed: [] });
    expect(s.armed.size).toBe(0);
  });
});

describe("the condition and its Events", () => {
  const at = Date.parse("2026-01-01T00:00:00Z");
  const notArmed = summariseWatchdogs([
    { node: "a", ready: true, report: unarmed },
    { node: "b", ready: true, report: armed },
  ]);
  const allArmed = summariseWatchdogs([{ node: "a", ready: true, report: armed }]);
  it("a Warning when unarmed nodes appear or change, none when the same, a Normal one on recovery", () => {
    const c1 = watchdogsCondition(notArmed, 1, undefined, at);
    expect(watchdogsEvent(undefined, c1)).toEqual({ type: "Warning", reason: "WatchdogNotArmed" });
    expect(watchdogsEvent(c1, watchdogsCondition(notArmed, 1, c1, at + 1))).toBeUndefined();
    const c2 = watchdogsCondition(allArmed, 1, c1, at + 2);
    expect(c2.lastTransitionTime).not.toBe(c1.lastTransitionTime);
    expect(watchdogsEvent(c1, c2)).toEqual({ type: "Normal", reason: "WatchdogsArmed" });
    expect(watchdogsEvent(undefined, c2)).toBeUndefined();
  });
});

describe("watchdogDevice (FASTFENCE_WATCHDOG_*)", () => {
  const base = {
    FASTFENCE_WATCHDOG_DEVICE: "/host/dev/watchdog",
    FASTFENCE_WATCHDOG_TIMEOUT_MS: undefined,
    FASTFENCE_WATCHDOG_RENEW_GRACE_MS: 5000,
    FASTFENCE_WATCHDOG_PET_INTERVAL_MS: 1000,
  };
  it("no device: no watchdog", () =>
    expect(watchdogDevice({ ...base, FASTFENCE_WATCHDOG_DEVICE: undefined })).toBeUndefined());
  it("defaults", () =>
    expect(watchdogDevice(base)).toEqual({
      devicePath: "/host/dev/watchdog",
      renewGraceMs: 5000,
      petIntervalMs: 1000,
    }));
  it("the lab's emulation: only explicit, with its timeout", () =>
    expect(
      watchdogDevice({
        ...base,
        FASTFENCE_WATCHDOG_EMULATION: "lab-fifo",
        FASTFENCE_WATCHDOG_TIMEOUT_MS: 5000,
      }),
    ).toMatchObject({ emulation: "lab-fifo", timeoutMs: 5000 }));
  it.each([
    [{ FASTFENCE_WATCHDOG_PET_INTERVAL_MS: 6000 }, /PET_INTERVAL_MS/],
    [{ FASTFENCE_WATCHDOG_TIMEOUT_MS: 2000 }, /a third of/],
    [{ FASTFENCE_WATCHDOG_EMULATION: "lab-fifo" as const }, /required with FASTFENCE_WATCHDOG_EMULATION/],
  ])("refuses %j", (patch, re) => {
    let issues: unknown;
    try {
      watchdogDevice({ ...base, ...patch });
    } catch (err) {
      issues = (err as { issues?: unknown }).issues;
    }
    expect(JSON.stringify(issues)).toMatch(re);
  });
});

describe("watchdogArming: armed only where the policy's node entry has the watchdog level", () => {
  const env = {
    FASTFENCE_WATCHDOG_DEVICE: "/host/dev/watchdog",
    FASTFENCE_WATCHDOG_TIMEOUT_MS: undefined,
    FASTFENCE_WATCHDOG_RENEW_GRACE_MS: 5000,
    FASTFENCE_WATCHDOG_PET_INTERVAL_MS: 1000,
  };
  const device = watchdogDevice(env)!;
  const TRUSTED = "node-restriction.kubernetes.io/fastfence-watchdog";
  const policy = resolvePolicy({
    fencing: {
      nodes: [
        { nodeSelector: { names: ["w-1"] }, levels: [], watchdog: {} },
        {
          nodeSelector: { names: ["w-2"] },
          levels: [{ driver: "ipmi", address: "ipmi://10.0.0.2", credentialsSecret: "bmc" }],
        },
        { nodeSelector: { matchLabels: { [TRUSTED]: "on" } }, levels: [], watchdog: { marginMs: 3000 } },
      ],
    },
  });
  it("the shipped defaults (a device, the default policy) arm nothing", () =>
    expect(watchdogArmingFor(env, resolvePolicy({}), { name: "w-1" })).toMatchObject({
      arm: false,
      code: "NoWatchdogLevel",
      reason: expect.stringMatching(/no watchdog level/),
    }));
  it("a node whose entry has the watchdog level: armed with the device's settings", () =>
    expect(watchdogArming(device, policy, { name: "w-1" })).toEqual({ arm: true, config: device }));
  it("a node whose entry has only BMC levels, or that no entry matches: not armed, by choice", () => {
    expect(watchdogArming(device, policy, { name: "w-2" })).toMatchObject({
      arm: false,
      code: "NoWatchdogLevel",
    });
    expect(watchdogArming(device, policy, { name: "w-9" })).toMatchObject({
      arm: false,
      code: "NoWatchdogLevel",
    });
  });
  it("selected by a trusted label: armed only once the Node (its labels) is read", () => {
    expect(watchdogArming(device, policy, undefined)).toMatchObject({ arm: false, code: "NodeUnknown" });
    expect(watchdogArming(device, policy, { name: "w-5", labels: { [TRUSTED]: "on" } })).toMatchObject({
      arm: true,
    });
  });
  it("no device: nothing to arm, whatever the policy", () =>
    expect(watchdogArming(undefined, policy, { name: "w-1" })).toMatchObject({
      arm: false,
      code: "NoDevice",
    }));
  it("a grace below two of the policy's heartbeats: not armed, naming the variable", () =>
    expect(
      watchdogArming(
        device,
        { ...policy, probe: { ...policy.probe, heartbeatIntervalMs: 3000 } },
        { name: "w-1" },
      ),
    ).toMatchObject({
      arm: false,
      code: "GraceBelowHeartbeats",
      reason: expect.stringMatching(/RENEW_GRACE_MS/),
    }));
});

describe("summariseWatchdogs and nodes the policy asks no watchdog of", () => {
  const notAsked = formatWatchdogReport({
    armed: false,
    timeoutMs: 1000,
    bootId: "b",
    reason: "not asked for",
    requested: false,
  });
  it("not listed as a fault, gauge 0; the others judged as before", () => {
    const s = summariseWatchdogs([
      { node: "a", ready: true, report: armed },
      { node: "b", ready: true, report: notAsked },
    ]);
    expect(s).toMatchObject({ status: "True", reason: "AllReportedArmed", notArmed: [] });
    expect(s.armed.get("b")).toBe(0);
  });
  it("NoWatchdogReports when no node is asked for one", () =>
    expect(summariseWatchdogs([{ node: "b", ready: true, report: notAsked }])).toMatchObject({
      status: "False",
      reason: "NoWatchdogReports",
    }));
});

describe("openWatchdogDevice: the device's own timeout, the others only refuse", () => {
  const dir = mkdtempSync(join(tmpdir(), "ff-wd-unit-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  // A regular file standing in for watchdog0 (never a real device): the injected stat says
  // it is the character device sysfs names, so the check passes and the open is harmless.
  const dev = join(dir, "watchdog");
  writeFileSync(dev, "");
  mkdirSync(join(dir, "sys/watchdog0"), { recursive: true });
  writeFileSync(join(dir, "sys/watchdog0/timeout"), "60\n");
  writeFileSync(join(dir, "sys/watchdog0/dev"), "247:0\n");
  const stat = () => Promise.resolve({ kind: "char" as const, major: 247, minor: 0 });
  const sysfs = join(dir, "sys");
  it("refuses a device whose sysfs timeout is not the node's", async () => {
    await expect(
      openWatchdogDevice(dev, { stat, sysfs, expected: [{ timeoutMs: 10_000, from: "the annotation" }] }),
    ).rejects.toThrow(/60000 ms but the annotation says 10000 ms/);
  });
  it("takes the sysfs timeout when it matches or nobody expects one", async () => {
    const ok = [{ timeoutMs: 60_000, from: "the annotation" }];
    expect((await openWatchdogDevice(dev, { stat, sysfs, expected: ok })).timeoutMs).toBe(60_000);
    expect((await openWatchdogDevice(dev, { stat, sysfs })).timeoutMs).toBe(60_000);
  });
  it("without a sysfs timeout: not armed, whatever the annotation or the configuration says", async () => {
    await expect(
      openWatchdogDevice(dev, {
        stat,
        sysfs: join(dir, "none"),
        expected: [{ timeoutMs: 8000, from: "the annotation" }],
      }),
    ).rejects.toThrow(/is not \/sys\/class\/watchdog\/watchdog0/);
  });
  it("the real stat: a regular file is no watchdog", async () => {
    await expect(openWatchdogDevice(dev, { sysfs })).rejects.toThrow(
      /not a watchdog character device \(a regular file\)/,
    );
  });
});
