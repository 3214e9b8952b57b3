// Native IPMI v2.0 (RMCP+, lanplus) BMC driver: keeps one authenticated, encrypted session
// per BMC and reuses it for status polls (a fresh one after 10 s idle); reopens it once when the BMC stops answering on
// it (session timed out, BMC restarted). Power off = Chassis Control "power down"; status =
// Get Chassis Status bit 0. Calls on one driver are serialised (one session, one exchange
// at a time). Never reveals the credentials in errors, logs or the target string.
import { CancelledError } from "../../../core/errors.ts";
import type { Logger } from "../../log.ts";
import {
  BmcAuthError,
  BmcError,
  BmcProtocolError,
  BmcTimeoutError,
  BmcUnreachableError,
  BmcUnsupportedError,
  deadline,
  type BmcCallOptions,
  type BmcDriver,
  type PowerStatus,
} from "../driver.ts";
import * as chassisControl from "./messages/chassisControl/index.ts";
import { IpmiSession, type IpmiSessionOptions } from "./session.ts";
import { IpmiSessionError } from "./transport.ts";
import { IpmiWireError } from "./wire.ts";

export interface IpmiDriverOptions {
  host: string;
  port?: number;
  username: string;
  password: string;
  cipherSuite?: 3 | 17;
  privilege?: "operator" | "admin";
  firstRetryMs?: number;
  maxRetryMs?: number;
  /**
   * A fresh session's BMC that sends back nothing at all for this long is unreachable, ms.
   * Default NO_REPLY_MS. Lower moves a round off a dead BMC (one that died with its node)
   * sooner; too low for the network fails a live BMC whose first reply is late, and the
   * round goes on to its next level without it.
   */
  noReplyMs?: number;
  log?: Logger;
  onPacket?: IpmiSessionOptions["onPacket"];
}

/**
 * Default of IpmiDriverOptions.noReplyMs: about five retransmits (200, 400, 800 ms...)
 * without one datagram back. A BMC on the management LAN answers its first datagram in
 * milliseconds; one that died with its node never does.
 */
export const NO_REPLY_MS = 2000;

/** Budget for a command on a kept session before it is presumed dead and reopened. */
const REUSE_PROBE_MS = 1500;
/**
 * A kept session idle for longer than this is not reused: BMCs drop idle sessions (the
 * IPMI default is 60 s, some use 30 s or less, ipmi_sim's is shorter still) and a dead one
 * costs REUSE_PROBE_MS before the reopen, while a fresh session costs four round trips.
 * Status polls during a fence keep it well inside this.
 */
const IDLE_REOPEN_MS = 10_000;

/** Completion codes that mean "the BMC cannot do this". */
const UNSUPPORTED_CC = new Set([0xc1, 0xc9, 0xcc, 0xd5, 0xd6]);
/** Completion codes that mean "not allowed with this session". */
const PRIV_CC = new Set([0xd4]);

export class IpmiDriver implements BmcDriver {
  readonly kind = "ipmi";
  readonly target: string;
  private readonly opts: IpmiDriverOptions;
  private session: IpmiSession | undefined;
  /** When the kept session last answered (ms since epoch); see IDLE_REOPEN_MS. */
  private lastUsedAt = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(opts: IpmiDriverOptions) {
    this.opts = opts;
    const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
    this.target = `ipmi://${host}:${opts.port ?? 623}`;
  }

  /** Opens the session ahead of time so a later off is one round trip. */
  async prepare(opts: BmcCallOptions): Promise<void> {
    await this.withSession(opts, "open session", async () => undefined);
  }

  async status(opts: BmcCallOptions): Promise<PowerStatus> {
    return this.withSession(opts, "get chassis status", async (s, signal) => {
      const st = await s.chassisStatus(signal);
      if (st.completionCode !== 0) throw this.ccError("Get Chassis Status", st.completionCode);
      return { state: st.powerOn ? "on" : "off", raw: st.powerOn ? "power on" : "power off" };
    });
  }

  off(opts: BmcCallOptions): Promise<void> {
    return this.control(chassisControl.Control.POWER_DOWN, "power down", opts);
  }

  on(opts: BmcCallOptions): Promise<void> {
    return this.control(chassisControl.Control.POWER_UP, "power up", opts);
  }

  cycle(opts: BmcCallOptions): Promise<void> {
    return this.control(chassisControl.Control.POWER_CYCLE, "power cycle", opts);
  }

