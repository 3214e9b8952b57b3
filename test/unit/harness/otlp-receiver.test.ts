// The test OTLP receiver (harness/env/otlp-receiver.ts) against the real exporter: spans
// that fastfence's tracer exports over OTLP/HTTP protobuf arrive decoded with the official
// definitions (ids, parent, service, attributes, links), and what is not protobuf is refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startOtlpReceiver, type OtlpReceiver } from "../../../harness/env/otlp-receiver.ts";
import { otelTracing } from "../../../infra/telemetry/otel.ts";
import { traceChild } from "../../../infra/tracing.ts";

let rx: OtlpReceiver;
beforeAll(async () => void (rx = await startOtlpReceiver()));
afterAll(async () => rx.stop());

describe("OTLP receiver", () => {
  it("decodes what the exporter sends", async () => {
    const tracing = otelTracing(
      { url: `${rx.url}/v1/traces`, sampler: "parentbased_always_on", ratio: 1, scheduleDelayMs: 10 },
      { stage: "fence", replica: "fence-1" },
    );
    const tp = "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01";
    await tracing.stage(
      {
        stage: "fence",
        input: "io.fastfence.fence.requested.v1",
        node: "n1",
        incident: "n1-x",
        traceparent: tp,
      },
      async (span) => {
        await traceChild("fastfence.bmc off", { "fastfence.bmc.kind": "redfish" }, async () => undefined);
        span.outcome({ kind: "processed" }, 1);
      },
    );
    await tracing.shutdown();
    const spans = rx.spans();
    const stage = spans.find((s) => s.name.startsWith("fastfence.fence handle"))!;
    expect(stage).toMatchObject({
      service: "fastfence-fence",
      traceId: "0123456789abcdef0123456789abcdef",
      parentSpanId: "0123456789abcdef",
      kind: 5,
    });
    expect(stage.attributes).toMatchObject({ "fastfence.incident": "n1-x", "fastfence.emitted": 1 });
    const bmc = spans.find((s) => s.name === "fastfence.bmc off")!;
    expect(bmc).toMatchObject({ parentSpanId: stage.spanId, traceId: stage.traceId, kind: 3 });
    expect(bmc.endNs).toBeGreaterThanOrEqual(bmc.startNs);
  });

  it("refuses what is not protobuf", async () => {
    const r = await fetch(`${rx.url}/v1/traces`, {
      method: "POST",
      body: "{}",
      headers: { "content-type": "application/json" },
    });
    expect(r.status).toBe(415);
    const bad = await fetch(`${rx.url}/v1/traces`, {
      method: "POST",
      body: Buffer.from([0xff, 0xff, 0xff]),
      headers: { "content-type": "application/x-protobuf" },
    });
    expect(bad.status).toBe(400);
  });
});
