// A simulated compact cluster running the whole fastfence pipeline inside the test
// process, on the real servers: etcd, kube-apiserver, controller-manager and scheduler;
// one kwok process per node; a TCP "kubelet port" listener per node (what the observers
// probe); a lab Redfish BMC per node whose ForceOff kills everything "on" that node
// (kwok, the listener, and that node's event-source and function replicas); one Kafka
// broker; and on every node one event-source replica and one replica of each function
// (Kafka runtime), each running as its own service-account identity with the RBAC of
// knative/base/rbac and the admission policies of knative/base/admission installed (the
// event source with a token bound to a Pod on its node, so its heartbeat Lease is its own).
// Harness code for the integration tests: it never talks to anything off loopback.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig as KubeConfigClass,
  StorageV1Api,
  type KubeConfig,
} from "@kubernetes/client-node";
import { join } from "node:path";
import { systemClock } from "../../core/clock.ts";
import type { FencingPolicySpecInput } from "../../core/policy.ts";
import { KafkaJsBus } from "../../infra/bus/kafkajs-bus.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { createLogger } from "../../infra/log.ts";
import { hostFunction, pipelineTopics, type HostedFunction } from "../../app/host.ts";
import { stageNames } from "../../functions/registry.ts";
import type { Component } from "../../events/catalog.ts";
import { PROBE_ADDRESS_ANNOTATION, startEventSource, type EventSource } from "../../source/event-source.ts";
import { LabRedfishServer } from "../emulators/redfish/server.ts";
import {
  FASTFENCE_NAMESPACE,
  createBmcSecret,
  createFencingPolicy,
  redfishLevel,
} from "../kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../kube/identity.ts";
import { applyFastfenceCrds, applyObjects, readManifests } from "./apply.ts";
import { ROOT, sleep } from "./base.ts";
import { startControlPlane, type ControlPlane } from "./controlplane.ts";
import { startKafka, type KafkaCluster } from "./kafka.ts";
import { startKwokNodes, type KwokNodes } from "./kwok.ts";
import { freePort } from "./ports.ts";
import { ManagedProcess } from "./process.ts";
import { makeTempDir, removeTempDir } from "./registry.ts";
import { EnvScope } from "./scope.ts";
import { CuttableRelay } from "./tcp-cut.ts";

export const NAMESPACE = FASTFENCE_NAMESPACE;

export interface SimNodeParts {
  name: string;
  probePort: number;
  listener: ManagedProcess;
  bmc: LabRedfishServer;
  source?: EventSource;
  functions: HostedFunction[];
  buses: KafkaJsBus[];
  /** Set when the node was crashed or powered off. */
  downAt?: number;
}

export interface PipelineCluster {
  cp: ControlPlane;
  kwok: KwokNodes;
  kafka: KafkaCluster;
  nodes: Map<string, SimNodeParts>;
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  storage: StorageV1Api;
  custom: CustomObjectsApi;
  /** SIGKILL everything on the node (a crash); the BMC stays up and reports On. */
  crash(node: string): Promise<number>;
  /** Cut the node off from its peers only: its probed port stops answering, its processes and API access stay. */
  partitionFromPeers(node: string): Promise<void>;
  /** Undo partitionFromPeers. */
  healPartition(node: string): Promise<void>;
  /**
   * Stop the event-source and/or function replicas on a healthy node (a crashed pod). With
   * `cutApi`, the node's function replicas first lose their API connections (every one,
   * at once, as when a node dies): nothing they were doing can write anything afterwards.
   */
  crashReplicas(
    node: string,
    which: { source?: boolean; functions?: string[]; cutApi?: boolean },
  ): Promise<void>;
  stop(): Promise<void>;
}

const log = createLogger("test-cluster", { level: process.env.FASTFENCE_TEST_LOG ?? "warn" });

function listenerScript(port: number): string[] {
  return ["-e", `require("net").createServer((s) => s.destroy()).listen(${port}, "127.0.0.1")`];
}

