// The node's watchdog device as Linux offers it (/dev/watchdog, hardware or softdog; the
// lab gives each node a FIFO read by a host-side timer with the same semantics, see
// lab/watchdog.ts): opening it arms it, every write pets it, writing the magic character
// "V" and then closing disarms it. A close without "V" — a crash, SIGKILL, a hung process
// the kernel never gets to run — leaves it armed, and the node resets when it expires.
// Before it opens anything it checks what the path is (deviceTimeout, pure, on what an
// injectable `stat` and sysfs say): only a watchdog character device — its major:minor is
// the one /sys/class/watchdog/watchdogN/dev names, or the legacy misc 10:130 of watchdog0 —
// whose sysfs timeout (/sys/class/watchdog/watchdogN/timeout) is readable counts, and that
// timeout is the one reported. It never takes a timeout from a Node annotation or from
// FASTFENCE_WATCHDOG_TIMEOUT_MS (those can only refuse a device whose timeout differs): no
// sysfs timeout means "not armed". The lab's FIFO counts only in the explicit emulation mode
// (FASTFENCE_WATCHDOG_EMULATION=lab-fifo, with its timeout given), which no shipped overlay
// sets (test/unit/infra/watchdog-emulation-overlays.test.ts). It never opens any path but
// the one it is given, never one that failed the check, and never writes "V" except in
// disarm().
import { constants, type Stats } from "node:fs";
import { open, readFile, stat as fsStat, type FileHandle } from "node:fs/promises";
import { basename } from "node:path";
import { FastfenceError } from "../../core/errors.ts";

/** The device could not be opened or written: the node reports its watchdog as not armed. */
export class WatchdogUnavailableError extends FastfenceError {
  constructor(message: string, cause?: unknown) {
    super("FF_INVALID_CONFIG", message, { cause });
  }
}

export interface WatchdogDevice {
  /** The device's timeout, ms: after the last pet the node resets within this. */
  readonly timeoutMs: number;
  pet(): Promise<void>;
  /** The magic close: "V", then close. Only for a graceful stop. */
  disarm(): Promise<void>;
}

/** The only emulation: the lab's FIFO (lab/watchdog.ts), never set by a shipped overlay. */
export const WATCHDOG_EMULATIONS = ["lab-fifo"] as const;
export type WatchdogEmulation = (typeof WATCHDOG_EMULATIONS)[number];

/** What a path is, as the check needs it (a `stat` result, or plain data in tests). */
export interface DeviceKind {
  kind: "char" | "fifo" | "file" | "other";
  /** A character device's major and minor number. */
  major?: number;
  minor?: number;
}

/** A `stat`-like function: what `path` is (follows symlinks, as open does). */
export type StatDevice = (path: string) => Promise<DeviceKind>;

/** Linux's major/minor of a dev_t as Node reports it (glibc's encoding). */
export function splitDev(rdev: number): { major: number; minor: number } {
  const r = BigInt(rdev);
  const major = Number(((r >> 8n) & 0xfffn) | ((r >> 32n) & 0xfffff000n));
  const minor = Number((r & 0xffn) | ((r >> 12n) & 0xffffff00n));
  return { major, minor };
}

export const statDevice: StatDevice = async (path) => {
  const s: Stats = await fsStat(path);
  if (s.isCharacterDevice()) return { kind: "char", ...splitDev(s.rdev) };
  if (s.isFIFO()) return { kind: "fifo" };
  if (s.isFile()) return { kind: "file" };
  return { kind: "other" };
};

/** The legacy /dev/watchdog: misc major 10, WATCHDOG_MINOR 130, always watchdog0. */
const LEGACY = { major: 10, minor: 130 } as const;

/** What deviceTimeout decides on: the path, what it is, and what sysfs says of its watchdogN. */
export interface DeviceFacts {
  path: string;
  device: DeviceKind;
  /** /sys/class/watchdog/<name>/dev ("MAJ:MIN") and …/timeout (seconds), as read, if readable. */
  sysfs: { name: string; dev?: string; timeout?: string } | undefined;
  emulation?: { mode: WatchdogEmulation; timeoutMs: number };
  /** Timeouts others expect (the Node annotation, FASTFENCE_WATCHDOG_TIMEOUT_MS): they only refuse. */
  expected: { timeoutMs: number; from: string }[];
}

export type DeviceVerdict = { ok: true; timeoutMs: number } | { ok: false; reason: string };

/** The sysfs name of a device path: /dev/watchdog is watchdog0; /dev/watchdogN is itself. */
export function sysfsName(path: string): string | undefined {
  const b = basename(path);
  if (b === "watchdog") return "watchdog0";
  return /^watchdog\d+$/.test(b) ? b : undefined;
}

