// A minimal REST client for a harness API server, over node:https with the admin client
// cert: one JSON request at a time (method, path, body), answering the status code and
// the parsed body, and a typed KubeRestError for a status the caller did not expect. The
// shared control plane's snapshot and reset use it for what @kubernetes/client-node has
// no generic call for (aggregated discovery, any resource by its path, /finalize). It
// only talks to the server it is given and never logs a body or a credential.
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { EnvError } from "./base.ts";

/** PEM files of the API server's CA and of an admin client cert. */
export interface RestCredentials {
  caCert: string;
  adminCert: string;
  adminKey: string;
}

export interface RestResponse {
  status: number;
  /** Parsed JSON, or undefined for an empty or non-JSON body. */
  body: unknown;
}

/** An API server answered a status the caller did not expect (or did not answer). */
export class KubeRestError extends EnvError {
  /** The HTTP status, 0 when there was no answer. */
  readonly status: number;
  readonly method: string;
  readonly path: string;
  constructor(
    method: string,
    path: string,
    status: number,
    detail: string,
    options: { cause?: unknown } = {},
  ) {
    super(`${method} ${path}: ${status === 0 ? "no answer" : `HTTP ${status}`} (${detail})`, options);
    this.status = status;
    this.method = method;
    this.path = path;
  }
}

/** The `message` of a Kubernetes Status body, for error reports only. */
function statusMessage(body: unknown): string {
  const m = (body as { message?: unknown } | undefined)?.message;
  return typeof m === "string" ? m : "no message";
}

export class KubeRest {
  private readonly agent: Agent;
  private readonly base: URL;

  constructor(server: string, creds: RestCredentials, opts: { timeoutMs?: number } = {}) {
    this.base = new URL(server);
    this.agent = new Agent({
      keepAlive: true,
      maxSockets: 8,
      ca: readFileSync(creds.caCert),
      cert: readFileSync(creds.adminCert),
      key: readFileSync(creds.adminKey),
      timeout: opts.timeoutMs ?? 30_000,
    });
  }

  /** Any request; resolves with whatever status the server answered. */
  request(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<RestResponse> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.base.hostname,
          port: this.base.port,
          method,
          path,
          agent: this.agent,
          headers: {
            accept: "application/json",
            ...(payload ? { "content-type": "application/json", "content-length": payload.length } : {}),
            ...headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", (err) =>
            reject(new KubeRestError(method, path, 0, "response failed", { cause: err })),
          );
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            let parsed: unknown;
            try {
              parsed = text ? (JSON.parse(text) as unknown) : undefined;
            } catch {
              parsed = undefined;
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
        },
      );
      req.on("timeout", () => req.destroy(new Error("request timed out")));
      req.on("error", (err) => reject(new KubeRestError(method, path, 0, "request failed", { cause: err })));
      req.end(payload);
    });
  }

  /** A request that must answer one of `ok` (default: any 2xx); the parsed body. */
  async expect<T>(
    method: string,
    path: string,
    body?: unknown,
    opts: { ok?: readonly number[]; headers?: Record<string, string> } = {},
  ): Promise<T> {
    const r = await this.request(method, path, body, opts.headers);
    const ok = opts.ok ? opts.ok.includes(r.status) : r.status >= 200 && r.status < 300;
    if (!ok) throw new KubeRestError(method, path, r.status, statusMessage(r.body));
    return r.body as T;
  }

  get<T>(path: string, headers?: Record<string, string>): Promise<T> {
    return this.expect<T>("GET", path, undefined, headers ? { headers } : {});
  }

  /** Close the kept-alive connections. */
  close(): void {
    this.agent.destroy();
  }
}
