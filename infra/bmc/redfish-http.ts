// The Redfish driver's HTTP transport: one keep-alive connection pool per BMC (TLS
// verified unless configured insecure, optional CA bundle), JSON requests and answers,
// one retry when a kept-alive socket turns out closed, and socket/TLS/deadline failures
// mapped to the typed BMC errors. It knows no Redfish resources and no auth scheme: the
// driver (redfish.ts) supplies the auth headers per request. Never puts a header, a
// credential or a body into an error or a log line.
import http from "node:http";
import https from "node:https";
import { CancelledError } from "../../core/errors.ts";
import {
  BmcError,
  BmcProtocolError,
  BmcTimeoutError,
  BmcUnreachableError,
  type BmcCallOptions,
  type deadline,
} from "./driver.ts";

export type Deadline = ReturnType<typeof deadline>;

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface RedfishHttpOptions {
  /** Scheme, host and port of the BMC (http: or https:). */
  base: URL;
  /** Secret-free target for errors. */
  target: string;
  insecure?: boolean;
  ca?: string | Buffer;
  maxSockets?: number;
  /** Auth headers for a request (session token or basic auth); called per request sent. */
  authHeaders: () => Record<string, string>;
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

export class RedfishHttp {
  private readonly base: URL;
  private readonly target: string;
  private readonly isHttps: boolean;
  private readonly agent: http.Agent;
  private readonly authHeaders: () => Record<string, string>;

  constructor(opts: RedfishHttpOptions) {
    this.base = opts.base;
    this.target = opts.target;
    this.authHeaders = opts.authHeaders;
    this.isHttps = opts.base.protocol === "https:";
    this.agent = this.isHttps
      ? new https.Agent({
          keepAlive: true,
          maxSockets: opts.maxSockets ?? 4,
          rejectUnauthorized: !opts.insecure,
          ...(opts.ca ? { ca: opts.ca } : {}),
        })
      : new http.Agent({ keepAlive: true, maxSockets: opts.maxSockets ?? 4 });
  }

  /**
   * One request (with the auth headers unless `noAuth`); a kept-alive socket the server
   * closed meanwhile is retried once on a fresh one. Failures are typed BMC errors.
   */
  async request(
    method: string,
    path: string,
    body: unknown,
    d: Deadline,
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

  /** Closes every pooled connection. */
  destroy(): void {
    this.agent.destroy();
  }

  private mapError(err: unknown, what: string, d: Deadline, opts: BmcCallOptions): Error {
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
    d: Deadline,
    noAuth: boolean,
  ): Promise<HttpResult> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { Accept: "application/json", "OData-Version": "4.0" };
    if (payload) {
      headers["Content-Type"] = "application/json";
      headers["Content-Length"] = String(payload.length);
    }
    if (!noAuth) Object.assign(headers, this.authHeaders());
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
