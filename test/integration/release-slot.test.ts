// Needs real kube-apiserver (+ etcd): admission on the release request; recover as itself.
// `fastfence release-slot` on a real kube-apiserver with the shipped CRDs, RBAC and
// admission policies, and the real recover stage (hostFunction, its own ServiceAccount,
// its reconciler): a final FenceFailed incident is closed with reason SlotReleased (its
// storm-guard slot freed) once an operator asks; an incident still being retried is
// refused and left untouched; no fastfence stage identity may set the request itself; the
// command as a process answers a repeat with "already released".
import { CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { hostFunction } from "../../app/host.ts";
import { releaseSlot, ReleaseRefusedError } from "../../cli/release-slot.ts";
import {
  emptyStatus,
  newIncident,
  RELEASE_SLOT_ANNOTATION,
  transition,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import { Kube, KubeApiError } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { createLogger } from "../../infra/log.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { ROOT } from "../../harness/env/base.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { freePort } from "../../harness/env/ports.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { createFencingPolicy, FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";

const sa = (stage: string) => `system:serviceaccount:${NS}:fastfence-${stage}`;
const at = (s: number) => new Date(Date.now() - 60_000 + s * 1000).toISOString();

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  await createFencingPolicy(kc.makeApiClient(CustomObjectsApi), {
    fencing: { maxRounds: 2 },
    reconcile: { intervalMs: 500, stalledAfterMs: 0 },
  });
  const as = async (stage: string) =>
    serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount: `fastfence-${stage}` });
  const store = (k: KubeConfig) => new IncidentStore(new Kube(k, { requestTimeoutMs: 5000 }), NS);
  const stores = { confirm: store(await as("confirm")), fence: store(await as("fence")) };
  const recover = scope.add(
    await hostFunction({
      name: "recover",
      mode: { http: await freePort(), host: "127.0.0.1" },
      config: loadRuntimeConfig({
        FASTFENCE_NAMESPACE: NS,
        FASTFENCE_REPLICA: "recover-0",
        FASTFENCE_HTTP_AUTH: "none",
      }),
      kubeConfig: await as("recover"),
      log: createLogger("recover", { level: process.env.FASTFENCE_TEST_LOG ?? "warn" }),
    }),
  );
  return { cp, kc, stores, admin: new Kube(kc, { requestTimeoutMs: 5000 }), recover };
});

/** An incident written along the legal path by its owners, ending FenceFailed at `round`. */
async function failedIncident(node: string, round: number, retryNotBefore?: string): Promise<string> {
  const { stores } = env();
  const suspected = transition(emptyStatus(), "Suspected", at(1));
  const inc = await stores.confirm.create(newIncident(node, "boot-1", suspected));
  const name = inc.metadata.name;
  const write = async (who: "confirm" | "fence", status: NodeFenceStatus) => {
    const cur = await stores[who].get(name);
    await stores[who].writeStatus(name, cur!.metadata.resourceVersion!, status);
  };
  const confirmed = transition(suspected, "Confirmed", at(2), { confirmedBy: sa("confirm") });
  await write("confirm", confirmed);
  const fencing = transition(confirmed, "Fencing", at(3), { round, fencingBy: "fence-0" });
  await write("fence", fencing);
  await write(
    "fence",
    transition(fencing, "FenceFailed", at(4), {
      reason: "PowerOffNotConfirmed",
      message: "BMC unreachable",
      ...(retryNotBefore ? { retryNotBefore } : {}),
    }),
  );
  return name;
}

const opts = (incident: string, waitMs = 20_000) => ({
  incident,
  reason: "BMC dead, node powered off by hand (ticket 4711)",
  namespace: NS,
  policy: "default",
  waitMs,
});

describe("fastfence release-slot", () => {
  it("a fastfence stage cannot set the release request itself (admission)", async () => {
    const name = await failedIncident("node-x", 2);
    const custom = new Kube(
      await serviceAccountKubeConfig(env().kc, { namespace: NS, serviceAccount: "fastfence-fence" }),
      {
        requestTimeoutMs: 5000,
      },
    );
    const cur = await env().stores.fence.get(name);
    const body = {
      ...cur!,
      metadata: { ...cur!.metadata, annotations: { [RELEASE_SLOT_ANNOTATION]: "me" } },
    };
    const err = await custom
      .call("annotate", (a) =>
        a.custom.replaceNamespacedCustomObject({
          group: "fastfence.io",
          version: "v1alpha1",
          plural: "nodefences",
          namespace: NS,
          name,
          body,
        }),
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).status).toBe(403);
    expect((err as KubeApiError).message).toContain("operator's request");
  });

  it("refuses an incident that is still being retried, and writes nothing", async () => {
    const name = await failedIncident("node-y", 1, new Date(Date.now() + 3_600_000).toISOString());
    const before = await env().stores.fence.get(name);
    await expect(releaseSlot(env().admin, opts(name))).rejects.toBeInstanceOf(ReleaseRefusedError);
    await expect(releaseSlot(env().admin, opts(name))).rejects.toThrow(/still being retried \(round 1 of 2/);
    const after = await env().stores.fence.get(name);
    expect(after!.metadata.resourceVersion).toBe(before!.metadata.resourceVersion);
  });

  it("closes a final FenceFailed incident (SlotReleased) through recover, and says so", async () => {
    const name = await failedIncident("node-z", 2);
    const lines: string[] = [];
    const r = await releaseSlot(env().admin, opts(name), (l) => lines.push(l));
    expect(r).toMatchObject({ incident: name, node: "node-z", phase: "Closed", released: true });
    expect(lines.join("\n")).toContain("waiting for recover");
    const inc = await env().stores.fence.get(name);
    expect(inc!.status).toMatchObject({ phase: "Closed", reason: "SlotReleased" });
    expect(inc!.status!.message).toContain("ticket 4711");
    expect(inc!.status!.message).toContain("workloads stay");

    // The command as an operator runs it: a repeat is answered, not refused.
    const out = spawnSync(
      process.execPath,
      [
        "--disable-warning=ExperimentalWarning",
        join(ROOT, "cli/main.ts"),
        "release-slot",
        name,
        "--reason",
        "again",
        "-o",
        "json",
      ],
      {
        encoding: "utf8",
        timeout: 30_000,
        env: { ...process.env, KUBECONFIG: env().cp.kubeconfigPath, FASTFENCE_NAMESPACE: NS },
      },
    );
    expect(out.status, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({
      incident: name,
      released: true,
      message: "already released",
    });
  });

  it("names a missing incident and how to find a node's incidents", async () => {
    await expect(releaseSlot(env().admin, opts("no-such-incident"))).rejects.toThrow(
      /no NodeFence no-such-incident .*fastfence.io\/node=NODE/,
    );
  });
});
