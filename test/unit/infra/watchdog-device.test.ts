// Which path may be armed as the node's watchdog, and with which timeout
// (infra/watchdog/device.ts deviceTimeout), on plain data — what a `stat` and sysfs would
// say, never a real device: only a watchdog character device (the major:minor its
// /sys/class/watchdog/watchdogN/dev names, or the legacy misc 10:130 of watchdog0) with a
// sysfs timeout counts, with that timeout; a FIFO, /dev/null or a regular file is not
// armed; the lab's FIFO only in the emulation mode; an annotation or a configured value
// never supplies a timeout, only refuses one that differs.
import { describe, expect, test } from "vitest";
import { deviceTimeout, splitDev, sysfsName, type DeviceFacts } from "../../../infra/watchdog/device.ts";

const wd3 = (extra: Partial<DeviceFacts> = {}): DeviceFacts => ({
  path: "/host/dev/watchdog3",
  device: { kind: "char", major: 247, minor: 3 },
  sysfs: { name: "watchdog3", dev: "247:3\n", timeout: "30\n" },
  expected: [],
  ...extra,
});

describe("deviceTimeout", () => {
  const cases: [string, DeviceFacts, number | RegExp][] = [
    ["watchdogN as sysfs names it, with a timeout: its timeout", wd3(), 30_000],
    [
      "the legacy /dev/watchdog (misc 10:130) is watchdog0",
      {
        path: "/host/dev/watchdog",
        device: { kind: "char", major: 10, minor: 130 },
        sysfs: { name: "watchdog0", dev: "248:0", timeout: "10" },
        expected: [],
      },
      10_000,
    ],
    [
      "sysfs gives no timeout: not armed (never a default)",
      wd3({
        sysfs: { name: "watchdog3", dev: "247:3" },
        expected: [{ timeoutMs: 30_000, from: "the annotation" }],
      }),
      /gives no timeout: not armed/,
    ],
    [
      "an unreadable timeout: not armed",
      wd3({ sysfs: { name: "watchdog3", dev: "247:3", timeout: "x" } }),
      /no timeout/,
    ],
    [
      "/dev/null: a character device, but not a watchdog name",
      {
        path: "/host/dev/null",
        device: { kind: "char", major: 1, minor: 3 },
        sysfs: undefined,
        expected: [],
      },
      /not a watchdog device name/,
    ],
    [
      "another character device under a watchdog name: not the one sysfs names",
      wd3({ device: { kind: "char", major: 1, minor: 3 } }),
      /character device 1:3 is not \/sys\/class\/watchdog\/watchdog3/,
    ],
    [
      "a FIFO without the emulation mode",
      wd3({ device: { kind: "fifo" } }),
      /not a watchdog character device \(a FIFO\)/,
    ],
    ["a regular file", wd3({ device: { kind: "file" } }), /\(a regular file\)/],
    [
      "the lab's FIFO in the emulation mode: the emulation's timeout",
      wd3({ device: { kind: "fifo" }, sysfs: undefined, emulation: { mode: "lab-fifo", timeoutMs: 5_000 } }),
      5_000,
    ],
    [
      "the emulation mode never accepts a character device",
      wd3({ emulation: { mode: "lab-fifo", timeoutMs: 5_000 } }),
      /accepts only the lab's FIFO/,
    ],
    [
      "an annotation that differs only refuses",
      wd3({ expected: [{ timeoutMs: 10_000, from: "the node's fastfence.io/watchdog-timeout-ms" }] }),
      /30000 ms but the node's fastfence.io\/watchdog-timeout-ms says 10000 ms/,
    ],
    ["an annotation that agrees: armed", wd3({ expected: [{ timeoutMs: 30_000, from: "x" }] }), 30_000],
  ];
  test.each(cases)("%s", (_n, facts, want) => {
    const v = deviceTimeout(facts);
    if (typeof want === "number") expect(v).toEqual({ ok: true, timeoutMs: want });
    else {
      expect(v.ok).toBe(false);
      if (!v.ok) expect(v.reason).toMatch(want);
    }
  });
});

describe("names and numbers", () => {
  test("sysfsName", () => {
    expect(sysfsName("/host/dev/watchdog")).toBe("watchdog0");
    expect(sysfsName("/dev/watchdog1")).toBe("watchdog1");
    expect(sysfsName("/dev/null")).toBeUndefined();
    expect(sysfsName("/run/lab/node-a/watchdog-fifo")).toBeUndefined();
  });
  test("splitDev: glibc's dev_t encoding", () => {
    expect(splitDev(0x0103)).toEqual({ major: 1, minor: 3 }); // /dev/null
    expect(splitDev((10 << 8) | 130)).toEqual({ major: 10, minor: 130 });
    expect(splitDev((247 << 8) | 3)).toEqual({ major: 247, minor: 3 });
    expect(splitDev(0x1000 * 2 ** 32 + ((0x100 << 12) | (5 << 8) | 1))).toEqual({
      major: 0x1005,
      minor: 0x101,
    });
  });
});
