// Needs real kube-apiserver (+ etcd): deliveries carry TokenRequest tokens detect must review.
// The Knative Functions HTTP contract of a function (detect), on a real kube-apiserver:
// a valid CloudEvent in binary or structured mode gets the reply event back (200, binary
// mode), an event with nothing to emit gets 204, and malformed input gets a 4xx whose
// body names the problem — the process never crashes. Deliveries carry a token the
// TokenRequest API issued for detect's audience, as Knative's OIDC sender identity does;
// without one detect refuses the delivery (401) before it sees the event, and with
// FASTFENCE_HTTP_AUTH=none it takes anything, logging a warning when it starts
// (test/integration/http-auth.test.ts covers the authentication cases in depth).
// Observations come signed by node-b's observer, whose key is on node-b's heartbeat Lease
// (node-b Ready, the Lease fresh, and the ring assigning node-b to probe node-a), since
// detect refuses unsigned or unverifiable ones (forged-evidence.test.ts).
import { CoreV1Api } from "@kubernetes/client-node";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelope } from "../../events/envelope.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { createLogger } from "../../infra/log.ts";
import { hostFunction } from "../../app/host.ts";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { kwokNodeObject } from "../../harness/kube/node.ts";
import { publishObserverKey, setNodeReady } from "../../harness/kube/observer.ts";
import type { NodeObserved } from "../../events/schemas.ts";
import { ObserverKey } from "../../source/observer-key.ts";

/** node-b's observer: its key is published on node-b's heartbeat Lease in the env below. */
const observerOfB = new ObserverKey();

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
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
  // The observer's node: Ready, heartbeating, its key published (what its event source does).
  await core.createNode({ body: kwokNodeObject("node-b", "b00710d0-0000-4000-8000-00000000000b") });
  await setNodeReady(cp.kubeConfig, "node-b");
  await publishObserverKey(cp.kubeConfig, {
    namespace: "fastfence-system",
    node: "node-b",
    annotation: observerOfB.annotation,
    renew: { holder: "source-node-b", durationSeconds: 3600 },
  });
  // The Trigger's OIDC identity and a token for detect's default audience.
  await core.createNamespacedServiceAccount({
    namespace: "fastfence-system",
    body: { metadata: { name: "detect-node-observed-oidc-eventing.knative.dev-trigger" } },
  });
  const tokenRequest = await core.createNamespacedServiceAccountToken({
    name: "detect-node-observed-oidc-eventing.knative.dev-trigger",
    namespace: "fastfence-system",
    body: {
      spec: { audiences: ["serving.knative.dev/service/fastfence-system/detect"], expirationSeconds: 600 },
    },
  });
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
  // The same function with FASTFENCE_HTTP_AUTH=none, its log kept.
  const openLog: string[] = [];
  const open = scope.add(
    await hostFunction({
      name: "detect",
      mode: { http: 0, host: "127.0.0.1" },
      config: loadRuntimeConfig({
        FASTFENCE_NAMESPACE: "fastfence-system",
        FASTFENCE_REPLICA: "detect-open",
        FASTFENCE_HTTP_AUTH: "none",
      }),
      kubeConfig: cp.kubeConfig,
      log: createLogger("detect", { level: "info", destination: { write: (l: string) => openLog.push(l) } }),
    }),
  );
  return {
    url: `http://127.0.0.1:${fn.port}/`,
    metrics: fn.metrics,
    auth: { authorization: `Bearer ${tokenRequest.status!.token}` },
    open: { url: `http://127.0.0.1:${open.port}/`, log: openLog, metrics: open.metrics },
  };
});

