// Tracing (infra/tracing.ts, infra/telemetry/otel.ts) through the shared dispatcher, with
// an in-memory exporter: off unless an endpoint is set; a delivery is one span, a child of
// the transport traceparent if any, else of the event's; the events it emits carry that
// span's context; an ignored input is recorded only when its delivery asked for a trace;
// joining an incident's trace re-parents (or continues in a second span once started);
// BMC levels and calls are child spans with driver and result; failures carry the code.
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FastfenceError } from "../../../core/errors.ts";
import { envelope, type FfEvent } from "../../../events/envelope.ts";
import type { StageInfo } from "../../../functions/contract.ts";
import type { BmcDriver } from "../../../infra/bmc/driver.ts";
import { fenceWithLevels } from "../../../infra/bmc/levels.ts";
import { createLogger } from "../../../infra/log.ts";
import { createFunctionMetrics } from "../../../infra/metrics.ts";
import type { EventHandler } from "../../../infra/runtime/contract.ts";
import { createDispatcher, type CatalogView } from "../../../infra/runtime/dispatch.ts";
import { otelTracing } from "../../../infra/telemetry/otel.ts";
import { createTracing, noTracing, traceSettings, tracingActive } from "../../../infra/tracing.ts";

const catalog: CatalogView = { parse: (raw) => raw as FfEvent, topicOf: () => "t", deadLetterTopic: "dlq" };
const def: StageInfo = {
  name: "confirm",
  description: "",
  subscriptions: [{ topic: "t", types: ["io.fastfence.a.v1"] }],
  emits: ["io.fastfence.b.v1"],
  critical: true,
};
const settings = {
  url: "http://127.0.0.1:1/v1/traces",
  sampler: "parentbased_always_on" as const,
  ratio: 1,
  scheduleDelayMs: 10,
};
const EVENT_TP = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01";
const HEADER_TP = "00-fedcba9876543210fedcba9876543210-fedcba9876543210-01";
const INCIDENT_TP = "00-11111111111111111111111111111111-2222222222222222-01";

function setup(handler: EventHandler) {
  const exporter = new InMemorySpanExporter();
  const tracing = otelTracing(
    settings,
    { stage: "confirm", replica: "r1" },
    { processor: new SimpleSpanProcessor({ exporter }) },
  );
  const d = createDispatcher({
    def,
    handler,
    catalog,
    source: "/fastfence/confirm/r1",
    clock: { now: () => Date.now(), sleep: async () => undefined },
    log: createLogger("confirm", { level: "silent" }),
    metrics: createFunctionMetrics({ defaultMetrics: false }),
    config: { maxAttempts: 2, retryBackoffMs: 1, handlerTimeoutMs: 500 },
    tracing,
  });
  return { d, spans: () => exporter.getFinishedSpans() };
}

const ev: FfEvent = {
  ...envelope({ type: "io.fastfence.a.v1", subject: "n1", ffincident: "n1-x", data: {} }, "/s", Date.now()),
  traceparent: EVENT_TP,
};
const signal = new AbortController().signal;
const emitB = { type: "io.fastfence.b.v1", subject: "n1", data: {} };
const ids = (s: ReadableSpan) => ({ trace: s.spanContext().traceId, span: s.spanContext().spanId });

describe("tracing settings", () => {
  it("is off without an endpoint, and createTracing then loads nothing", async () => {
    expect(traceSettings({})).toBeUndefined();
    expect(await createTracing({}, { stage: "detect", replica: "r" })).toBe(noTracing);
    expect(
      traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }),
    ).toBeUndefined();
  });

  it("off, the runtime path imports no OpenTelemetry SDK module (a fresh process)", () => {
    const root = join(import.meta.dirname, "../../..");
    const script = `
      import { registerHooks } from "node:module";
      const seen = [];
      registerHooks({ resolve(s, c, next) { const r = next(s, c); seen.push(r.url); return r; } });
      for (const m of ["infra/runtime/dispatch.ts", "infra/runtime/stage-executor.ts", "infra/runtime/reconciler.ts", "infra/bmc/levels.ts"])
        await import(${JSON.stringify(root)} + "/" + m);
      const { createTracing } = await import(${JSON.stringify(root)} + "/infra/tracing.ts");
      const t = await createTracing({}, { stage: "fence", replica: "r" });
      console.log(JSON.stringify({ enabled: t.enabled, seen: seen.filter((u) => u.includes("@opentelemetry/")) }));`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    const r = JSON.parse(out.trim().split("\n").pop()!) as { enabled: boolean; seen: string[] };
    expect(r.enabled).toBe(false);
    // @opentelemetry/api may come with prom-client (its exemplars); the SDK never does.
    expect(r.seen.filter((u) => !u.includes("@opentelemetry/api/"))).toEqual([]);
  }, 30_000);

  it("appends /v1/traces to the base endpoint; the traces endpoint is used as is", () => {
    expect(traceSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" })?.url).toBe(
      "http://c:4318/v1/traces",
    );
    expect(
      traceSettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:1/x",
      }),
    ).toMatchObject({
      url: "http://t:1/x",
      sampler: "parentbased_always_on",
      ratio: 1,
      scheduleDelayMs: 5000,
    });
  });
});