export async function startPipelineCluster(
  opts: {
    nodes?: string[];
    policy?: FencingPolicySpecInput;
    /** Extra runtime settings (FASTFENCE_* environment) for every function replica. */
    runtimeEnv?: Record<string, string>;
  } = {},
): Promise<PipelineCluster> {
  const names = opts.nodes ?? ["node-a", "node-b", "node-c"];
  const scope = new EnvScope();
  const dir = makeTempDir("pipeline");
  scope.add({ stop: async () => removeTempDir(dir) });
  try {
    const [cp, kafka] = await Promise.all([
      startControlPlane({ controllerManager: true, scheduler: true }).then((c) => scope.add(c)),
      startKafka({ brokers: 1, properties: { "group.min.session.timeout.ms": 1000 } }).then((k) =>
        scope.add(k),
      ),
    ]);
    const kc = cp.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    await applyFastfenceCrds(kc);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    // Every component runs as its own service-account identity with exactly the RBAC of
    // knative/base/rbac, under the S6 admission policy — as deployed. The cluster has the
    // OpenShift machine API's MachineHealthCheck CRD, so also the openshift overlay's grant
    // to read MHCs in openshift-machine-api (without it confirm and fence fail closed: 403).
    await applyObjects(kc, [
      ...readManifests(join(ROOT, "knative/base/rbac"), (o) => o.kind !== "Kustomization"),
      ...readManifests(join(ROOT, "knative/base/admission"), (o) => o.kind !== "Kustomization"),
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "openshift-machine-api" } },
      ...readManifests(join(ROOT, "knative/overlays/openshift/remediators-rbac.yaml")),
    ]);
    // A real service-account token (TokenRequest API) for each component's ServiceAccount.
    // Each node's function replicas reach the API through a relay of their own, so a test
    // can cut one node's API connections (crashReplicas with cutApi).
    const apiUrl = new URL(kc.getCurrentCluster()!.server);
    const relays = new Map<string, CuttableRelay>();
    for (const name of names) {
      const relay = await CuttableRelay.start({ host: apiUrl.hostname, port: Number(apiUrl.port) });
      scope.add({ stop: () => relay.stop() });
      relays.set(name, relay);
    }
    const identityKc = async (component: string, viaNode?: string): Promise<KubeConfig> => {
      const tr = await core.createNamespacedServiceAccountToken({
        name: `fastfence-${component}`,
        namespace: NAMESPACE,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      const direct = kc.getCurrentCluster()!;
      const relay = viaNode ? relays.get(viaNode) : undefined;
      const cluster = relay
        ? { ...direct, server: `${apiUrl.protocol}//${apiUrl.hostname}:${relay.port}` }
        : direct;
      const k = new KubeConfigClass();
      k.loadFromOptions({
        clusters: [cluster],
        users: [{ name: component, token: tr.status!.token }],
        contexts: [{ name: component, cluster: cluster.name, user: component }],
        currentContext: component,
      });
      return k;
    };
    const kwok = scope.add(
      await startKwokNodes(cp, names, { labels: { "node-role.kubernetes.io/control-plane": "" } }),
    );

    const nodes = new Map<string, SimNodeParts>();
    for (const name of names) {
      const probePort = await freePort();
      const listener = ManagedProcess.spawn({
        name: `kubelet-port-${name}`,
        command: process.execPath,
        args: listenerScript(probePort),
        dir,
      });
      scope.add({ stop: () => listener.stop(500) });
      const parts: SimNodeParts = {
        name,
        probePort,
        listener,
        bmc: undefined as unknown as LabRedfishServer,
        functions: [],
        buses: [],
      };
      const password = `pw-${name}-${Math.random().toString(36).slice(2)}`;
      parts.bmc = new LabRedfishServer({
        username: "fence",
        password,
        systemId: name,
        sessions: true,
        hooks: { powerOff: () => powerCut(parts), powerOn: () => undefined },
      });
      await parts.bmc.start();
      scope.add({ stop: () => parts.bmc.stop() });
      await createBmcSecret(core, name, "fence", password);
      const node = await core.readNode({ name });
      node.metadata!.annotations = {
        ...node.metadata!.annotations,
        [PROBE_ADDRESS_ANNOTATION]: `127.0.0.1:${probePort}`,
      };
      await core.replaceNode({ name, body: node });
      nodes.set(name, parts);
    }

    const base: FencingPolicySpecInput = {
      probe: { intervalMs: 100, timeoutMs: 150, observersPerNode: 2 },
      // below the harness levels' 5 s (the timeout chain, core/policy.ts)
      timeouts: { bmcCallTimeoutMs: 2000 },
      suspicion: { missThreshold: 3, minSuspectMs: 250 },
      corroboration: { quorum: 2, evidenceWindowMs: 5000 },
      fencing: {
        retryBackoffMs: 500,
        nodes: names.map((name) => ({
          nodeSelector: { names: [name] },
          levels: [redfishLevel("127.0.0.1", nodes.get(name)!.bmc.port, name)],
        })),
      },
    };
    // Section-wise merge: a test's `policy` overrides fields inside each section.
    const policy: FencingPolicySpecInput = { ...base };
    for (const [k, v] of Object.entries(opts.policy ?? {}))
      (policy as Record<string, unknown>)[k] =
        v && typeof v === "object" && !Array.isArray(v)
          ? { ...((base as Record<string, object>)[k] ?? {}), ...v }
          : v;
    const custom = kc.makeApiClient(CustomObjectsApi);
    await createFencingPolicy(custom, policy);

    const admin = new KafkaJsBus({
      brokers: kafka.bootstrap,
      clientId: "test-admin",
      security: kafka.clientSecurity("admin"),
    });
    await admin.ensureTopics(pipelineTopics(1));
    await admin.close();

    // One event-source replica and one replica of every function "on" each node.
    const resolved = (await import("../../core/policy.ts")).resolvePolicy(policy);
    for (const parts of nodes.values()) {
      const replica = (fn: string) => `${fn}-${parts.name}`;
      const srcBus = new KafkaJsBus({
        brokers: kafka.bootstrap,
        clientId: replica("source"),
        security: kafka.clientSecurity("event-source"),
      });
      parts.buses.push(srcBus);
      parts.source = await startEventSource({
        // bound to a Pod on its node: the token carries the node claim the heartbeat-Lease
        // admission policy (knative/base/admission) requires, as a DaemonSet pod's does
        kubeConfig: await serviceAccountKubeConfig(kc, {
          namespace: NAMESPACE,
          serviceAccount: "fastfence-source",
          node: parts.name,
        }),
        bus: srcBus,
        clock: systemClock,
        log: log.child({ component: "event-source", replica: replica("source") }),
        config: {
          replica: replica("source"),
          node: parts.name,
          probe: resolved.probe,
          leaseStaleMs: resolved.suspicion.leaseStaleMs,
          heartbeatNamespace: NAMESPACE,
        },
      });
      for (const fn of stageNames()) {
        const bus = new KafkaJsBus({
          brokers: kafka.bootstrap,
          clientId: replica(fn),
          sessionTimeoutMs: 3000,
          security: kafka.clientSecurity(fn as Component),
        });
        parts.buses.push(bus);
        const config = loadRuntimeConfig({
          FASTFENCE_NAMESPACE: NAMESPACE,
          FASTFENCE_REPLICA: replica(fn),
          ...opts.runtimeEnv,
        });
        parts.functions.push(
          await hostFunction({
            name: fn,
            mode: { kafka: true },
            config,
            kubeConfig: await identityKc(fn, parts.name),
            bus,
            log: log.child({ component: fn }),
          }),
        );
      }
    }
    await Promise.all(
      [...nodes.values()].flatMap((p) => [p.source!.ready, ...p.functions.map((f) => f.ready)]),
    );
    const everything = { source: true, functions: stageNames() };
    scope.add({
      stop: async () => void (await Promise.all([...nodes.values()].map((p) => stopReplicas(p, everything)))),
    });

    async function stopReplicas(
      p: SimNodeParts,
      which: { source?: boolean; functions?: string[] },
    ): Promise<void> {
      const fnSet = which.functions ?? [];
      if (which.source) {
        await p.source?.stop().catch(() => undefined);
        p.source = undefined;
      }
      const keep: HostedFunction[] = [];
      for (const f of p.functions) {
        if (fnSet.includes(f.name)) await f.stop().catch(() => undefined);
        else keep.push(f);
      }
      p.functions = keep;
      if (which.source && p.functions.length === 0)
        await Promise.all(p.buses.map((b) => b.close().catch(() => undefined)));
    }

    async function powerCut(p: SimNodeParts): Promise<void> {
      p.downAt ??= Date.now();
      await Promise.all([
        kwok
          .byName(p.name)
          .kill()
          .catch(() => undefined),
        p.listener.kill().catch(() => undefined),
      ]);
      void stopReplicas(p, everything);
    }

    return {
      cp,
      kwok,
      kafka,
      nodes,
      kc,
      core,
      apps: kc.makeApiClient(AppsV1Api),
      storage: kc.makeApiClient(StorageV1Api),
      custom,
      crash: async (name) => {
        const p = nodes.get(name)!;
        const t0 = Date.now();
        p.downAt = t0;
        await Promise.all([kwok.byName(name).kill(), p.listener.kill()]);
        await stopReplicas(p, everything);
        return t0;
      },
      crashReplicas: async (name, which) => {
        if (which.cutApi) relays.get(name)!.cut();
        await stopReplicas(nodes.get(name)!, which);
      },
      partitionFromPeers: async (name) => nodes.get(name)!.listener.kill(),
      healPartition: async (name) => {
        const p = nodes.get(name)!;
        p.listener = ManagedProcess.spawn({
          name: `kubelet-port-${name}`,
          command: process.execPath,
          args: listenerScript(p.probePort),
          dir,
        });
        scope.add({ stop: () => p.listener.stop(500) });
      },
      stop: () => scope.stopAll(),
    };
  } catch (err) {
    await scope.stopAll().catch(() => undefined);
    throw err;
  }
}

export { sleep };
