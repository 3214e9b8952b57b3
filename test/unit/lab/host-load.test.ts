// The bench's host CPU figures (lab/host-load.ts): /proc/stat's aggregate line parsed into
// busy, steal and total ticks, and the share of a wall-time window from samples around it.
import { describe, expect, test } from "vitest";
import { HostLoad, parseProcStat, shareBetween, type CpuSample } from "../../../lab/host-load.ts";

const STAT = `cpu  3980073 9993 756968 4895490 15287 0 85455 1677 0 0
cpu0 1990036 4996 378484 2447745 7643 0 42727 838 0 0
intr 1 2 3
`;

describe("parseProcStat", () => {
  test("busy is user+nice+system+irq+softirq; idle, iowait and steal are not busy", () => {
    expect(parseProcStat(STAT)).toEqual({
      busy: 3980073 + 9993 + 756968 + 0 + 85455,
      steal: 1677,
      total: 3980073 + 9993 + 756968 + 4895490 + 15287 + 0 + 85455 + 1677,
    });
  });

  test.each([
    ["no aggregate line", "cpu0 1 2 3 4 5 6 7 8\n"],
    ["too few fields (an old kernel)", "cpu  1 2 3 4\n"],
    ["not numbers", "cpu  1 2 x 4 5 6 7 8\n"],
    ["empty", ""],
  ])("%s gives no figures", (_, text) => {
    expect(parseProcStat(text)).toBeUndefined();
  });
});

describe("shareBetween", () => {
  const s = (at: number, busy: number, steal: number, total: number): CpuSample => ({
    at,
    busy,
    steal,
    total,
  });
  const samples = [s(0, 0, 0, 0), s(100, 10, 0, 20), s(200, 30, 2, 40), s(300, 32, 2, 60)];

  test("from the last sample at or before the start to the first at or after the end", () => {
    expect(shareBetween(samples, 100, 200)).toEqual({ busy: 1, steal: 0.1 });
    expect(shareBetween(samples, 150, 250)).toEqual({ busy: 22 / 40, steal: 2 / 40 });
    expect(shareBetween(samples, 0, 300)).toEqual({ busy: 32 / 60, steal: 2 / 60 });
  });

  test("a window the samples do not cover gives no figures", () => {
    expect(shareBetween(samples, -1, 100)).toBeUndefined();
    expect(shareBetween(samples, 100, 301)).toBeUndefined();
    expect(shareBetween([], 0, 1)).toBeUndefined();
  });

  test("no time counted between the samples gives no figures, not a division by zero", () => {
    expect(shareBetween([s(0, 5, 0, 10), s(100, 5, 0, 10)], 0, 100)).toBeUndefined();
  });
});

describe("HostLoad", () => {
  test("samples what it reads and answers for a window ending now", async () => {
    let ticks = 0;
    const load = new HostLoad(1_000, 60_000, () => {
      ticks += 100;
      return `cpu  ${ticks / 2} 0 0 ${ticks / 2} 0 0 0 0 0 0\n`;
    });
    load.start(); // the first sample: 100 ticks, 50 busy
    await new Promise((r) => setTimeout(r, 5));
    const share = load.between(Date.now() - 1, Date.now()); // and one taken now

    load.stop();
    expect(share).toEqual({ busy: 0.5, steal: 0 });
  });

  test("a host whose /proc/stat cannot be read gives no figures and no error", () => {
    const load = new HostLoad(1_000, 60_000, () => {
      throw new Error("ENOENT");
    }).start();
    expect(load.between(0, Date.now())).toBeUndefined();
    load.stop();
  });
});
