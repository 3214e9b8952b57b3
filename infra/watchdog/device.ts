// The node's watchdog device as Linux offers it (/dev/watchdog, hardware or softdog; the
// lab gives each node a FIFO read by a host-side timer with the same semantics, see
// lab/watchdog.ts): opening it arms it, every write pets it, writing the magic character
// "V" and then closing disarms it. A close without "V" — a crash, SIGKILL, a hung process
// the kernel never gets to run — leaves it armed, and the node resets when it expires.
// The timeout is the device's: read from sysfs for a real device (Node cannot issue the
// WDIOC_SETTIMEOUT ioctl; set it with the driver, e.g. softdog's soft_margin), or the
// configured value where sysfs says nothing (the lab's FIFO). It never opens any path but
// the one it is given and never writes "V" except in disarm().
import { constants } from "node:fs";
import { open, readFile, type FileHandle } from "node:fs/promises";
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

/** The device's timeout from sysfs (/sys/class/watchdog/<name>/timeout, seconds), if it says. */
export async function sysfsTimeoutMs(
  path: string,
  sysfs = "/sys/class/watchdog",
): Promise<number | undefined> {
  const name = basename(path) === "watchdog" ? "watchdog0" : basename(path);
  try {
    const s = Number((await readFile(`${sysfs}/${name}/timeout`, "utf8")).trim());
    return Number.isInteger(s) && s > 0 ? s * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Opens (and so arms) the device. Non-blocking: a FIFO nobody reads (the lab's timer not
 * running) fails at once instead of hanging the agent.
 */
export async function openWatchdogDevice(
  path: string,
  configuredTimeoutMs?: number,
  /** The node's own setting (Node annotation): the device must have it, or it is used where sysfs says none. */
  nodeTimeoutMs?: number,
  sysfs?: string,
): Promise<WatchdogDevice> {
  const fromSysfs = await sysfsTimeoutMs(path, sysfs);
  if (fromSysfs !== undefined && nodeTimeoutMs !== undefined && fromSysfs !== nodeTimeoutMs)
    throw new WatchdogUnavailableError(
      `watchdog ${path}: the device's timeout is ${fromSysfs} ms (sysfs) but the node's fastfence.io/watchdog-timeout-ms says ${nodeTimeoutMs} ms; set the driver's timeout (e.g. softdog.soft_margin) or the annotation`,
    );
  const timeoutMs = fromSysfs ?? nodeTimeoutMs ?? configuredTimeoutMs;
  if (timeoutMs === undefined)
    throw new WatchdogUnavailableError(
      `watchdog ${path}: sysfs gives no timeout and neither the node's fastfence.io/watchdog-timeout-ms nor FASTFENCE_WATCHDOG_TIMEOUT_MS is set`,
    );
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
