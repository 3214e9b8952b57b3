// A small OTLP/HTTP trace receiver for the integration tests: accepts POST /v1/traces with
// a protobuf ExportTraceServiceRequest (gzip or not), decodes it with protobufjs from the
// official OTLP definitions vendored in third_party/opentelemetry-proto, and keeps every
// span flattened (hex ids, the resource's service.name, plain attributes, links) for the
// test to assert on. It answers 200 with an empty ExportTraceServiceResponse, 400 to what
// it cannot decode and 415 to anything but protobuf. Harness code: it listens on loopback
// only, never forwards anything, and never changes what it received.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import protobuf from "protobufjs";
import { ROOT } from "./base.ts";

const PROTOS = join(ROOT, "third_party/opentelemetry-proto");
const REQUEST = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest";
const RESPONSE = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse";

export type AttrValue = string | number | boolean | AttrValue[] | { [k: string]: AttrValue } | null;

/** One received span, flattened. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind number (1 internal, 2 server, 3 client, 4 producer, 5 consumer). */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttrValue>;
  links: { traceId: string; spanId: string }[];
  /** OTLP status code (0 unset, 1 ok, 2 error). */
  status: number;
}

export interface OtlpReceiver {
  /** Base URL (OTEL_EXPORTER_OTLP_ENDPOINT); traces go to `${url}/v1/traces`. */
  url: string;
  spans(): ReceivedSpan[];
  /** Export requests received and decoded. */
  requests(): number;
  stop(): Promise<void>;
}

interface KeyValue {
  key: string;
  value?: AnyValue;
}
interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
  bytesValue?: Uint8Array;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
}
interface WireSpan {
  traceId: Uint8Array;
  spanId: Uint8Array;
  parentSpanId?: Uint8Array;
  name: string;
  kind?: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: KeyValue[];
  links?: { traceId: Uint8Array; spanId: Uint8Array }[];
  status?: { code?: number };
}
interface WireRequest {
  resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { spans?: WireSpan[] }[] }[];
}

const hex = (b: Uint8Array | undefined) => (b ? Buffer.from(b).toString("hex") : "");

function value(v: AnyValue | undefined): AttrValue {
  if (!v) return null;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.bytesValue !== undefined) return hex(v.bytesValue);
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value);
  if (v.kvlistValue) return attributes(v.kvlistValue.values);
  return null;
}

function attributes(kvs: KeyValue[] | undefined): Record<string, AttrValue> {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, value(kv.value)]));
}

/** Flattens a decoded ExportTraceServiceRequest into spans. */
export function flattenRequest(req: WireRequest): ReceivedSpan[] {
  return (req.resourceSpans ?? []).flatMap((rs) => {
    const service = String(attributes(rs.resource?.attributes)["service.name"] ?? "");
    return (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        service,
        traceId: hex(s.traceId),
        spanId: hex(s.spanId),
        parentSpanId: hex(s.parentSpanId),
        name: s.name,
        kind: s.kind ?? 0,
        startNs: BigInt(s.startTimeUnixNano),
        endNs: BigInt(s.endTimeUnixNano),
        attributes: attributes(s.attributes),
        links: (s.links ?? []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
        status: s.status?.code ?? 0,
      })),
    );
  });
}

/** The OTLP trace request and response types, from the vendored official definitions. */
export function otlpTypes(): { request: protobuf.Type; response: protobuf.Type } {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(PROTOS, target);
  root.loadSync("opentelemetry/proto/collector/trace/v1/trace_service.proto");
  return { request: root.lookupType(REQUEST), response: root.lookupType(RESPONSE) };
}

function body(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const { request, response } = otlpTypes();
  const ok = Buffer.from(response.encode(response.create({})).finish());
  const received: ReceivedSpan[] = [];
  let requests = 0;
  const server: Server = createServer((req, res) => {
    void (async () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      if (!(req.headers["content-type"] ?? "").startsWith("application/x-protobuf")) {
        res.writeHead(415).end();
        return;
      }
      let raw = await body(req);
      try {
        if (req.headers["content-encoding"] === "gzip") raw = gunzipSync(raw);
        const msg = request.toObject(request.decode(raw), { longs: String, arrays: true }) as WireRequest;
        received.push(...flattenRequest(msg));
        requests++;
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/x-protobuf", "content-length": ok.length });
      res.end(ok);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    spans: () => [...received],
    requests: () => requests,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
