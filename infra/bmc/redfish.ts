// Native Redfish BMC driver (DMTF Redfish over HTTPS, or HTTP when the URL says so).
// Discovers the ComputerSystem, its #ComputerSystem.Reset target and allowed reset types
// once, then reuses them and one keep-alive connection pool. Session auth (X-Auth-Token)
// when the service offers a SessionService, else HTTP basic. TLS is verified unless the
// settings say insecure. Power-off is ForceOff unless configured otherwise; status maps
// only PowerState exactly "Off" to "off" ("PoweringOff" is still on, S1).
// The HTTP transport is redfish-http.ts, the parsing of what discovery reads is
// redfish-discovery.ts; this module holds the driver, its session auth and power actions.
// Never puts the username, password or session token into an error, a log line or a
// target string.
import type { Logger } from "../log.ts";
import {
  BmcAuthError,
  BmcProtocolError,
  BmcUnsupportedError,
  deadline,
  type BmcCallOptions,
  type BmcDriver,
  type PowerState,
  type PowerStatus,
} from "./driver.ts";
import {
  onlySystemOf,
  resetActionOf,
  serviceRoot,
  sessionsPathOf,
  systemsPathOf,
  type Discovery,
} from "./redfish-discovery.ts";
import { RedfishHttp, type Deadline, type HttpResult } from "./redfish-http.ts";

export type RedfishOffType = "ForceOff" | "PowerOff" | "GracefulShutdown";

export interface RedfishOptions {
  /** Base URL: scheme, host and port (http: or https:). A path is taken as the system's URI when it points below /Systems/. */
  url: string;
  username: string;
  password: string;
  /** System id under /redfish/v1/Systems, or a full system URI path. Default: the only system. */
  systemId?: string;
  /** "auto" (default): session auth when a SessionService exists, else basic. */
  auth?: "auto" | "session" | "basic";
  /** Skip TLS verification. Only when explicitly configured. */
  insecure?: boolean;
  /** PEM CA bundle to verify the BMC's certificate against. */
  ca?: string | Buffer;
  /** ResetType used for off. Default ForceOff. */
  offType?: RedfishOffType;
  /** Extra request headers (never credentials). */
  log?: Logger;
  /** Keep-alive pool size. */
  maxSockets?: number;
}

/** Maps a Redfish PowerState to ours: exactly "Off" is off; anything transitional is still on. */
export function mapRedfishPowerState(raw: unknown): PowerState {
  if (raw === "Off") return "off";
  if (raw === "On" || raw === "PoweringOn" || raw === "PoweringOff" || raw === "Paused") return "on";
  return "unknown";
}

export class RedfishDriver implements BmcDriver {
  readonly kind = "redfish";
  readonly target: string;
  private readonly base: URL;
  private readonly opts: RedfishOptions;
  private readonly http: RedfishHttp;
  private disc: Discovery | undefined;
  private discovering: Promise<Discovery> | undefined;
  private token: string | undefined;
  private sessionUri: string | undefined;
  private useSession: boolean | undefined;
  private readonly explicitSystem: string | undefined;

