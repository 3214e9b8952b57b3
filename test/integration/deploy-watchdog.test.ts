// Needs real kustomize, kube-apiserver: SCC use rights and watchdog reports under admission.
// The watchdog's deployment (issue 18 item 5), for real: the rendered overlays (real
// kustomize) give the event source the host's /dev and a privileged securityContext, and
// on OpenShift bind its ServiceAccount to the built-in `privileged` SCC through a
// RoleBinding (no custom SCC); a kube-apiserver holding OpenShift's ClusterRole for that
// SCC confirms that only fastfence-source may `use` it, and only in fastfence's namespace.
// Then the report path on the same API server with the shipped RBAC and admission
// policies: each node's agent (source/watchdog-agent.ts) on a real FIFO device (the lab's
// emulated watchdog) or on a path that cannot be opened writes its report on its own
// heartbeat Lease as its node's event source; confirm's pass (infra/runtime/
// watchdog-report.ts) turns that into the FencingPolicy's WatchdogsArmed condition (False
// naming the node and why, True once it is armed), its Events and
// fastfence_watchdog_armed{node}. The report on the real API server states the timeout and
// the pet grace the agent really uses (the device's timeout — here the lab emulation's —
// never the per-node annotation's, which only refuses a device whose timeout differs), and
// fence's watchdog level waits for the longer grace.
import { CoreV1Api, CustomObjectsApi, AuthorizationV1Api, type V1Node } from "@kubernetes/client-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { parseWatchdogReport, WATCHDOG_ANNOTATION } from "../../core/watchdog.ts";
import { NODE_TIMEOUT_ANNOTATION, parseNodeTimeout } from "../../core/watchdog-status.ts";
import { applyObjects, readManifests, shippedAccessControl } from "../../harness/env/apply.ts";
import { ROOT } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { render, type KubeObject } from "../../harness/kustomize.ts";
import { Kube } from "../../infra/kube/client.ts";
import { LeaseManager } from "../../infra/kube/lease.ts";
import { NodeOps } from "../../infra/kube/nodes.ts";
import type { PolicyCondition } from "../../infra/kube/policy-status.ts";
import { WatchdogConditionReporter } from "../../infra/kube/watchdog-status.ts";
import { createLogger } from "../../infra/log.ts";
import { createFunctionMetrics } from "../../infra/metrics.ts";
import { watchdogReportPass } from "../../infra/runtime/watchdog-report.ts";
import { EmulatedWatchdog } from "../../lab/watchdog.ts";
import { resolvePolicy } from "../../core/policy.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { watchdogArmingFor } from "../../source/watchdog-settings.ts";
import { watchdogStep } from "../../functions/fence/watchdog-level.pure.ts";
import { startWatchdogAgent, type WatchdogAgent } from "../../source/watchdog-agent.ts";

const FP = { group: "fastfence.io", version: "v1alpha1", plural: "fencingpolicies" };
const NODES = ["node-a", "node-b"];
const log = createLogger("deploy-watchdog-test", { level: "silent" });
const dir = mkdtempSync(join(tmpdir(), "ff-deploy-wd-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Pod = {
  securityContext?: Record<string, unknown>;
  containers: {
    name: string;
    env?: { name: string; value?: string; valueFrom?: { configMapKeyRef?: { key: string } } }[];
    volumeMounts?: { name: string; mountPath: string }[];
    securityContext?: Record<string, unknown>;
  }[];
  volumes?: { name: string; hostPath?: { path: string; type?: string } }[];
  serviceAccountName?: string;
};

for (const overlay of ["vanilla", "openshift"]) {
  describe(`watchdog deployment: ${overlay}`, () => {
    const objs = render(join(ROOT, "knative/overlays", overlay));
    const ds = objs.find((o) => o.kind === "DaemonSet") as KubeObject & {
      spec: { template: { spec: Pod } };
    };
    const pod = ds.spec.template.spec;
    const c = pod.containers[0]!;
    const runtime = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === "fastfence-runtime") as
      (KubeObject & { data: Record<string, string> }) | undefined;

    it("the event source opens the host's watchdog: /dev mounted, privileged and root, the device configured under it", () => {
      const vol = pod.volumes?.find((v) => v.hostPath?.path === "/dev");
      expect(vol?.hostPath?.type).toBe("Directory"); // present on every node: the pod always starts
      const mount = c.volumeMounts?.find((m) => m.name === vol!.name);
      expect(mount?.mountPath).toBe("/host/dev");
      expect(c.securityContext).toMatchObject({ privileged: true, runAsUser: 0 });
      const dev = c.env?.find((e) => e.name === "FASTFENCE_WATCHDOG_DEVICE");
      const key = dev?.valueFrom?.configMapKeyRef?.key;
      expect(key).toBe("watchdog.device");
      expect(runtime!.data[key!]).toBe(`${mount!.mountPath}/watchdog`);
      expect(c.env?.some((e) => e.name === "FASTFENCE_WATCHDOG_TIMEOUT_MS")).toBe(true);
    });

    it("the shipped settings arm nothing by themselves: without a watchdog level in the policy, not armed", () => {
      const config = loadRuntimeConfig({
        FASTFENCE_WATCHDOG_DEVICE: runtime!.data["watchdog.device"],
        FASTFENCE_WATCHDOG_TIMEOUT_MS: runtime!.data["watchdog.timeoutMs"],
      });
      expect(watchdogArmingFor(config, resolvePolicy({}), { name: "node-a" })).toMatchObject({
        arm: false,
        code: "NoWatchdogLevel",
      });
    });

    it("no custom SecurityContextConstraints", () => {
      expect(objs.filter((o) => o.kind === "SecurityContextConstraints")).toEqual([]);
    });
  });
}

