// Needs real pipeline cluster, OTLP/HTTP receiver: one trace across every stage, over the wire.
// Tracing on the real stack: the whole pipeline (harness/env/pipeline-cluster.ts, every
// replica of every stage in this process, each with its own tracer provider) exports over
// OTLP/HTTP protobuf to a small receiver that decodes with the official OTLP definitions
// (harness/env/otlp-receiver.ts). A node crashes; the incident's spans — the detect span
// that raised the suspicion, confirm, fence with its BMC power-off level and calls, and
// remediate-workloads — are one trace, the one on the incident's fastfence.io/traceparent
// annotation, and each stage's span descends from the one before (parent links, start
// times in order). Then one CloudEvent posted over HTTP to an HTTP-runtime function with a
// W3C `traceparent` header (as Knative's dispatcher sends) gets a span whose parent is that
// header's span, its own ce-traceparent kept as a link.
import { describe, expect, it } from "vitest";
import { hostFunction } from "../../app/host.ts";
import { encodeHttp } from "../../events/codec.ts";
import { envelope } from "../../events/envelope.ts";
import type { NodeFenced } from "../../events/schemas.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { createLogger } from "../../infra/log.ts";
import { TRACE_ANNOTATION } from "../../infra/tracing.ts";
import { startOtlpReceiver, type ReceivedSpan } from "../../harness/env/otlp-receiver.ts";
import { NAMESPACE, startPipelineCluster } from "../../harness/env/pipeline-cluster.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { incidents, waitFor } from "./pipeline-helpers.ts";

const env = withEnv(async (scope) => {
  const rx = await startOtlpReceiver();
  scope.add({ stop: () => rx.stop() });
  const c = scope.add(
    await startPipelineCluster({
      nodes: ["node-a", "node-b", "node-c"],
      runtimeEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: rx.url, OTEL_BSP_SCHEDULE_DELAY: "200" },
    }),
  );
  return { rx, c };
});

const stageOf = (s: ReceivedSpan) => String(s.attributes["fastfence.stage"] ?? "");
const processed = (s: ReceivedSpan) => s.attributes["fastfence.outcome.kind"] === "processed";

