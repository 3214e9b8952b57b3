// Needs real kube-apiserver (+ etcd): TokenRequest tokens checked by a real TokenReview.
// Sender authentication of the HTTP runtime (infra/runtime/http-auth.ts) against a real
// kube-apiserver: tokens come from the TokenRequest API for real ServiceAccounts, exactly
// what Knative's OIDC sender identity sends, and each one is checked with a real
// TokenReview. A refused delivery (no token, wrong audience, the API server's own
// audience, garbage, a subject not on the allow list) never reaches the handler — a
// counting handler proves it — and raises fastfence_inputs_refused_total{stage,reason};
// an API server that is down or silent gives 503 (Knative redelivers), never 200; the
// function's identity needs the tokenreview grant of knative/base/rbac/tokenreview.yaml;
// successful reviews are cached, refusals are not; the token never reaches a log. Also:
// extra events posted to K_SINK carry FASTFENCE_SINK_TOKEN_FILE's token.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../core/clock.ts";
import { envelope } from "../../events/envelope.ts";
import { findStage } from "../../functions/registry.ts";
import { catalogView, postToSink } from "../../app/host.ts";
import { FastfenceError } from "../../core/errors.ts";
import { createServer as createHttpServer, type IncomingHttpHeaders } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Kube } from "../../infra/kube/client.ts";
import { createLogger } from "../../infra/log.ts";
import { createFunctionMetrics, type FunctionMetrics } from "../../infra/metrics.ts";
import {
  createTokenReviewAuthenticator,
  kubeTokenReviewer,
  type TokenReviewer,
} from "../../infra/runtime/http-auth.ts";
import { startHttpRuntime } from "../../infra/runtime/http-runtime.ts";
import { applyObjects, readManifests } from "../../harness/env/apply.ts";
import { ROOT, freePort } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const NS = "fastfence-system";
const AUDIENCE = `serving.knative.dev/service/${NS}/detect`;
const SENDER = "detect-node-observed-oidc-eventing.knative.dev-trigger";
const SENDER_USER = `system:serviceaccount:${NS}:${SENDER}`;

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  for (const name of [SENDER, "intruder"])
    await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name } } });
  const token = async (sa: string, audiences?: string[]): Promise<string> => {
    const r = await core.createNamespacedServiceAccountToken({
      name: sa,
      namespace: NS,
      body: { spec: { ...(audiences ? { audiences } : {}), expirationSeconds: 600 } },
    });
    if (!r.status?.token) throw new Error(`TokenRequest for ${sa} returned no token`);
    return r.status.token;
  };
  // The function identities and their tokenreview grant, as the manifests ship them.
  await applyObjects(
    cp.kubeConfig,
    readManifests(join(ROOT, "knative/base/rbac"), (o) =>
      ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"].includes(o.kind ?? ""),
    ),
  );
  return {
    cp,
    tokens: {
      sender: await token(SENDER, [AUDIENCE]),
      intruder: await token("intruder", [AUDIENCE]),
      wrongAudience: await token(SENDER, [`serving.knative.dev/service/${NS}/fence`]),
      apiAudience: await token(SENDER),
    },
  };
});

/** A detect-shaped HTTP runtime whose handler only counts calls; every log line kept. */
async function startCounting(opts: {
  kube: Kube;
  allowedSubjects?: string[];
  cacheTtlMs?: number;
  timeoutMs?: number;
}) {
  const calls = { handler: 0, reviews: 0 };
  const lines: string[] = [];
  const log = createLogger("detect", {
    level: "debug",
    destination: { write: (s: string) => lines.push(s) },
  });
  const metrics = createFunctionMetrics({ defaultMetrics: false });
  const real = kubeTokenReviewer(opts.kube, opts.timeoutMs ?? 1500);
  const reviewer: TokenReviewer = {
    review: (t, a) => {
      calls.reviews++;
      return real.review(t, a);
    },
  };
  const rt = await startHttpRuntime({
    def: findStage("detect")!,
    handler: () => {
      calls.handler++;
      return Promise.resolve({
        outcome: { kind: "ignored", code: "UnhandledInput", reason: "counted only" },
        emit: [],
      });
    },
    catalog: catalogView,
    clock: systemClock,
    log,
    metrics,
    port: 0,
    host: "127.0.0.1",
    replica: "detect-auth-test",
    auth: createTokenReviewAuthenticator({
      audience: AUDIENCE,
      allowedSubjects: opts.allowedSubjects ?? [],
      reviewer,
      clock: systemClock,
      cacheTtlMs: opts.cacheTtlMs ?? 30_000,
    }),
  });
  return { url: `http://127.0.0.1:${rt.port}/`, calls, lines, metrics, stop: () => rt.stop() };
}

