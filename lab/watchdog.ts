// The lab's emulated watchdog, one per node: a host-side timer in the lab controller,
// outside the node's PID namespace, petted through a FIFO in the node's run dir that the
// node's watchdog agent opens as its device (infra/watchdog/device.ts). It behaves as the
// kernel's: the first write arms it, every write pets it, a "V" disarms it (the agent
// writes it only on a graceful stop, right before closing); a close without "V" leaves it
// armed. `lab hang` stops the petter but not this timer, and when it expires the node dies
// as in a silent crash (the lab's "reset": its link down, every process killed; it stays
// down and silent until its BMC powers it off and on again, lab/link-state.ts). The agent accepts the FIFO only in the explicit emulation mode
// (FASTFENCE_WATCHDOG_EMULATION=lab-fifo, with the timeout given), which labWatchdogConfig
// sets and no shipped overlay can. Never touches the machine's real /dev/watchdog.
import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { join } from "node:path";
import type { WatchdogAgentConfig } from "../source/watchdog-agent.ts";
import { crash, type FaultTarget } from "./faults.ts";
import type { LabNode } from "./types.ts";

/** The lab's watchdog settings (docs/lab.md): short, so a test sees a reset in seconds. */
export const LAB_WATCHDOG = {
  /** The emulated device's timeout, ms. */
  timeoutMs: 5_000,
  /** The agent pets while its last acknowledged heartbeat renewal is at most this old, ms. */
  renewGraceMs: 2_000,
  /** How often the agent pets, ms. */
  petIntervalMs: 500,
} as const;

/**
 * The lab FencingPolicy's watchdog level (with `lab up --watchdog`), after each node's BMC
 * level: the agents' grace, and a margin of 1.5 s (the emulated timer checks every 50 ms and
 * shares the machine's clock with fence, so it only covers scheduling and the heartbeat
 * acknowledgement's delay). A power-loss is released 2 + 5 + 1.5 = 8.5 s after the node's
 * last renewal at the earliest.
 */
export const LAB_WATCHDOG_LEVEL = { renewGraceMs: LAB_WATCHDOG.renewGraceMs, marginMs: 1_500 } as const;

export class EmulatedWatchdog {
  readonly path: string;
  readonly timeoutMs: number;
  private readonly onExpire: () => void;
  private fd: number | undefined;
  private socket: Socket | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastPetAt: number | undefined;
  private disarmed = false;

  constructor(path: string, timeoutMs: number, onExpire: () => void) {
    this.path = path;
    this.timeoutMs = timeoutMs;
    this.onExpire = onExpire;
  }

  /** Makes the FIFO and starts reading it (read-write, so a writer's close is no EOF). */
  start(): void {
    rmSync(this.path, { force: true });
    execFileSync("mkfifo", ["-m", "0600", this.path]);
    this.fd = openSync(this.path, constants.O_RDWR | constants.O_NONBLOCK);
    this.socket = new Socket({ fd: this.fd, readable: true, writable: false });
    this.socket.on("data", (d: Buffer) => this.onWrite(d));
    this.socket.on("error", () => undefined);
    this.timer = setInterval(() => this.check(), 50);
  }

  /** Whether it is armed now (petted at least once and not disarmed since). */
  armed(): boolean {
    return this.lastPetAt !== undefined && !this.disarmed;
  }

  private onWrite(d: Buffer): void {
    // As the kernel: "V" last means a clean close is coming; any later write re-arms.
    this.disarmed = d[d.length - 1] === 0x56;
    if (!this.disarmed) this.lastPetAt = Date.now();
  }

  private check(): void {
    if (!this.armed() || Date.now() - this.lastPetAt! <= this.timeoutMs) return;
    this.lastPetAt = undefined; // fires once; the node's next boot arms it again
    this.onExpire();
  }

  /**
   * The machine's power was switched off or on: as a real watchdog (it is part of the
   * machine), it is no longer armed; the next boot's agent arms it with its first write.
   * Without this, a timer armed before a fence's power-off fires after the power-on and
   * kills the freshly booted node.
   */
  powerReset(): void {
    this.lastPetAt = undefined;
    this.disarmed = false;
  }

  stop(): void {
    clearInterval(this.timer);
    this.socket?.destroy();
    if (this.fd !== undefined)
      try {
        closeSync(this.fd);
      } catch {
        // the socket closed it
      }
    rmSync(this.path, { force: true });
  }
}

/** Where a node's agent finds its emulated device. */
const fifoOf = (x: LabNode) => join(x.dir, "watchdog");

/** The node agent's watchdog config for the lab's emulated device. */
export function labWatchdogConfig(x: LabNode): WatchdogAgentConfig {
  return { devicePath: fifoOf(x), ...LAB_WATCHDOG, emulation: "lab-fifo" };
}

/** One started emulated watchdog per node, by node name; expiry is a silent crash (noted "watchdog-reset"). */
export function startLabWatchdogs(
  lab: FaultTarget,
  log: (line: string) => void,
): Map<string, EmulatedWatchdog> {
  const started = lab.nodes.map((x) => {
    const wd = new EmulatedWatchdog(fifoOf(x), LAB_WATCHDOG.timeoutMs, () => {
      log(`watchdog of ${x.name} expired: its link down, its processes killed (watchdog-reset)`);
      void crash(lab, x.name, "watchdog-reset");
    });
    wd.start();
    return [x.name, wd] as const;
  });
  return new Map(started);
}