  async close(): Promise<void> {
    const s = this.session;
    this.session = undefined;
    await s?.close();
  }

  private control(code: number, what: string, opts: BmcCallOptions): Promise<void> {
    return this.withSession(opts, `chassis control ${what}`, async (s, signal) => {
      const r = await s.command(
        chassisControl.NETFN,
        chassisControl.CMD,
        chassisControl.encode(code),
        signal,
      );
      if (r.completionCode !== 0) throw this.ccError(`Chassis Control ${what}`, r.completionCode);
    });
  }

  private ccError(what: string, cc: number): BmcError {
    const hex = `0x${cc.toString(16)}`;
    if (PRIV_CC.has(cc)) return new BmcAuthError(this.target);
    if (UNSUPPORTED_CC.has(cc))
      return new BmcUnsupportedError(this.target, `${what} not supported (cc ${hex})`);
    return new BmcProtocolError(this.target, `${what} failed (cc ${hex})`);
  }

  private withSession<T>(
    opts: BmcCallOptions,
    what: string,
    fn: (s: IpmiSession, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const run = async () => {
      const d = deadline(opts);
      try {
        for (let attempt = 0; ; attempt++) {
          if (this.session?.active && Date.now() - this.lastUsedAt > IDLE_REOPEN_MS) {
            const idle = this.session;
            this.session = undefined;
            void idle.close(0);
          }
          const fresh = !this.session?.active;
          try {
            if (fresh) {
              await this.session?.close(0);
              this.session = new IpmiSession({
                host: this.opts.host,
                port: this.opts.port ?? 623,
                username: this.opts.username,
                password: this.opts.password,
                cipherSuite: this.opts.cipherSuite,
                privilege: this.opts.privilege === "operator" ? 3 : 4,
                firstRetryMs: this.opts.firstRetryMs,
                maxRetryMs: this.opts.maxRetryMs,
                noReplyMs: this.opts.noReplyMs ?? NO_REPLY_MS,
                onPacket: this.opts.onPacket,
              });
              try {
                await this.session.open(d.signal);
              } catch (err) {
                const s = this.session;
                this.session = undefined;
                await s.close(0);
                throw err;
              }
            }
            if (fresh) {
              const r = await fn(this.session!, d.signal);
              this.lastUsedAt = Date.now();
              return r;
            }
            // A reused session may have died (BMC restarted, idle timeout): give it a short
            // budget, then start a fresh session within the caller's deadline.
            const probe = AbortSignal.any([d.signal, AbortSignal.timeout(REUSE_PROBE_MS)]);
            const r = await fn(this.session!, probe);
            this.lastUsedAt = Date.now();
            return r;
          } catch (err) {
            if (
              !fresh &&
              attempt === 0 &&
              err instanceof IpmiSessionError &&
              err.kind === "aborted" &&
              !d.signal.aborted
            ) {
              const s = this.session;
              this.session = undefined;
              void s?.close(0);
              continue;
            }
            throw this.mapError(err, what, d, opts);
          }
        }
      } finally {
        d.done();
      }
    };
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => undefined);
    return p;
  }

  private mapError(err: unknown, what: string, d: ReturnType<typeof deadline>, opts: BmcCallOptions): Error {
    if (err instanceof BmcError) return err;
    if (opts.signal?.aborted) return new CancelledError(`BMC ${what}`, opts.signal.reason);
    if (err instanceof IpmiSessionError) {
      // the session is in an unknown state after any failure: start over next time
      const s = this.session;
      this.session = undefined;
      void s?.close(0);
      switch (err.kind) {
        case "auth":
          return new BmcAuthError(this.target, undefined);
        case "unsupported":
          return new BmcUnsupportedError(this.target, err.message);
        case "unreachable":
          return new BmcUnreachableError(this.target, "ICMP port unreachable");
        case "no-reply":
          return new BmcUnreachableError(this.target, `${what}: ${err.message}`);
        case "aborted":
          return d.timedOut()
            ? new BmcUnreachableError(this.target, `no reply to ${what} within ${opts.timeoutMs} ms`)
            : new BmcTimeoutError(this.target, what, opts.timeoutMs);
        default:
          return new BmcProtocolError(this.target, err.message);
      }
    }
    if (err instanceof IpmiWireError) return new BmcProtocolError(this.target, err.message);
    return new BmcProtocolError(this.target, `${what}: unexpected failure`, { cause: err });
  }
}
