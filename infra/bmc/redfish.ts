// Native Redfish BMC driver (DMTF Redfish over HTTPS, or HTTP when the URL says so).
// Discovers the ComputerSystem, its #ComputerSystem.Reset target and allowed reset types
// once, then reuses them and one keep-alive connection pool. Session auth (X-Auth-Token)
// when the service offers a SessionService, else HTTP basic. TLS is verified unless the
// settings say insecure. Power-off is ForceOff unless configured otherwise; status maps
// only PowerState exactly "Off" to "off" ("PoweringOff" is still on, S1).
// Never puts the username, password or session token into an error, a log line or a
// target string.
import http from "node:http";
import https from "node:https";
import { CancelledError } from "../../core/errors.ts";
import type { Logger } from "../log.ts";
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
  type PowerState,
  type PowerStatus,
} from "./driver.ts";

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

interface Discovery {
  systemPath: string;
  resetTarget: string;
  allowed: string[] | undefined;
  sessionsPath: string | undefined;
}

interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EPIPE",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
]);

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
  private readonly agent: http.Agent;
  private readonly isHttps: boolean;
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
    this.isHttps = u.protocol === "https:";
    let explicit = opts.systemId;
    if (!explicit && /\/Systems\/[^/]+/.test(u.pathname)) explicit = u.pathname.replace(/\/$/, "");
    if (explicit && !explicit.startsWith("/"))
      explicit = `/redfish/v1/Systems/${encodeURIComponent(explicit)}`;
    this.explicitSystem = explicit;
    this.base = new URL(`${u.protocol}//${u.host}`);
    this.target = `${this.base.origin}${explicit ?? "/redfish/v1"}`;
    this.agent = this.isHttps
      ? new https.Agent({
          keepAlive: true,
          maxSockets: opts.maxSockets ?? 4,
          rejectUnauthorized: !opts.insecure,
          ...(opts.ca ? { ca: opts.ca } : {}),
        })
      : new http.Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 4 });
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
        await this.raw("DELETE", this.sessionUri, undefined, d, { timeoutMs: 2000 });
      } catch {
        // best effort
      } finally {
        d.done();
      }
    }
    this.token = undefined;
    this.agent.destroy();
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

  private discover(d: ReturnType<typeof deadline>, opts: BmcCallOptions): Promise<Discovery> {
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

  private async doDiscover(d: ReturnType<typeof deadline>, opts: BmcCallOptions): Promise<Discovery> {
    const root = (await this.raw("GET", "/redfish/v1/", undefined, d, opts)).body as Record<string, unknown>;
    if (!root || typeof root !== "object")
      throw new BmcProtocolError(this.target, "service root is not JSON");
    const link = (o: unknown): string | undefined => {
      const id = (o as { "@odata.id"?: unknown } | undefined)?.["@odata.id"];
      return typeof id === "string" ? id : undefined;
    };
    const sessionsPath =
      link((root.Links as Record<string, unknown> | undefined)?.Sessions) ??
      (link(root.SessionService) ? `${link(root.SessionService)!.replace(/\/$/, "")}/Sessions` : undefined);
    if (this.useSession === undefined) this.useSession = sessionsPath !== undefined;
    if (this.useSession && !this.token) await this.login(d, opts, sessionsPath);

    let systemPath = this.explicitSystem;
    if (!systemPath) {
      const systems = link(root.Systems);
      if (!systems) throw new BmcUnsupportedError(this.target, "service root has no Systems collection");
      const coll = (await this.call("GET", systems, undefined, d, opts)).body as { Members?: unknown[] };
      const members = (coll?.Members ?? []).map(link).filter((x): x is string => !!x);
      if (members.length !== 1) {
        throw new BmcUnsupportedError(
          this.target,
          `Systems collection has ${members.length} members; configure the system id`,
        );
      }
      systemPath = members[0]!;
    }
    const sys = (await this.call("GET", systemPath, undefined, d, opts)).body as Record<string, unknown>;
    const action = (sys?.Actions as Record<string, unknown> | undefined)?.["#ComputerSystem.Reset"] as
      Record<string, unknown> | undefined;
    const target = action?.target;
    if (typeof target !== "string") {
      throw new BmcUnsupportedError(this.target, `${systemPath} has no #ComputerSystem.Reset action`);
    }
    const allowedRaw = action?.["ResetType@Redfish.AllowableValues"];
    const allowed = Array.isArray(allowedRaw)
      ? allowedRaw.filter((x): x is string => typeof x === "string")
      : undefined;
    this.opts.log?.debug(
      { target: this.target, systemPath, resetTarget: target, allowed },
      "redfish discovery",
    );
    return { systemPath, resetTarget: target, allowed, sessionsPath };
  }

  private async login(
    d: ReturnType<typeof deadline>,
    opts: BmcCallOptions,
    sessionsPath: string | undefined,
  ) {
    if (!sessionsPath) throw new BmcUnsupportedError(this.target, "no SessionService for session auth");
    const r = await this.raw(
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
    d: ReturnType<typeof deadline>,
    opts: BmcCallOptions,
  ): Promise<HttpResult> {
    let r = await this.raw(method, path, body, d, opts);
    if ((r.status === 401 || r.status === 403) && this.useSession && this.token) {
      this.token = undefined;
      await this.login(d, opts, this.disc?.sessionsPath ?? "/redfish/v1/SessionService/Sessions");
      r = await this.raw(method, path, body, d, opts);
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

  private async raw(
    method: string,
    path: string,
    body: unknown,
    d: ReturnType<typeof deadline>,
    opts: BmcCallOptions,
    noAuth = false,
  ): Promise<HttpResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(method, path, body, d, noAuth);
      } catch (err) {
        const e = err as NodeJS.ErrnoException & { reused?: boolean };
        // A kept-alive socket the server closed meanwhile: retry once on a fresh one.
        if (attempt === 0 && e.reused && (e.code === "ECONNRESET" || e.code === "EPIPE")) continue;
        throw this.mapError(err, `${method} ${path}`, d, opts);
      }
    }
  }

  private mapError(err: unknown, what: string, d: ReturnType<typeof deadline>, opts: BmcCallOptions): Error {
    if (err instanceof BmcError) return err;
    if (d.timedOut()) return new BmcTimeoutError(this.target, what, opts.timeoutMs);
    if (opts.signal?.aborted) return new CancelledError(`BMC ${what}`, opts.signal.reason);
    const code = (err as NodeJS.ErrnoException)?.code ?? "";
    if (UNREACHABLE_CODES.has(code)) return new BmcUnreachableError(this.target, code);
    if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL/.test(code)) {
      return new BmcProtocolError(this.target, `TLS verification failed (${code}); configure a CA bundle`, {
        retriable: false,
      });
    }
    return new BmcUnreachableError(this.target, code || "connection failed");
  }

  private once(
    method: string,
    path: string,
    body: unknown,
    d: ReturnType<typeof deadline>,
    noAuth: boolean,
  ): Promise<HttpResult> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { Accept: "application/json", "OData-Version": "4.0" };
    if (payload) {
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(payload.length);
    }
    if (!noAuth) {
      if (this.useSession && this.token) headers["X-Auth-Token"] = this.token;
      else if (!this.useSession) {
        headers.Authorization =
          "Basic " + Buffer.from(`${this.opts.username}:${this.opts.password}`).toString("base64");
      }
    }
    const mod = this.isHttps ? https : http;
    return new Promise<HttpResult>((resolve, reject) => {
      const req = mod.request(
        {
          protocol: this.base.protocol,
          hostname: this.base.hostname.replace(/^\[|\]$/g, ""),
          port: this.base.port || (this.isHttps ? 443 : 80),
          method,
          path,
          headers,
          agent: this.agent,
          signal: d.signal,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            let parsed: unknown = undefined;
            if (text.length) {
              try {
                parsed = JSON.parse(text);
              } catch {
                if ((res.statusCode ?? 0) < 300) {
                  return reject(new BmcProtocolError(this.target, `${method} ${path}: response is not JSON`));
                }
              }
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed });
          });
        },
      );
      req.on("error", (err: NodeJS.ErrnoException & { reused?: boolean }) => {
        err.reused = req.reusedSocket;
        reject(err);
      });
      req.end(payload);
    });
  }
}