/** A JWT claiming to be the Trigger's identity for detect's audience, signed by no one. */
function forged(): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  return [
    part({ alg: "RS256", kid: "forged" }),
    part({
      aud: [AUDIENCE],
      sub: SENDER_USER,
      iss: "https://kubernetes.default.svc.cluster.local",
      exp: now + 600,
    }),
    Buffer.from("not a signature").toString("base64url"),
  ].join(".");
}

function observedEvent() {
  const now = Date.now();
  return envelope(
    {
      type: "io.fastfence.node.observed.v1",
      subject: "node-a",
      data: {
        observer: { replica: "source-node-b", node: "node-b" },
        target: "node-a",
        targetBootId: "b00710d0-0000-4000-8000-000000000001",
        result: "missed",
        consecutiveMisses: 1,
        firstMissAt: new Date(now - 1000).toISOString(),
        at: new Date(now).toISOString(),
        probe: { kind: "tcp", port: 10250 },
      },
    },
    "/fastfence/event-source/source-node-b",
    now,
  );
}

function post(url: string, authorization?: string): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/cloudevents+json",
      ...(authorization === undefined ? {} : { authorization }),
    },
    body: JSON.stringify(observedEvent()),
  });
}

async function refused(m: FunctionMetrics, reason: string): Promise<number> {
  const v = (await m.inputsRefused.get()).values.find((x) => x.labels.reason === reason);
  return v?.value ?? 0;
}