// OpenShift's ClusterRole for its built-in `privileged` SCC, as every OpenShift 4 cluster has it.
const SCC_ROLE = {
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "ClusterRole",
  metadata: { name: "system:openshift:scc:privileged" },
  rules: [
    {
      apiGroups: ["security.openshift.io"],
      resources: ["securitycontextconstraints"],
      resourceNames: ["privileged"],
      verbs: ["use"],
    },
  ],
};

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  const scc = readManifests(join(ROOT, "knative/overlays/openshift/scc.yaml"));
  await applyObjects(kc, [...shippedAccessControl(), SCC_ROLE, ...scc]);
  const core = kc.makeApiClient(CoreV1Api);
  for (const name of NODES)
    await core.createNode({
      body: { metadata: { name }, status: { nodeInfo: { bootID: `boot-${name}` } as never } },
    });
  for (const name of NODES) {
    const n = await core.readNode({ name });
    n.status = {
      ...n.status,
      conditions: [{ type: "Ready", status: "True", reason: "KubeletReady" }],
    };
    await core.replaceNodeStatus({ name, body: n });
  }
  const as = (serviceAccount: string, node?: string) =>
    serviceAccountKubeConfig(kc, {
      namespace: FASTFENCE_NAMESPACE,
      serviceAccount,
      ...(node ? { node } : {}),
    });
  const sources = new Map<string, Kube>();
  for (const n of NODES) sources.set(n, new Kube(await as("fastfence-source", n)));
  return {
    kc,
    core,
    custom: kc.makeApiClient(CustomObjectsApi),
    authz: kc.makeApiClient(AuthorizationV1Api),
    confirm: new Kube(await as("fastfence-confirm")),
    sources,
  };
});

describe("openshift: the event source may use the built-in privileged SCC, nobody else", () => {
  const can = async (sa: string, namespace: string) =>
    (
      await env().authz.createSubjectAccessReview({
        body: {
          spec: {
            user: `system:serviceaccount:${FASTFENCE_NAMESPACE}:${sa}`,
            groups: ["system:serviceaccounts", `system:serviceaccounts:${FASTFENCE_NAMESPACE}`],
            resourceAttributes: {
              group: "security.openshift.io",
              resource: "securitycontextconstraints",
              name: "privileged",
              verb: "use",
              namespace,
            },
          },
        },
      })
    ).status?.allowed === true;
  it("fastfence-source in fastfence-system: yes; in another namespace, or as confirm or fence: no", async () => {
    expect(await can("fastfence-source", FASTFENCE_NAMESPACE)).toBe(true);
    expect(await can("fastfence-source", "default")).toBe(false);
    expect(await can("fastfence-confirm", FASTFENCE_NAMESPACE)).toBe(false);
    expect(await can("fastfence-fence", FASTFENCE_NAMESPACE)).toBe(false);
  });
});

