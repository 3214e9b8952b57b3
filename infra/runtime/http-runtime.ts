// Hosts one function behind the Knative Functions HTTP contract (faas-js-runtime's):
// POST a CloudEvent (binary or structured mode) to "/"; the first emitted event comes
// back in the response in binary mode with 200, nothing emitted gives 204. Further
// emitted events go to `publishExtra` (a Kafka producer or the K_SINK), because one
// HTTP reply carries one event. Malformed input gets a 400 with a JSON body naming each
// problem; a retriable failure gets 503 so the Knative dispatcher retries; a dead-letter
// outcome of a valid event gets 422 (not retried; the broker's dead-letter sink keeps
// it), with the stage's reason code when it rejected the event. Also serves
// /health/readiness, /health/liveness and /metrics. It never crashes on a request,
// whatever the body. Every POST first passes the sender authentication (http-auth.ts):
// a refused request gets 401/403/503 and never reaches the handler. A W3C `traceparent`
// header (what Knative's dispatcher sends when its tracing is on; distinct from the
// event's own ce-traceparent) is the delivery's trace context (infra/tracing.ts).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { InvalidInputError, RejectedEventError } from "../../core/errors.ts";
import type { Clock } from "../../core/clock.ts";
import { decodeHttp, encodeHttp } from "../../events/codec.ts";
import type { FfEvent } from "../../events/envelope.ts";
import type { StageInfo } from "../../functions/contract.ts";
import type { EventHandler } from "./contract.ts";
import type { Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";
import type { Tracing } from "../tracing.ts";
import { createDispatcher, type CatalogView, type DispatchConfig } from "./dispatch.ts";
import { refusalResponse, type AuthDecision, type HttpAuthenticator } from "./http-auth.ts";

export interface HttpRuntime {
  server: Server;
  port: number;
  stop(): Promise<void>;
}

/** Largest accepted request body, bytes. Events are small; this bounds memory. */
const MAX_BODY = 1 << 20;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new InvalidInputError("FF_INVALID_EVENT", `request body exceeds ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const s = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    "content-type": "application/json",
    "content-length": Buffer.byteLength(s),
  });
  res.end(s);
}

export async function startHttpRuntime(opts: {
  def: StageInfo;
  handler: EventHandler;
  catalog: CatalogView;
  clock: Clock;
  log: Logger;
  metrics: FunctionMetrics;
  port: number;
  host?: string;
  replica: string;
  /** Who may deliver: the TokenReview authenticator, or noAuthentication (warned at start). */
  auth: HttpAuthenticator;
  /** Where events beyond the first reply go. Without it, extra events are an error (5xx, retried). */
  publishExtra?: (events: FfEvent[]) => Promise<void>;
  dispatch?: Partial<DispatchConfig>;
  /** Default: noTracing. */
  tracing?: Tracing;
}): Promise<HttpRuntime> {
  const { def, log, metrics } = opts;
  const source = `/fastfence/${def.name}/${opts.replica}`;
  const dispatcher = createDispatcher({ ...opts, source, config: opts.dispatch ?? {} });
  const stopping = new AbortController();

  function refuse(req: IncomingMessage, res: ServerResponse, d: Extract<AuthDecision, { ok: false }>): void {
    metrics.inputsRefused.inc({ stage: def.name, reason: d.reason });
    const fields = { incident: "none", node: "none", reason: d.reason, status: d.status, detail: d.message };
    log.warn(
      { ...fields, ...(d.subject ? { subject: d.subject } : {}), remote: req.socket.remoteAddress },
      "HTTP delivery refused",
    );
    req.resume(); // discard the body unread
    const r = refusalResponse(d);
    json(res, r.status, r.body, r.headers);
  }

  async function onPost(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const decision = await opts.auth.check(req.headers.authorization);
    if (!decision.ok) return refuse(req, res, decision);
    return onEvent(req, res);
  }

  async function onEvent(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: string;
    try {
      body = await readBody(req);
    } catch (err) {
      const e =
        err instanceof InvalidInputError
          ? err
          : new InvalidInputError("FF_INVALID_EVENT", "cannot read request body");
      return json(res, 413, { error: e.code, message: e.message });
    }
    const tp = req.headers.traceparent;
    const transport = { traceparent: Array.isArray(tp) ? tp[0] : tp };
    const result = await dispatcher.dispatch(() => decodeHttp(req.headers, body), stopping.signal, transport);
    if (result.kind === "skipped")
      return json(res, 400, {
        error: "FF_INVALID_EVENT",
        message: `function ${def.name} does not handle event type ${result.event.type}`,
        accepts: def.subscriptions.flatMap((s) => s.types),
      });
    if (result.kind === "dead-letter") {
      const e = result.error;
      if (!result.event) {
        const issues = e instanceof InvalidInputError ? e.issues : [];
        return json(res, 400, { error: e.code, message: e.message, issues });
      }
      return json(res, e.retriable ? 503 : 422, {
        error: e.code,
        ...(e instanceof RejectedEventError ? { reasonCode: e.reasonCode } : {}),
        message: e.message,
      });
    }
    const [first, ...rest] = result.emitted;
    if (rest.length) {
      if (!opts.publishExtra)
        return json(res, 500, {
          error: "FF_INTERNAL",
          message: `handler emitted ${result.emitted.length} events but no extra sink is configured`,
        });
      try {
        await opts.publishExtra(rest);
      } catch (err) {
        log.error(
          { incident: result.event.ffincident ?? "none", node: result.event.subject, err },
          "publishing extra events failed",
        );
        return json(res, 503, {
          error: "FF_BUS_UNAVAILABLE",
          message: "publishing emitted events failed; retry",
        });
      }
    }
    if (!first) {
      res.writeHead(204);
      return void res.end();
    }
    const out = encodeHttp(first);
    res.writeHead(200, { ...out.headers, "content-length": Buffer.byteLength(out.body) });
    res.end(out.body);
  }

  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    if (req.method === "GET" && (url === "/health/readiness" || url === "/health/liveness"))
      return json(res, 200, { status: "ok" });
    if (req.method === "GET" && url === "/metrics") {
      void metrics.registry.metrics().then((m) => {
        res.writeHead(200, { "content-type": metrics.registry.contentType });
        res.end(m);
      });
      return;
    }
    if (req.method !== "POST" || (url !== "/" && !url.startsWith("/?")))
      return json(res, 404, {
        error: "not found",
        message: "POST CloudEvents to /; GET /health/readiness, /health/liveness, /metrics",
      });
    onPost(req, res).catch((err: unknown) => {
      log.error({ incident: "none", node: "unknown", err }, "unexpected error handling a request");
      if (!res.headersSent) json(res, 500, { error: "FF_INTERNAL", message: "internal error" });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host ?? "0.0.0.0", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ incident: "none", node: "none", port, auth: opts.auth.mode }, "http runtime listening");
  if (opts.auth.mode === "none")
    log.warn(
      { incident: "none", node: "none" },
      "FASTFENCE_HTTP_AUTH=none: deliveries are not authenticated; anything that reaches this port can submit events",
    );
  else
    log.info(
      { incident: "none", node: "none", audience: opts.auth.audience },
      "deliveries need a bearer token",
    );
  return {
    server,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        stopping.abort();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