describe("HTTP runtime sender authentication (TokenReview on a real API server)", () => {
  it("refuses no token, a malformed header, garbage, a wrong audience and the API's own audience with 401; the handler never runs", async () => {
    const { cp, tokens } = env();
    const rt = await startCounting({ kube: new Kube(cp.kubeConfig) });
    try {
      const cases: [string | undefined, string][] = [
        [undefined, "missing-token"],
        ["Basic c2VuZGVyOnB3", "malformed-token"],
        ["Bearer not.a-real.token", "unauthenticated"],
        [`Bearer ${forged()}`, "unauthenticated"],
        [`Bearer ${tokens.wrongAudience}`, "wrong-audience"],
        [`Bearer ${tokens.apiAudience}`, "wrong-audience"],
      ];
      for (const [authorization, reason] of cases) {
        const res = await post(rt.url, authorization);
        expect(res.status, reason).toBe(401);
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer realm="fastfence"/);
        const body = (await res.json()) as { error: string; reason: string; message: string };
        expect(body).toMatchObject({ error: "FF_UNAUTHENTICATED", reason });
        expect(await refused(rt.metrics, reason)).toBeGreaterThan(0);
      }
      expect(rt.calls.handler).toBe(0);
      // Only the forged token (right audience claim, no valid signature) needed a review;
      // presented again it is reviewed again: refusals are not cached.
      expect(rt.calls.reviews).toBe(1);
      expect((await post(rt.url, `Bearer ${forged()}`)).status).toBe(401);
      expect(rt.calls.reviews).toBe(2);
      // No token, not even a prefix of one, reached a log line.
      const logs = rt.lines.join("");
      for (const t of Object.values(tokens)) expect(logs).not.toContain(t.slice(-40));
      expect(logs).toMatch(/HTTP delivery refused/);
    } finally {
      await rt.stop();
    }
  });

  it("hands a delivery with a valid token for its audience to the handler, and reuses the review", async () => {
    const { cp, tokens } = env();
    const rt = await startCounting({ kube: new Kube(cp.kubeConfig) });
    try {
      expect((await post(rt.url, `Bearer ${tokens.sender}`)).status).toBe(204);
      expect((await post(rt.url, `bearer ${tokens.sender}`)).status).toBe(204);
      expect(rt.calls.handler).toBe(2);
      expect(rt.calls.reviews).toBe(1);
      expect(rt.lines.join("")).not.toContain(tokens.sender.slice(-40));
    } finally {
      await rt.stop();
    }
  });

  it("with an allow list: a valid token of another subject gets 403 and is not handled; the listed sender is", async () => {
    const { cp, tokens } = env();
    const rt = await startCounting({ kube: new Kube(cp.kubeConfig), allowedSubjects: [SENDER_USER] });
    try {
      const res = await post(rt.url, `Bearer ${tokens.intruder}`);
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ error: "FF_FORBIDDEN", reason: "subject-not-allowed" });
      expect(rt.calls.handler).toBe(0);
      expect(await refused(rt.metrics, "subject-not-allowed")).toBe(1);
      // Still 403 when the intruder's (successful) review is served from the cache.
      expect((await post(rt.url, `Bearer ${tokens.intruder}`)).status).toBe(403);
      expect(rt.calls.handler).toBe(0);
      expect((await post(rt.url, `Bearer ${tokens.sender}`)).status).toBe(204);
      expect(rt.calls.handler).toBe(1);
    } finally {
      await rt.stop();
    }
  });

  it("answers 503, never 200, when the API server refuses the connection or does not answer in time", async () => {
    const { cp, tokens } = env();
    const closedPort = await freePort();
    const sockets: Socket[] = [];
    const silent: Server = createServer((s) => void sockets.push(s)); // accepts, never answers
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const silentPort = (silent.address() as { port: number }).port;
    try {
      for (const port of [closedPort, silentPort]) {
        const kc = new KubeConfig();
        const user = cp.kubeConfig.getCurrentUser()!;
        kc.loadFromOptions({
          clusters: [{ name: "down", server: `https://127.0.0.1:${port}`, skipTLSVerify: true }],
          users: [user],
          contexts: [{ name: "down", cluster: "down", user: user.name }],
          currentContext: "down",
        });
        const rt = await startCounting({ kube: new Kube(kc, { requestTimeoutMs: 5000 }), timeoutMs: 400 });
        try {
          const t0 = Date.now();
          const res = await post(rt.url, `Bearer ${tokens.sender}`);
          expect(res.status, `API on port ${port}`).toBe(503);
          expect(res.headers.get("retry-after")).toBe("1");
          expect(await res.json()).toMatchObject({
            error: "FF_AUTH_UNAVAILABLE",
            reason: "review-unavailable",
          });
          expect(Date.now() - t0).toBeLessThan(3000); // the review's own deadline, not the client's 5 s
          expect(rt.calls.handler).toBe(0);
          expect(await refused(rt.metrics, "review-unavailable")).toBe(1);
        } finally {
          await rt.stop();
        }
      }
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it("a function identity with the manifests' tokenreview grant can verify; one without it gets 503", async () => {
    const { cp, tokens } = env();
    // recover is the stage Knative delivers to; the critical stages consume Kafka and take
    // no deliveries, so neither they nor the event source hold the grant.
    for (const [identity, status] of [
      ["fastfence-recover", 204],
      ["fastfence-detect", 503],
      ["fastfence-source", 503],
    ] as const) {
      const path = await cp.makeUserKubeconfig(`system:serviceaccount:${NS}:${identity}`, [
        "system:serviceaccounts",
        `system:serviceaccounts:${NS}`,
      ]);
      const kc = new KubeConfig();
      kc.loadFromFile(path);
      const rt = await startCounting({ kube: new Kube(kc) });
      try {
        expect((await post(rt.url, `Bearer ${tokens.sender}`)).status, identity).toBe(status);
        expect(rt.calls.handler).toBe(status === 204 ? 1 : 0);
      } finally {
        await rt.stop();
      }
    }
  });

  it("sends FASTFENCE_SINK_TOKEN_FILE's token with every post to K_SINK, re-read each time", async () => {
    const seen: IncomingHttpHeaders[] = [];
    const sink = createHttpServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      res.writeHead(202).end();
    });
    await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(sink.address() as { port: number }).port}/`;
    const dir = mkdtempSync(join(tmpdir(), "ff-sink-token-"));
    try {
      const file = join(dir, "token");
      writeFileSync(file, "first.token.value\n");
      await postToSink(url, [observedEvent()], 2000, file);
      writeFileSync(file, "rotated.token.value");
      await postToSink(url, [observedEvent()], 2000, file);
      await postToSink(url, [observedEvent()], 2000);
      expect(seen.map((h) => h.authorization)).toEqual([
        "Bearer first.token.value",
        "Bearer rotated.token.value",
        undefined,
      ]);
      let err: unknown;
      try {
        await postToSink(url, [observedEvent()], 2000, join(dir, "missing"));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(FastfenceError);
      expect((err as FastfenceError).retriable).toBe(true);
      expect(seen).toHaveLength(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await new Promise<void>((r) => sink.close(() => r()));
    }
  });
});
