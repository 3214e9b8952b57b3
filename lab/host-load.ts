// How busy the machine under the lab was during a trial: samples the kernel's CPU counters
// (/proc/stat, first line) every sampleMs and answers, for a window of wall time, the share
// of all CPUs that was busy and the share the hypervisor took away (steal). The lab runs
// every node, broker and API server on the same few cores, so a trial slow at every hop is
// told apart from a slow code path by this number (docs/lab.md). Read only; a host without
// /proc/stat gives no figures rather than an error. Never reads anything but /proc/stat.
import { readFileSync } from "node:fs";

/** Cumulative CPU time, in clock ticks, of all CPUs together. */
export interface CpuTicks {
  busy: number;
  steal: number;
  total: number;
}

/** One sample: wall time (ms since the epoch) and the counters then. */
export interface CpuSample extends CpuTicks {
  at: number;
}

/** Share of CPU time, 0..1, over a window. */
export interface CpuShare {
  busy: number;
  steal: number;
}

/**
 * The aggregate "cpu" line of /proc/stat: user nice system idle iowait irq softirq steal
 * (guest time is already counted in user). Busy is everything but idle, iowait and steal.
 * Undefined when the line is not there or not numbers.
 */
export function parseProcStat(text: string): CpuTicks | undefined {
  const line = text.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) return undefined;
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 8 || f.some((x) => !Number.isFinite(x))) return undefined;
  const [user, nice, system, idle, iowait, irq, softirq, steal] = f as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const busy = user + nice + system + irq + softirq;
  return { busy, steal, total: busy + idle + iowait + steal };
}

/**
 * The share over [from, to] from samples sorted by time: between the last sample at or
 * before `from` and the first at or after `to`, so the window is covered (a little wider,
 * by at most one sample interval each side). Undefined when the samples do not cover it.
 */
export function shareBetween(samples: readonly CpuSample[], from: number, to: number): CpuShare | undefined {
  let a: CpuSample | undefined;
  let b: CpuSample | undefined;
  for (const s of samples) {
    if (s.at <= from) a = s;
    if (s.at >= to) {
      b = s;
      break;
    }
  }
  if (!a || !b) return undefined;
  const total = b.total - a.total;
  if (total <= 0) return undefined;
  return { busy: (b.busy - a.busy) / total, steal: (b.steal - a.steal) / total };
}

/** Samples /proc/stat in the background, keeping the last `keepMs` of samples. */
export class HostLoad {
  private readonly samples: CpuSample[] = [];
  private timer: NodeJS.Timeout | undefined;

  private readonly sampleMs: number;
  private readonly keepMs: number;
  private readonly read: () => string;

  constructor(sampleMs = 100, keepMs = 10 * 60_000, read = () => readFileSync("/proc/stat", "utf8")) {
    this.sampleMs = sampleMs;
    this.keepMs = keepMs;
    this.read = read;
  }

  start(): this {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.sampleMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The share over [from, to]; takes a last sample first so a window ending now is covered. */
  between(from: number, to: number): CpuShare | undefined {
    this.sample();
    return shareBetween(this.samples, from, to);
  }

  private sample(): void {
    let ticks: CpuTicks | undefined;
    try {
      ticks = parseProcStat(this.read());
    } catch {
      return; // no /proc/stat (not Linux): no figures
    }
    if (!ticks) return;
    const at = Date.now();
    this.samples.push({ at, ...ticks });
    while (this.samples.length && this.samples[0]!.at < at - this.keepMs) this.samples.shift();
  }
}