/**
 * Whether `path` may be armed and with which timeout, from plain data: a watchdog character
 * device with a sysfs timeout (that timeout), or the lab's FIFO in the emulation mode (the
 * emulation's timeout); anything else is not armed, with the reason. Pure.
 */
export function deviceTimeout(f: DeviceFacts): DeviceVerdict {
  const no = (why: string): DeviceVerdict => ({ ok: false, reason: `watchdog ${f.path}: ${why}` });
  let timeoutMs: number;
  if (f.emulation) {
    if (f.device.kind !== "fifo")
      return no(
        `FASTFENCE_WATCHDOG_EMULATION=${f.emulation.mode} accepts only the lab's FIFO, and this is a ${f.device.kind === "char" ? "character device" : f.device.kind}`,
      );
    timeoutMs = f.emulation.timeoutMs;
  } else {
    if (f.device.kind !== "char")
      return no(
        `not a watchdog character device (a ${f.device.kind === "fifo" ? "FIFO" : f.device.kind === "file" ? "regular file" : "non-device file"}): not armed`,
      );
    if (!f.sysfs) return no("not a watchdog device name (watchdog or watchdogN): not armed");
    const { major, minor } = f.device;
    const legacy = f.sysfs.name === "watchdog0" && major === LEGACY.major && minor === LEGACY.minor;
    if (!legacy && f.sysfs.dev?.trim() !== `${major}:${minor}`)
      return no(
        `character device ${major}:${minor} is not /sys/class/watchdog/${f.sysfs.name} (${f.sysfs.dev?.trim() ?? "absent"}): not armed`,
      );
    const s = Number(f.sysfs.timeout?.trim());
    if (f.sysfs.timeout === undefined || !Number.isInteger(s) || s <= 0)
      return no(`/sys/class/watchdog/${f.sysfs.name}/timeout gives no timeout: not armed`);
    timeoutMs = s * 1000;
  }
  const differs = f.expected.find((e) => e.timeoutMs !== timeoutMs);
  if (differs)
    return no(
      `the device's timeout is ${timeoutMs} ms but ${differs.from} says ${differs.timeoutMs} ms; set the driver's timeout (e.g. softdog.soft_margin) or correct ${differs.from}`,
    );
  return { ok: true, timeoutMs };
}

const readOpt = (p: string) => readFile(p, "utf8").catch(() => undefined);

export interface OpenOptions {
  emulation?: { mode: WatchdogEmulation; timeoutMs: number };
  expected?: { timeoutMs: number; from: string }[];
  /** Default: node:fs stat. */
  stat?: StatDevice;
  /** Default /sys/class/watchdog. */
  sysfs?: string;
}

/**
 * Checks the path (deviceTimeout), then opens (and so arms) it. Non-blocking: a FIFO nobody
 * reads (the lab's timer not running) fails at once instead of hanging the agent.
 */
export async function openWatchdogDevice(path: string, o: OpenOptions = {}): Promise<WatchdogDevice> {
  let device: DeviceKind;
  try {
    device = await (o.stat ?? statDevice)(path);
  } catch (err) {
    throw new WatchdogUnavailableError(
      `cannot open watchdog ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
      err,
    );
  }
  const name = sysfsName(path);
  const root = o.sysfs ?? "/sys/class/watchdog";
  const sysfs =
    name && !o.emulation
      ? { name, dev: await readOpt(`${root}/${name}/dev`), timeout: await readOpt(`${root}/${name}/timeout`) }
      : undefined;
  const v = deviceTimeout({
    path,
    device,
    sysfs: sysfs && {
      name: sysfs.name,
      ...(sysfs.dev !== undefined ? { dev: sysfs.dev } : {}),
      ...(sysfs.timeout !== undefined ? { timeout: sysfs.timeout } : {}),
    },
    ...(o.emulation ? { emulation: o.emulation } : {}),
    expected: o.expected ?? [],
  });
  if (!v.ok) throw new WatchdogUnavailableError(v.reason);
  const timeoutMs = v.timeoutMs;
  let fh: FileHandle;
  try {
    fh = await open(path, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new WatchdogUnavailableError(
      `cannot open watchdog ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
      err,
    );
  }
  let closed = false;
  const write = async (s: string) => {
    if (closed) throw new WatchdogUnavailableError(`watchdog ${path} is closed`);
    try {
      await fh.write(s);
    } catch (err) {
      throw new WatchdogUnavailableError(
        `cannot write watchdog ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
        err,
      );
    }
  };
  return {
    timeoutMs,
    pet: () => write("1"),
    disarm: async () => {
      if (closed) return;
      await write("V");
      closed = true;
      await fh.close();
    },
  };
}