describe("stage spans", () => {
  it("continue the event's traceparent, and the emitted events carry the span's context", async () => {
    const { d, spans } = setup(async () => ({ outcome: { kind: "processed" }, emit: [emitB] }));
    const r = await d.dispatch(() => ev as never, signal);
    const [s] = spans();
    expect(s!.name).toBe("fastfence.confirm handle io.fastfence.a.v1");
    expect(s!.parentSpanContext?.spanId).toBe("0123456789abcdef");
    expect(ids(s!).trace).toBe("0123456789abcdef0123456789abcdef");
    expect(s!.attributes).toMatchObject({
      "fastfence.stage": "confirm",
      "fastfence.incident": "n1-x",
      "fastfence.node": "n1",
      "cloudevents.event_type": "io.fastfence.a.v1",
      "fastfence.outcome.kind": "processed",
      "fastfence.emitted": 1,
    });
    expect(s!.resource.attributes["service.name"]).toBe("fastfence-confirm");
    if (r.kind !== "done") throw new Error(r.kind);
    expect(r.emitted[0]!.traceparent).toBe(`00-${ids(s!).trace}-${ids(s!).span}-01`);
  });

  it("prefer a transport traceparent, linking the event's own", async () => {
    const { d, spans } = setup(async () => ({ outcome: { kind: "processed" }, emit: [] }));
    await d.dispatch(() => ev as never, signal, { traceparent: HEADER_TP });
    const [s] = spans();
    expect(s!.parentSpanContext?.spanId).toBe("fedcba9876543210");
    expect(ids(s!).trace).toBe("fedcba9876543210fedcba9876543210");
    expect(s!.links.map((l) => l.context.spanId)).toEqual(["0123456789abcdef"]);
  });

  it("record an ignored input only when its delivery carried a traceparent", async () => {
    const ignored = async () => ({
      outcome: { kind: "ignored" as const, code: "Duplicate" as never, reason: "x" },
      emit: [],
    });
    const quiet = setup(ignored);
    await quiet.d.dispatch(() => ev as never, signal);
    expect(quiet.spans()).toEqual([]);
    const asked = setup(ignored);
    await asked.d.dispatch(() => ev as never, signal, { traceparent: HEADER_TP });
    expect(asked.spans()[0]!.attributes).toMatchObject({
      "fastfence.outcome.kind": "ignored",
      "fastfence.outcome.code": "Duplicate",
    });
  });

  it("join the incident's trace before starting, keeping the delivery as a link", async () => {
    const { d, spans } = setup(async (_e, ctx) => {
      ctx.trace?.join(INCIDENT_TP);
      return { outcome: { kind: "processed" }, emit: [emitB] };
    });
    const r = await d.dispatch(() => ev as never, signal);
    const [s] = spans();
    expect(s!.parentSpanContext?.spanId).toBe("2222222222222222");
    expect(s!.links.map((l) => l.context.spanId)).toEqual(["0123456789abcdef"]);
    if (r.kind === "done") expect(r.emitted[0]!.traceparent).toContain("11111111111111111111111111111111");
  });

  it("continue in a second span when the join comes after the span started", async () => {
    const { d, spans } = setup(async (_e, ctx) => {
      ctx.trace?.traceparent();
      ctx.trace?.join(INCIDENT_TP);
      return { outcome: { kind: "processed" }, emit: [emitB] };
    });
    const r = await d.dispatch(() => ev as never, signal);
    const all = spans();
    expect(all.map((s) => ids(s).trace).sort()).toEqual([
      "0123456789abcdef0123456789abcdef",
      "11111111111111111111111111111111",
    ]);
    const second = all.find((s) => ids(s).trace.startsWith("1111"))!;
    if (r.kind === "done") expect(r.emitted[0]!.traceparent).toContain(ids(second).span);
  });

  it("record a failure with its code after the retries", async () => {
    const { d, spans } = setup(async () => {
      throw new FastfenceError("FF_KUBE_UNAVAILABLE", "api down", { retriable: true });
    });
    await d.dispatch(() => ev as never, signal);
    const [s] = spans();
    expect(s!.status.code).toBe(2);
    expect(s!.attributes["error.type"]).toBe("FF_KUBE_UNAVAILABLE");
    expect(s!.events.map((e) => e.name)).toEqual(["retry"]);
  });
});

describe("BMC spans", () => {
  it("are a level span with the calls under it, inside the stage span only", async () => {
    let power = "on";
    const driver: BmcDriver = {
      kind: "redfish",
      target: "https://10.0.0.5/redfish/v1/Systems/1",
      status: async () => ({ state: power as "on" | "off", raw: power }),
      off: async () => void (power = "off"),
      on: async () => undefined,
    };
    const round = { round: 1, by: "fence-r1", now: () => Date.now() };
    const levels = [{ protocol: "redfish" as const, driver, timeoutMs: 2000, pollMs: 1 }];
    expect(tracingActive()).toBe(false);
    await fenceWithLevels(levels, round); // no stage span: nothing recorded, nothing fails
    power = "on";
    const { d, spans } = setup(async () => {
      const out = await fenceWithLevels(levels, round);
      return { outcome: { kind: "processed", detail: String(out.confirmed) }, emit: [] };
    });
    await d.dispatch(() => ev as never, signal);
    const all = spans();
    const stage = all.find((s) => s.name.startsWith("fastfence.confirm"))!;
    const level = all.find((s) => s.name === "fastfence.bmc power-off level")!;
    expect(level.parentSpanContext?.spanId).toBe(ids(stage).span);
    expect(level.attributes).toMatchObject({
      "fastfence.bmc.driver": "redfish",
      "fastfence.bmc.level": 0,
      "fastfence.bmc.result": "off-confirmed",
    });
    const calls = all.filter((s) => s.parentSpanContext?.spanId === ids(level).span).map((s) => s.name);
    expect(calls).toEqual(expect.arrayContaining(["fastfence.bmc off", "fastfence.bmc status"]));
    expect(JSON.stringify(all.map((s) => s.attributes))).not.toMatch(/password|user/i);
  });
});
