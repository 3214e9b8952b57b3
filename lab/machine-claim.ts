// One lab per machine. The lab's names are machine-wide: the bridge fflab0, the subnet
// 10.77.0.0/24, the namespaces fflab-<node>, the veths fflv-<n> and fixed ports. A second
// lab (another checkout, a bench in a worktree, a CI run) would fail half-way through
// making them, and its clean-up, which removes what it recorded, would take the first
// lab's network and node processes with it. So a lab controller first claims the machine
// by listening on an abstract Unix socket: the kernel lets one process hold that name (in
// this network namespace, the same scope as the lab's links) and frees it when the process
// dies, so a claim never goes stale and needs no clean-up. Anyone may connect to ask who
// holds it. Never takes over or removes another process's claim; never touches the network.
import { createConnection, createServer, type Server } from "node:net";

/** The abstract socket's name (Linux: a leading NUL byte, no file on disk). */
const CLAIM_NAME = "\0fastfence-lab-claim";

/** Who holds the machine, as the holder itself reports it. */
export interface ClaimHolder {
  pid: number;
  /** The checkout the holding lab runs from. */
  checkout: string;
  /** When it claimed the machine (ISO time). */
  since: string;
}

/** Another live process holds the machine's lab. Nothing was made or removed. */
export class LabBusyError extends Error {
  readonly code = "FF_LAB_BUSY";
  readonly holder: ClaimHolder | undefined;
  constructor(holder: ClaimHolder | undefined) {
    super(
      `lab: another lab is running on this machine (${
        holder
          ? `pid ${holder.pid}, checkout ${holder.checkout}, since ${holder.since}`
          : "its holder did not say who it is"
      }). The lab's bridge, addresses and namespaces are machine-wide, so one lab runs at a time: ` +
        `wait for it to end, or stop it with "fastfence lab down" in that checkout`,
    );
    this.name = "LabBusyError";
    this.holder = holder;
  }
}

let held: Server | undefined;

/**
 * Claim the machine for this process's lab. Idempotent within a process. Throws
 * LabBusyError, naming the holder, when another live process holds it.
 */
export async function claimMachine(checkout: string): Promise<void> {
  if (held) return;
  const me: ClaimHolder = { pid: process.pid, checkout, since: new Date().toISOString() };
  const server = createServer((c) => {
    c.on("error", () => undefined);
    c.end(`${JSON.stringify(me)}\n`);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(CLAIM_NAME, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") throw new LabBusyError(await claimHolder());
    throw err;
  }
  server.unref(); // the claim never keeps a process alive; it ends with it
  held = server;
}

/** Give the claim up (idempotent). A process that dies gives it up without this. */
export async function releaseMachine(): Promise<void> {
  const s = held;
  held = undefined;
  if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
}

/** Who holds the claim, or undefined if nobody does (or the holder did not answer within `timeoutMs`). */
export function claimHolder(timeoutMs = 2000): Promise<ClaimHolder | undefined> {
  return new Promise((resolve) => {
    let buf = "";
    const c = createConnection(CLAIM_NAME);
    const done = (h: ClaimHolder | undefined) => {
      clearTimeout(timer);
      c.destroy();
      resolve(h);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    c.on("data", (d: Buffer) => (buf += d.toString()));
    c.on("end", () => {
      try {
        done(JSON.parse(buf) as ClaimHolder);
      } catch {
        done(undefined);
      }
    });
    c.on("error", () => done(undefined));
  });
}
