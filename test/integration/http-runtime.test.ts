// The Knative Functions HTTP contract of a function (detect), on a real kube-apiserver:
// a valid CloudEvent in binary or structured mode gets the reply event back (200, binary
// mode), an event with nothing to emit gets 204, and malformed input gets a 4xx whose
// body names the problem — the process never crashes.
import { CoreV1Api } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelope } from "../../events/envelope.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { createLogger } from "../../infra/log.ts";
import { hostFunction } from "../../app/host.ts";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT, startControlPlane } from "../../harness/env/index.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const env = withEnv(async (scope) => {
  const cp = scope.add(await startControlPlane());
  await applyObjects(cp.kubeConfig, readManifests(join(ROOT, "knative/base/crds")));
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: "fastfence-system" } } });
  await core.createNode({
    body: {
      metadata: { name: "node-a" },
      status: { nodeInfo: { bootID: "b00710d0-0000-4000-8000-000000000001" } as never },
    },
  });
  const node = await core.readNode({ name: "node-a" });
  node.status = {
    ...node.status,
    nodeInfo: {
      ...(node.status?.nodeInfo as object),
      bootID: "b00710d0-0000-4000-8000-000000000001",
    } as never,
  };
  await core.replaceNodeStatus({ name: "node-a", body: node });
  const fn = scope.add(
    await hostFunction({
      name: "detect",
      mode: { http: 0, host: "127.0.0.1" },
      config: loadRuntimeConfig({
        FASTFENCE_NAMESPACE: "fastfence-system",
        FASTFENCE_REPLICA: "detect-test",
      }),
      kubeConfig: cp.kubeConfig,
      log: createLogger("detect", { level: "silent" }),
    }),
  );
  return { url: `http://127.0.0.1:${fn.port}/` };
});

function observed(misses: number) {
  const now = Date.now();
  return envelope(
    {
      type: "io.fastfence.node.observed.v1",
      subject: "node-a",
      data: {
        observer: { replica: "source-node-b", node: "node-b" },
        target: "node-a",
        result: "missed",
        consecutiveMisses: misses,
        firstMissAt: new Date(now - 1000).toISOString(),
        lastOkAt: new Date(now - 1100).toISOString(),
        at: new Date(now).toISOString(),
        probe: { kind: "tcp", port: 10250 },
      },
    },
    "/fastfence/event-source/source-node-b",
    now,
  );
}

function binary(ev: ReturnType<typeof observed>): { headers: Record<string, string>; body: string } {
  const headers: Record<string, string> = { "content-type": "application/json" };
  for (const [k, v] of Object.entries(ev))
    if (k !== "data" && k !== "datacontenttype" && v !== undefined) headers[`ce-${k}`] = String(v);
  return { headers, body: JSON.stringify(ev.data) };
}

describe("HTTP runtime (Knative Functions contract)", () => {
  it("answers a valid binary-mode event over the threshold with the reply event (200, binary mode)", async () => {
    const req = binary(observed(3)); // the crossing of the default threshold (3 misses)
    const res = await fetch(env().url, { method: "POST", headers: req.headers, body: req.body });
    expect(res.status).toBe(200);
    expect(res.headers.get("ce-type")).toBe("io.fastfence.node.suspected.v1");
    expect(res.headers.get("ce-subject")).toBe("node-a");
    expect(res.headers.get("ce-source")).toBe("/fastfence/detect/detect-test");
    expect(res.headers.get("ce-ffincident")).toMatch(/^node-a-b00710d0$/);
    const traceId = req.headers["ce-traceparent"]!.split("-")[1];
    expect(res.headers.get("ce-traceparent")).toContain(traceId);
    const data = (await res.json()) as { node: string; reason: string };
    expect(data).toMatchObject({ node: "node-a", reason: "ProbeMisses" });
  });

  it("accepts structured mode, and answers 204 when there is nothing to emit", async () => {
    const ev = observed(1);
    const res = await fetch(env().url, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify(ev),
    });
    expect(res.status).toBe(204);
  });

  it.each([
    ["not a CloudEvent", { "content-type": "application/json" }, "{}", /not a CloudEvent/],
    [
      "invalid JSON in structured mode",
      { "content-type": "application/cloudevents+json" },
      "{nope",
      /malformed|JSON/i,
    ],
  ])("rejects %s with 400 naming the problem", async (_name, headers, body, pattern) => {
    const res = await fetch(env().url, { method: "POST", headers, body });
    expect(res.status).toBe(400);
    const err = (await res.json()) as { error: string; message: string; issues?: string[] };
    expect(err.error).toBe("FF_INVALID_EVENT");
    expect(`${err.message} ${(err.issues ?? []).join(" ")}`).toMatch(pattern);
  });

  it("names each bad field of an event that fails its schema", async () => {
    const ev = observed(5) as unknown as { data: Record<string, unknown> };
    ev.data.consecutiveMisses = -3;
    ev.data.observer = { replica: "x", node: "Not_A_Node" };
    const req = binary(ev as never);
    const res = await fetch(env().url, { method: "POST", headers: req.headers, body: req.body });
    expect(res.status).toBe(400);
    const err = (await res.json()) as { issues: string[] };
    expect(err.issues.join("\n")).toMatch(/data\.consecutiveMisses/);
    expect(err.issues.join("\n")).toMatch(/data\.observer\.node/);
  });

  it("rejects an event type the function does not handle with 400 listing what it accepts", async () => {
    const ev = { ...observed(5), type: "io.fastfence.node.recovered.v1" };
    const res = await fetch(env().url, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify(ev),
    });
    expect(res.status).toBe(400);
  });

  it("serves health and metrics", async () => {
    const base = env().url;
    expect((await fetch(`${base}health/readiness`)).status).toBe(200);
    const metrics = await (await fetch(`${base}metrics`)).text();
    expect(metrics).toMatch(
      /fastfence_events_in_total\{function="detect",type="io.fastfence.node.observed.v1"\} \d+/,
    );
    expect(metrics).toMatch(/fastfence_event_outcomes_total\{function="detect",outcome="invalid"\} \d+/);
  });
});
