// The power executor's BMC drivers, one per slot (a level's address, credentials Secret
// and options), each built from the credentials one action read from that Secret. A slot
// keeps its driver (Redfish session, keep-alive sockets, IPMI session) while the
// credentials read for the next action are the same; when they differ (the Secret was
// rotated, or fixed after a wrong password) the slot gets a new driver and the old one is
// closed (session logged out, sockets destroyed) once the last action using it is done,
// never under a running action. Credentials are compared by an HMAC under a key made for
// this pool, so neither a slot key nor an entry holds them in a comparable or printable
// form; the drivers themselves hold them, as they must. It never reads a Secret (the
// executor does, infra/fence/power.ts), never logs a credential, and never lets a driver
// built from old credentials serve an action that read new ones.
import { createHmac, randomBytes } from "node:crypto";
import type { BmcCredentials } from "../bmc/credentials.ts";
import type { BmcDriver } from "../bmc/driver.ts";

/** One action's hold on a driver; `release` when the action is done with it (idempotent). */
export interface DriverUse {
  driver: BmcDriver;
  /** True when this use built the driver (first use of the slot, or new credentials). */
  fresh: boolean;
  /** True when building it replaced a driver built from other credentials. */
  replaced: boolean;
  release(): void;
}

interface Entry {
  fingerprint: string;
  driver: BmcDriver;
  users: number;
  retired: boolean;
}

export class DriverPool {
  private readonly entries = new Map<string, Entry>();
  private readonly key = randomBytes(32);

  /** Fingerprint of credentials: an HMAC under this pool's own random key, never the values. */
  private fingerprint(c: BmcCredentials): string {
    // "username" never contains NUL (credentials.ts refuses it), so the pair is unambiguous.
    return createHmac("sha256", this.key).update(`${c.username}\0${c.password}`).digest("base64");
  }

  /**
   * The driver of `slot` for these credentials: the slot's own when it was built from the
   * same ones, else a new one from `build` (which may throw; the slot then keeps what it
   * had). A replaced driver is closed once no action uses it any more.
   */
  use(slot: string, creds: BmcCredentials, build: (creds: BmcCredentials) => BmcDriver): DriverUse {
    const fp = this.fingerprint(creds);
    let e = this.entries.get(slot);
    let fresh = false;
    let replaced = false;
    if (!e || e.fingerprint !== fp) {
      const driver = build(creds);
      if (e) {
        this.retire(e);
        replaced = true;
      }
      e = { fingerprint: fp, driver, users: 0, retired: false };
      this.entries.set(slot, e);
      fresh = true;
    }
    const entry = e;
    entry.users++;
    let released = false;
    return {
      driver: entry.driver,
      fresh,
      replaced,
      release: () => {
        if (released) return;
        released = true;
        entry.users--;
        if (entry.retired && entry.users === 0) closeQuietly(entry.driver);
      },
    };
  }

  private retire(e: Entry): void {
    e.retired = true;
    if (e.users === 0) closeQuietly(e.driver);
  }
}

function closeQuietly(d: BmcDriver): void {
  // close is best effort by contract; a rejection must not become an unhandled one
  void d.close?.().catch(() => undefined);
}