describe("a node whose watchdog cannot be opened: the report, the condition, the Events, the metric", () => {
  const agents: WatchdogAgent[] = [];
  const devices: EmulatedWatchdog[] = [];
  afterAll(async () => {
    for (const a of agents) await a.stop();
    for (const d of devices) d.stop();
  });

  /** One node's agent, and its event source's heartbeat renewal carrying the report. */
  async function startNode(node: string, device: string | EmulatedWatchdog, timeoutMs = 5000) {
    const nodeObj = async (): Promise<V1Node> => env().core.readNode({ name: node });
    let self = await nodeObj();
    const agent = await startWatchdogAgent({
      config: {
        devicePath: typeof device === "string" ? device : device.path,
        timeoutMs,
        renewGraceMs: 5000,
        petIntervalMs: 200,
        emulation: "lab-fifo",
      },
      node,
      bootId: () => `boot-${node}`,
      clusterSize: () => NODES.length,
      nodeTimeout: () => parseNodeTimeout(self.metadata?.annotations?.[NODE_TIMEOUT_ANNOTATION]),
      log,
    });
    agents.push(agent);
    const leases = new LeaseManager(env().sources.get(node)!, {
      namespace: FASTFENCE_NAMESPACE,
      durationSeconds: 10,
    });
    const renew = async () => {
      self = await nodeObj();
      const r = await leases.acquire(heartbeatLeaseName(node), `source-${node}`, Date.now(), {
        annotations: () => agent.annotations(),
      });
      expect(r.acquired).toBe(true);
      agent.onRenewed();
    };
    await renew();
    // The agent opens the device on the first acknowledged renewal; the next one carries the result.
    for (let i = 0; i < 20 && agent.report().reason?.startsWith("waiting"); i++)
      await new Promise((r) => setTimeout(r, 50));
    await renew();
    return agent;
  }

  const condition = async () =>
    (
      (await env().custom.getClusterCustomObject({ ...FP, name: "default" })) as {
        status?: { conditions?: PolicyCondition[] };
      }
    ).status?.conditions?.find((c) => c.type === "WatchdogsArmed");
  const events = async (reason: string) =>
    (
      await env().core.listNamespacedEvent({
        namespace: "default",
        fieldSelector: `involvedObject.kind=FencingPolicy,involvedObject.name=default,reason=${reason}`,
      })
    ).items;

  it("node-a's device is missing: WatchdogsArmed=False naming it and why, one Warning, gauge 0; armed later: True, gauge 1", async () => {
    await env().custom.createClusterCustomObject({
      ...FP,
      body: {
        apiVersion: "fastfence.io/v1alpha1",
        kind: "FencingPolicy",
        metadata: { name: "default" },
        spec: {},
      },
    });
    // node-b: its annotation agrees with its (emulated) device's timeout; the device's is reported.
    await env().core.patchNode({
      name: "node-b",
      body: [{ op: "add", path: "/metadata/annotations", value: { [NODE_TIMEOUT_ANNOTATION]: "7000" } }],
    });
    const wdB = new EmulatedWatchdog(join(dir, "wd-b"), 7000, () => undefined);
    wdB.start();
    devices.push(wdB);
    await startNode("node-b", wdB, 7000);
    const a = await startNode("node-a", join(dir, "no-such-watchdog"));
    expect(a.report()).toMatchObject({ armed: false, reason: expect.stringContaining("ENOENT") });

    const lease = await env()
      .sources.get("node-b")!
      .call("read lease", (api) =>
        api.coordination.readNamespacedLease({
          name: heartbeatLeaseName("node-b"),
          namespace: FASTFENCE_NAMESPACE,
        }),
      );
    const onLease = parseWatchdogReport(lease.metadata?.annotations?.[WATCHDOG_ANNOTATION]);
    expect(onLease).toEqual({
      ok: true,
      report: { armed: true, timeoutMs: 7000, bootId: "boot-node-b", renewGraceMs: 5000 },
    });
    // fence's watchdog level, reading the Lease: the agent's 5 s grace counts over the policy's 2 s.
    const seen = {
      report: lease.metadata?.annotations?.[WATCHDOG_ANNOTATION],
      watchSyncedSince: 0,
      lastRenewalSeenAt: 0,
      lastVouchSeenAt: undefined,
    };
    const plan = { level: 0, bootId: "boot-node-b", renewGraceMs: 2000, marginMs: 2000 };
    expect(watchdogStep(plan, seen, 2000 + 7000 + 2000, 60_000).kind).toBe("wait");
    expect(watchdogStep(plan, seen, 5000 + 7000 + 2000, 60_000)).toMatchObject({
      kind: "expired",
      proof: { renewGraceMs: 5000, timeoutMs: 7000 },
    });

    const metrics = createFunctionMetrics({ defaultMetrics: false });
    const reporter = new WatchdogConditionReporter(env().confirm, {
      component: "confirm",
      instance: "confirm-a",
    });
    const pass = (shown = new Set<string>()) =>
      watchdogReportPass(
        {
          kube: env().confirm,
          namespace: FASTFENCE_NAMESPACE,
          nodes: new NodeOps(env().confirm),
          reporter,
          metrics,
        },
        Date.now(),
        shown,
      );
    await pass();
    const c1 = await condition();
    expect(c1).toMatchObject({ status: "False", reason: "WatchdogNotArmed" });
    expect(c1!.message).toMatch(/node-a: cannot open watchdog .*no-such-watchdog: ENOENT/);
    expect(c1!.message).not.toMatch(/node-b/);
    const gauge = async () =>
      Object.fromEntries(
        (await metrics.watchdogArmed.get()).values.map((v) => [String(v.labels.node), v.value]),
      );
    expect(await gauge()).toEqual({ "node-a": 0, "node-b": 1 });
    await pass(); // nothing changed: no second write, no second Event
    expect(await events("WatchdogNotArmed")).toHaveLength(1);

    // node-a gets a device: its agent restarts (as a pod restart would) and arms it.
    await a.stop();
    const wdA = new EmulatedWatchdog(join(dir, "wd-a"), 5000, () => undefined);
    wdA.start();
    devices.push(wdA);
    await startNode("node-a", wdA);
    await pass();
    expect(await condition()).toMatchObject({ status: "True", reason: "AllReportedArmed" });
    expect(await events("WatchdogsArmed")).toHaveLength(1);
    expect(await gauge()).toEqual({ "node-a": 1, "node-b": 1 });
  });
});