  constructor(opts: RedfishOptions) {
    this.opts = opts;
    const u = new URL(opts.url);
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new BmcUnsupportedError(u.host, `Redfish URL scheme ${u.protocol} (want http: or https:)`);
    }
    let explicit = opts.systemId;
    if (!explicit && /\/Systems\/[^/]+/.test(u.pathname)) explicit = u.pathname.replace(/\/$/, "");
    if (explicit && !explicit.startsWith("/"))
      explicit = `/redfish/v1/Systems/${encodeURIComponent(explicit)}`;
    this.explicitSystem = explicit;
    this.base = new URL(`${u.protocol}//${u.host}`);
    this.target = `${this.base.origin}${explicit ?? "/redfish/v1"}`;
    this.http = new RedfishHttp({
      base: this.base,
      target: this.target,
      insecure: opts.insecure,
      ca: opts.ca,
      maxSockets: opts.maxSockets,
      authHeaders: () => this.authHeaders(),
    });
    if (opts.auth === "basic") this.useSession = false;
    if (opts.auth === "session") this.useSession = true;
  }

  /** Discovers the system and logs in ahead of time so a later off is one round trip. */
  async prepare(opts: BmcCallOptions): Promise<void> {
    const d = deadline(opts);
    try {
      await this.discover(d, opts);
      if (this.useSession && !this.token) await this.login(d, opts, this.disc?.sessionsPath);
    } finally {
      d.done();
    }
  }

  async status(opts: BmcCallOptions): Promise<PowerStatus> {
    const d = deadline(opts);
    try {
      const disc = await this.discover(d, opts);
      const r = await this.call("GET", disc.systemPath, undefined, d, opts);
      const raw = (r.body as { PowerState?: unknown } | undefined)?.PowerState;
      if (typeof raw !== "string") throw new BmcProtocolError(this.target, "system has no PowerState");
      return { state: mapRedfishPowerState(raw), raw };
    } finally {
      d.done();
    }
  }

  async off(opts: BmcCallOptions): Promise<void> {
    await this.reset(this.opts.offType ?? "ForceOff", [], opts);
  }

  async on(opts: BmcCallOptions): Promise<void> {
    await this.reset("On", ["ForceOn"], opts);
  }

  async cycle(opts: BmcCallOptions): Promise<void> {
    await this.reset("PowerCycle", ["ForceRestart"], opts);
  }

  async close(): Promise<void> {
    if (this.token && this.sessionUri) {
      const d = deadline({ timeoutMs: 2000 });
      try {
        await this.http.request("DELETE", this.sessionUri, undefined, d, { timeoutMs: 2000 });
      } catch {
        // best effort
      } finally {
        d.done();
      }
    }
    this.token = undefined;
    this.http.destroy();
  }

  private async reset(type: string, fallbacks: string[], opts: BmcCallOptions): Promise<void> {
    const d = deadline(opts);
    try {
      const disc = await this.discover(d, opts);
      let chosen = type;
      if (disc.allowed) {
        const ok = [type, ...fallbacks].find((t) => disc.allowed?.includes(t));
        if (!ok) {
          throw new BmcUnsupportedError(
            this.target,
            `ResetType ${type} not in AllowableValues [${disc.allowed.join(", ")}]`,
          );
        }
        chosen = ok;
      }
      const r = await this.call("POST", disc.resetTarget, { ResetType: chosen }, d, opts);
      if (r.status === 400 || r.status === 405 || r.status === 501) {
        throw new BmcUnsupportedError(this.target, `Reset ${chosen} refused with HTTP ${r.status}`);
      }
    } finally {
      d.done();
    }
  }

  private discover(d: Deadline, opts: BmcCallOptions): Promise<Discovery> {
    if (this.disc) return Promise.resolve(this.disc);
    if (!this.discovering) {
      this.discovering = this.doDiscover(d, opts).then(
        (disc) => {
          this.disc = disc;
          this.discovering = undefined;
          return disc;
        },
        (err: unknown) => {
          this.discovering = undefined;
          throw err;
        },
      );
    }
    return this.discovering;
  }

  private async doDiscover(d: Deadline, opts: BmcCallOptions): Promise<Discovery> {
    const root = serviceRoot(
      (await this.http.request("GET", "/redfish/v1/", undefined, d, opts)).body,
      this.target,
    );
    const sessionsPath = sessionsPathOf(root);
    if (this.useSession === undefined) this.useSession = sessionsPath !== undefined;
    if (this.useSession && !this.token) await this.login(d, opts, sessionsPath);

    let systemPath = this.explicitSystem;
    if (!systemPath) {
      const systems = systemsPathOf(root, this.target);
      systemPath = onlySystemOf((await this.call("GET", systems, undefined, d, opts)).body, this.target);
    }
    const sys = (await this.call("GET", systemPath, undefined, d, opts)).body;
    const { resetTarget, allowed } = resetActionOf(sys, systemPath, this.target);
    this.opts.log?.debug({ target: this.target, systemPath, resetTarget, allowed }, "redfish discovery");
    return { systemPath, resetTarget, allowed, sessionsPath };
  }

  private async login(d: Deadline, opts: BmcCallOptions, sessionsPath: string | undefined) {
    if (!sessionsPath) throw new BmcUnsupportedError(this.target, "no SessionService for session auth");
    const r = await this.http.request(
      "POST",
      sessionsPath,
      { UserName: this.opts.username, Password: this.opts.password },
      d,
      opts,
      true,
    );
    if (r.status === 401 || r.status === 403) throw new BmcAuthError(this.target);
    const tok = r.headers["x-auth-token"];
    if (r.status >= 300 || typeof tok !== "string") {
      throw new BmcProtocolError(this.target, `session login answered HTTP ${r.status} without a token`);
    }
    this.token = tok;
    const loc = r.headers.location;
    this.sessionUri = typeof loc === "string" ? new URL(loc, this.base).pathname : undefined;
  }

  /** An authenticated request: re-logs in once when a session token expired. */
  private async call(
    method: string,
    path: string,
    body: unknown,
    d: Deadline,
    opts: BmcCallOptions,
  ): Promise<HttpResult> {
    let r = await this.http.request(method, path, body, d, opts);
    if ((r.status === 401 || r.status === 403) && this.useSession && this.token) {
      this.token = undefined;
      await this.login(d, opts, this.disc?.sessionsPath ?? "/redfish/v1/SessionService/Sessions");
      r = await this.http.request(method, path, body, d, opts);
    }
    if (r.status === 401 || r.status === 403) throw new BmcAuthError(this.target);
    if (r.status >= 500) {
      throw new BmcProtocolError(this.target, `${method} ${path} answered HTTP ${r.status}`, {
        retriable: true,
      });
    }
    if (r.status === 404) throw new BmcUnsupportedError(this.target, `${method} ${path} answered HTTP 404`);
    return r;
  }

  /** The session token once logged in; basic auth unless session auth is (or may be) on. */
  private authHeaders(): Record<string, string> {
    if (this.useSession && this.token) return { "X-Auth-Token": this.token };
    if (!this.useSession)
      return {
        Authorization:
          "Basic " + Buffer.from(`${this.opts.username}:${this.opts.password}`).toString("base64"),
      };
    return {};
  }
}