/** An observation of node-a by node-b's observer, signed with the key node-b published. */
function observed(misses: number) {
  const now = Date.now();
  const data: NodeObserved = {
    observer: { replica: "source-node-b", node: "node-b" },
    target: "node-a",
    targetBootId: "b00710d0-0000-4000-8000-000000000001",
    result: "missed",
    consecutiveMisses: misses,
    firstMissAt: new Date(now - 1000).toISOString(),
    lastOkAt: new Date(now - 1100).toISOString(),
    at: new Date(now).toISOString(),
    probe: { kind: "tcp", port: 10250 },
    heartbeatSynced: true,
  };
  return envelope(
    { type: "io.fastfence.node.observed.v1", subject: "node-a", data: observerOfB.signObservation(data) },
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
    const res = await fetch(env().url, {
      method: "POST",
      headers: { ...req.headers, ...env().auth },
      body: req.body,
    });
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
      headers: { "content-type": "application/cloudevents+json", ...env().auth },
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
    const res = await fetch(env().url, { method: "POST", headers: { ...headers, ...env().auth }, body });
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
    const res = await fetch(env().url, {
      method: "POST",
      headers: { ...req.headers, ...env().auth },
      body: req.body,
    });
    expect(res.status).toBe(400);
    const err = (await res.json()) as { issues: string[] };
    expect(err.issues.join("\n")).toMatch(/data\.consecutiveMisses/);
    expect(err.issues.join("\n")).toMatch(/data\.observer\.node/);
  });

  it("rejects an event type the function does not handle with 400 listing what it accepts", async () => {
    const ev = { ...observed(5), type: "io.fastfence.node.recovered.v1" };
    const res = await fetch(env().url, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json", ...env().auth },
      body: JSON.stringify(ev),
    });
    expect(res.status).toBe(400);
  });

  it("refuses a delivery without a token (401) before detect sees it", async () => {
    const eventsIn = async () =>
      (await env().metrics.eventsIn.get()).values.reduce((sum, v) => sum + v.value, 0);
    const before = await eventsIn();
    const req = binary(observed(3));
    const res = await fetch(env().url, { method: "POST", headers: req.headers, body: req.body });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="fastfence"');
    expect(await res.json()).toMatchObject({ error: "FF_UNAUTHENTICATED", reason: "missing-token" });
    expect(await eventsIn()).toBe(before);
    const refused = (await env().metrics.inputsRefused.get()).values;
    expect(refused).toContainEqual(
      expect.objectContaining({ labels: { stage: "detect", reason: "missing-token" }, value: 1 }),
    );
  });

  it("with FASTFENCE_HTTP_AUTH=none hands a delivery without a token to detect, and warned at start", async () => {
    const eventsIn = async () =>
      (await env().open.metrics.eventsIn.get()).values.reduce((sum, v) => sum + v.value, 0);
    const before = await eventsIn();
    const req = binary(observed(3));
    const res = await fetch(env().open.url, { method: "POST", headers: req.headers, body: req.body });
    expect([401, 403]).not.toContain(res.status);
    expect(await eventsIn()).toBe(before + 1);
    const warnings = env()
      .open.log.map((l) => JSON.parse(l) as { level: string; msg: string })
      .filter((l) => l.level === "warn");
    expect(warnings.map((w) => w.msg).join("\n")).toMatch(
      /FASTFENCE_HTTP_AUTH=none: deliveries are not authenticated/,
    );
  });

  it("serves health and metrics", async () => {
    const base = env().url;
    // Its own deliveries (the cases run in any order): a valid observation and an invalid one.
    const post = (ev: unknown) =>
      fetch(base, {
        method: "POST",
        headers: { "content-type": "application/cloudevents+json", ...env().auth },
        body: JSON.stringify(ev),
      });
    expect((await post(observed(1))).status).toBe(204);
    const invalid = observed(5) as unknown as { data: Record<string, unknown> };
    invalid.data.consecutiveMisses = -3;
    expect((await post(invalid)).status).toBe(400);
    expect((await fetch(`${base}health/readiness`)).status).toBe(200);
    const metrics = await (await fetch(`${base}metrics`)).text();
    expect(metrics).toMatch(
      /fastfence_events_in_total\{function="detect",type="io.fastfence.node.observed.v1"\} \d+/,
    );
    expect(metrics).toMatch(/fastfence_event_outcomes_total\{function="detect",outcome="invalid"\} \d+/);
  });
});