describe("tracing over OTLP", () => {
  it("puts a crashed node's incident in one trace, stage after stage, with the BMC calls", async () => {
    const { rx, c } = env();
    const victim = "node-c";
    await c.crash(victim);
    const released = await waitFor(
      "incident Released",
      async () =>
        (await incidents(c)).find((i) => i.spec.nodeName === victim && i.status?.phase === "Released"),
      60_000,
    ).catch(async (err: unknown) => {
      const now = (await incidents(c)).map((i) => ({ name: i.metadata.name, status: i.status }));
      console.log(`incidents when giving up: ${JSON.stringify(now, null, 1)}`);
      throw err;
    });
    const name = released.metadata.name;
    const anchor = released.metadata.annotations?.[TRACE_ANNOTATION];
    expect(anchor).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const traceId = anchor!.split("-")[1]!;

    const ofIncident = (s: ReceivedSpan) => s.attributes["fastfence.incident"] === name;
    await waitFor(
      "remediate-workloads span exported",
      async () =>
        rx.spans().some((s) => ofIncident(s) && stageOf(s) === "remediate-workloads" && processed(s))
          ? true
          : undefined,
      15_000,
    );
    const spans = rx.spans();
    // Every stage span that acted on the incident after detect is in the incident's trace.
    const acted = spans.filter(
      (s) =>
        ofIncident(s) && processed(s) && ["confirm", "fence", "remediate-workloads"].includes(stageOf(s)),
    );
    expect(new Set(acted.map(stageOf))).toEqual(new Set(["confirm", "fence", "remediate-workloads"]));
    expect(new Set(acted.map((s) => s.traceId))).toEqual(new Set([traceId]));
    for (const s of acted) expect(s.service).toBe(`fastfence-${stageOf(s)}`);

    // The causal chain, from the release up through the parent links of the one trace.
    const inTrace = new Map(spans.filter((s) => s.traceId === traceId).map((s) => [s.spanId, s]));
    const release = acted.find((s) => stageOf(s) === "remediate-workloads")!;
    const chain: ReceivedSpan[] = [];
    for (let s: ReceivedSpan | undefined = release; s; s = inTrace.get(s.parentSpanId)) chain.unshift(s);
    const stages = chain.map(stageOf).filter((st, i, all) => st !== all[i - 1]);
    expect(stages).toEqual(["detect", "confirm", "fence", "remediate-workloads"]);
    // the incident's anchor is the detect span that raised the suspicion
    expect(chain[0]!.spanId).toBe(anchor!.split("-")[2]);
    expect(chain[0]!.service).toBe("fastfence-detect");
    for (let i = 1; i < chain.length; i++)
      expect(chain[i]!.startNs).toBeGreaterThanOrEqual(chain[i - 1]!.startNs);
    const t0 = chain[0]!.startNs;
    const ms = (ns: bigint) => Number((ns - t0) / 1_000_000n);
    console.log(
      `\ntrace ${traceId} (${inTrace.size} spans) of ${name}, the release's ancestry:\n` +
        chain.map((s) => `  +${ms(s.startNs)}..${ms(s.endNs)} ms  ${s.service}  ${s.name}`).join("\n"),
    );

    // The fencing round: a power-off level span under the fence span, its BMC calls under it.
    const fenceIds = new Set(chain.filter((s) => stageOf(s) === "fence").map((s) => s.spanId));
    const level = [...inTrace.values()].find(
      (s) => s.name === "fastfence.bmc power-off level" && fenceIds.has(s.parentSpanId),
    );
    expect(level?.attributes).toMatchObject({
      "fastfence.bmc.driver": "redfish",
      "fastfence.bmc.result": "off-confirmed",
    });
    const calls = [...inTrace.values()].filter((s) => s.parentSpanId === level!.spanId);
    expect(calls.map((s) => s.name)).toEqual(
      expect.arrayContaining(["fastfence.bmc off", "fastfence.bmc status"]),
    );
    expect(
      calls.find(
        (s) => s.name === "fastfence.bmc status" && s.attributes["fastfence.bmc.power_state"] === "off",
      ),
    ).toBeDefined();
    // No credential in any span (the BMC passwords are "pw-<node>-…").
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain("pw-");
  });

  it("continues the traceparent header of an HTTP delivery", async () => {
    const { rx, c } = env();
    const config = loadRuntimeConfig({
      FASTFENCE_NAMESPACE: NAMESPACE,
      FASTFENCE_REPLICA: "remediate-http",
      FASTFENCE_HTTP_AUTH: "none",
      OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
      OTEL_BSP_SCHEDULE_DELAY: "100",
    });
    const fn = await hostFunction({
      name: "remediate-workloads",
      mode: { http: 0, host: "127.0.0.1" },
      config,
      kubeConfig: c.kc,
      log: createLogger("remediate-workloads", { level: "silent" }),
    });
    try {
      const data: NodeFenced = {
        incident: "node-z-00000000",
        node: "node-z",
        bootId: "00000000-0000-4000-8000-000000000000",
        powerOffConfirmedAt: new Date().toISOString(),
        round: 1,
        level: 0,
        driver: "redfish",
        attempts: 1,
      };
      const ev = {
        ...envelope(
          { type: "io.fastfence.node.fenced.v1", subject: "node-z", ffincident: data.incident, data },
          "/fastfence/fence/test",
          Date.now(),
        ),
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
      };
      const header = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01";
      const { headers, body } = encodeHttp(ev);
      const res = await fetch(`http://127.0.0.1:${fn.port}/`, {
        method: "POST",
        headers: { ...headers, traceparent: header },
        body,
      });
      expect(res.status).toBeLessThan(500);
      const span = await waitFor(
        "the delivery's span",
        async () => rx.spans().find((s) => s.attributes["cloudevents.event_id"] === ev.id),
        10_000,
      );
      expect(span).toMatchObject({
        service: "fastfence-remediate-workloads",
        traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
        parentSpanId: "b7ad6b7169203331",
        name: "fastfence.remediate-workloads handle io.fastfence.node.fenced.v1",
      });
      expect(span.links).toEqual([
        { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "00f067aa0ba902b7" },
      ]);
    } finally {
      await fn.stop();
    }
  });
});
