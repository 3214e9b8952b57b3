// Needs real kube-apiservers (2, one etcd, own netns): one refuses with 429 (APF), one serves.
// A 429 means the API server refused the request before running it: its priority level is
// full (APF), or, right after it restarted, its storage is still initializing. fastfence's
// client (infra/kube/client.ts) sends such a request to the next server, reads and writes
// alike; every other HTTP answer stays final. Here a FlowSchema sends the test's user to a
// priority level with no seats of its own that rejects what it cannot run at once, and only
// the first server enforces it. APF still runs one request of a level when none runs (so a
// wide request is never starved): the test keeps one running, a ConfigMap create that a
// validating webhook of the test's holds for HOLD_MS; meanwhile the first server answers the
// user's other requests 429.
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import {
  AdmissionregistrationV1Api,
  FlowcontrolApiserverV1Api,
  RbacAuthorizationV1Api,
} from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { startApiServers, type ApiServers } from "../../harness/env/api-servers.ts";
import { issueCert } from "../../harness/env/pki.ts";
import { freePort } from "../../harness/env/ports.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { Kube, KubeApiError } from "../../infra/kube/client.ts";
import { waitUntil } from "../../harness/env/wait.ts";

const USER = "ff-refused";
const HOLD_MS = 15_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A validating webhook that answers "allowed" after HOLD_MS; registered for ConfigMaps named hold-*. */
async function holdingWebhook(e: ApiServers, onStop: (stop: () => Promise<void>) => void): Promise<void> {
  const c = await issueCert(
    e.dir,
    "hold-webhook",
    "/CN=hold-webhook",
    `subjectAltName=IP:${e.hostAddress}\nextendedKeyUsage=serverAuth\n`,
    e.ca,
  );
  const server = createServer({ cert: readFileSync(c.cert), key: readFileSync(c.key) }, (req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const uid = (JSON.parse(body) as { request: { uid: string } }).request.uid;
      setTimeout(() => {
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            apiVersion: "admission.k8s.io/v1",
            kind: "AdmissionReview",
            response: { uid, allowed: true },
          }),
        );
      }, HOLD_MS);
    });
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, e.hostAddress, r));
  onStop(() => new Promise<void>((r) => server.close(() => r())));
  const admin = e.kubeConfigFor(e.servers[1]!.url);
  await admin.makeApiClient(AdmissionregistrationV1Api).createValidatingWebhookConfiguration({
    body: {
      metadata: { name: "hold" },
      webhooks: [
        {
          name: "hold.fastfence.test",
          clientConfig: {
            url: `https://${e.hostAddress}:${port}/`,
            caBundle: readFileSync(e.ca.caCert).toString("base64"),
          },
          rules: [
            { operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"] },
          ],
          matchConditions: [{ name: "hold-only", expression: "object.metadata.name.startsWith('hold-')" }],
          admissionReviewVersions: ["v1"],
          sideEffects: "None",
          failurePolicy: "Fail",
          timeoutSeconds: 30,
        },
      ],
    },
  });
}

describe("an API server that refuses with 429 (real kube-apiservers)", () => {
  const env = withEnv(async (scope) => {
    const e = scope.add(await startApiServers(2, { priorityAndFairness: "first" }));
    await holdingWebhook(e, (stop) => scope.add({ stop }));
    const admin = e.kubeConfigFor(e.servers[1]!.url);
    await admin.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
      body: {
        metadata: { name: USER },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: USER }],
      },
    });
    const fc = admin.makeApiClient(FlowcontrolApiserverV1Api);
    await fc.createPriorityLevelConfiguration({
      body: {
        metadata: { name: USER },
        spec: {
          type: "Limited",
          limited: {
            nominalConcurrencyShares: 0,
            lendablePercent: 0,
            borrowingLimitPercent: 0,
            limitResponse: { type: "Reject" },
          },
        },
      },
    });
    await fc.createFlowSchema({
      body: {
        metadata: { name: USER },
        spec: {
          matchingPrecedence: 100,
          priorityLevelConfiguration: { name: USER },
          rules: [
            {
              subjects: [{ kind: "User", user: { name: USER } }],
              resourceRules: [
                {
                  verbs: ["*"],
                  apiGroups: ["*"],
                  resources: ["*"],
                  namespaces: ["*"],
                  clusterScope: true,
                },
              ],
            },
          ],
        },
      },
    });
    return e;
  });

  it("a read and a write refused by one server are done by the next; only a 429 everywhere is an error", async () => {
    const e = env();
    const [a, b] = [e.servers[0]!.url, e.servers[1]!.url];
    const kc = await e.kubeConfigAs(a, USER);
    const both = new Kube(kc, { extraEndpoints: [b] });
    const onlyA = new Kube(kc);
    // One request of the user's runs on a (held by the webhook); the premise: a refuses the
    // rest (once its APF has read the FlowSchema and the webhook configuration is in force).
    const holder = new Kube(kc, { requestTimeoutMs: HOLD_MS + 10_000 });
    let n = 0;
    const holds: Promise<unknown>[] = [];
    const status = await waitUntil(
      "server a refusing the user with 429",
      async () => {
        holds.push(
          holder
            .apisAt(a)
            .core.createNamespacedConfigMap({
              namespace: "default",
              body: { metadata: { name: `hold-${n++}` } },
            })
            .catch((err: unknown) => err),
        );
        await sleep(300);
        const code = await onlyA
          .apisAt(a)
          .core.readNamespace({ name: "default" })
          .then(
            () => 200,
            (err: { code?: number }) => err.code,
          );
        return code === 429 ? code : undefined;
      },
      30_000,
      200,
    );
    expect(status).toBe(429);
    const t0 = Date.now();

    const ns = await both.read("read the default Namespace", (x) =>
      x.core.readNamespace({ name: "default" }),
    );
    expect(ns.metadata?.name).toBe("default");
    expect(both.lastServer).toBe(b);
    const cm = await both.call("create a ConfigMap", (x) =>
      x.core.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: `refused-${process.pid}` } },
      }),
    );
    expect(cm.metadata?.name).toBe(`refused-${process.pid}`);
    expect(both.lastServer).toBe(b);
    // Other answers stay final: a 409 from b is not tried on a.
    const again = await both
      .call("create the same ConfigMap", (x) =>
        x.core.createNamespacedConfigMap({
          namespace: "default",
          body: { metadata: { name: `refused-${process.pid}` } },
        }),
      )
      .catch((err: unknown) => err);
    expect(again).toBeInstanceOf(KubeApiError);
    expect((again as KubeApiError).status).toBe(409);

    // Every server refusing: the 429 itself, typed and retriable.
    for (const op of [
      () => onlyA.read("read the default Namespace", (x) => x.core.readNamespace({ name: "default" })),
      () =>
        onlyA.call("create a ConfigMap", (x) =>
          x.core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "never" } } }),
        ),
    ]) {
      const err = await op().catch((x: unknown) => x);
      expect(err).toBeInstanceOf(KubeApiError);
      expect((err as KubeApiError).status).toBe(429);
      expect((err as KubeApiError).retriable).toBe(true);
    }
    expect(Date.now() - t0).toBeLessThan(HOLD_MS); // all of it while the held request ran
    await Promise.all(holds);
  });
});
