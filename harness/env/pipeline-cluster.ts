// A simulated compact cluster running the whole fastfence pipeline inside the test
// process, on the real servers: etcd, kube-apiserver, controller-manager and scheduler;
// one kwok process per node; a TCP "kubelet port" listener per node (what the observers
// probe); a lab Redfish BMC per node whose ForceOff kills everything "on" that node
// (kwok, the listener, and that node's event-source and function replicas); the run's
// shared Kafka broker (shared-kafka.ts: reset when the cluster stops); and on every
// node one event-source replica and one replica of each function (Kafka runtime), each
// running as its own service-account identity with the RBAC of knative/base/rbac and the
// admission policies of knative/base/admission installed (the event source with a token
// bound to a Pod on its node, so its heartbeat Lease is its own).
// Harness code for the integration tests: it never talks to anything off loopback.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig as KubeConfigClass,
  StorageV1Api,
  type KubeConfig,
} from "@kubernetes/client-node";
import { connect } from "node:net";
import { join } from "node:path";
import type { FencingPolicySpecInput } from "../../core/policy.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { createLogger } from "../../infra/log.ts";
import { pipelineTopics } from "../../app/host.ts";
import { PROBE_ADDRESS_ANNOTATION } from "../../source/event-source.ts";
import { LabRedfishServer } from "../emulators/redfish/server.ts";
import {
  FASTFENCE_NAMESPACE,
  createBmcSecret,
  createFencingPolicy,
  redfishLevel,
} from "../kube/fencing-policy.ts";
import { applyFastfenceCrds, applyObjects, readManifests } from "./apply.ts";
import { ROOT, sleep } from "./base.ts";
import { startControlPlane, type ControlPlane } from "./controlplane.ts";
import type { KafkaClusterView } from "./kafka.ts";
import { startKwokNodes, type KwokNodes } from "./kwok.ts";
import {
  EVERYTHING,
  replicasReady,
  startReplicas,
  stopReplicas,
  type ReplicaEnv,
  type SimNodeParts,
} from "./pipeline-replicas.ts";
import { freePort } from "./ports.ts";
import { ManagedProcess } from "./process.ts";
import { makeTempDir, removeTempDir } from "./registry.ts";
import { EnvScope } from "./scope.ts";
import { sharedKafka } from "./shared-kafka.ts";
import { CuttableRelay } from "./tcp-cut.ts";
import { waitUntil } from "./wait.ts";
import { timedStart } from "./start-times.ts";

export { replicaName, type SimNodeParts } from "./pipeline-replicas.ts";
export const NAMESPACE = FASTFENCE_NAMESPACE;

export interface PipelineCluster {
  cp: ControlPlane;
  kwok: KwokNodes;
  /** The run's shared Kafka (shared-kafka.ts): reset when this cluster stops. */
  kafka: KafkaClusterView;
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
   * The node hangs (a long pause, a hung NIC): its kubelet (kwok) is frozen, its probed port
   * stops answering (its listener is frozen too: the kernel still completes connects) and its replicas stop renewing anything (they are stopped: nothing of a
   * hung node runs). Its BMC stays up and reports On; its boot ID does not change.
   */
  hang(node: string): Promise<number>;
  /**
   * A hung node runs again with the same boot ID: its kubelet thaws, its probed port
   * answers, then its replicas run again (new pod names, fresh consumer groups) and its
   * event source renews its heartbeat Lease.
   */
  resume(node: string): Promise<void>;
  /**
   * Bring a crashed or powered-off node back as a reboot does: its BMC reads On, its
   * probed (kubelet) port answers, then its kubelet (kwok) runs again with a new boot ID in status.nodeInfo.bootID and is Ready, then its
   * event-source and function replicas run again as new pods (new names: replicaName).
   * Returns the new boot ID once all of it is up.
   */
  reboot(node: string): Promise<string>;
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

/** Whether something accepts a TCP connection on the loopback port. */
function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, "127.0.0.1");
    sock.once("connect", () => resolve(true));
    sock.once("error", () => resolve(false));
    sock.once("close", () => sock.destroy());
  });
}

function listenerScript(port: number): string[] {
  return ["-e", `require("net").createServer((s) => s.destroy()).listen(${port}, "127.0.0.1")`];
}

async function startPipelineClusterNow(
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
      sharedKafka().then((k) => scope.add(k)),
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
    const identityKc = async (component: string, viaNode: string): Promise<KubeConfig> => {
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
        boots: 0,
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

    const admin = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "test-admin",
      security: kafka.clientSecurity("admin"),
    });
    await admin.ensureTopics(pipelineTopics(1));
    await admin.close();

    // One event-source replica and one replica of every function "on" each node.
    const replicaEnv: ReplicaEnv = {
      kc,
      kafka,
      log,
      policy: (await import("../../core/policy.ts")).resolvePolicy(policy),
      ...(opts.runtimeEnv ? { runtimeEnv: opts.runtimeEnv } : {}),
      identityKc,
    };
    for (const parts of nodes.values()) await startReplicas(replicaEnv, parts);
    await Promise.all([...nodes.values()].flatMap(replicasReady));
    const everything = EVERYTHING;
    scope.add({
      stop: async () => void (await Promise.all([...nodes.values()].map((p) => stopReplicas(p, everything)))),
    });

    /** A power cut's replica stops, still running in the background (a reboot waits for them). */
    const stopping = new Map<string, Promise<void>>();
    async function powerCut(p: SimNodeParts): Promise<void> {
      p.downAt ??= Date.now();
      await Promise.all([
        kwok
          .byName(p.name)
          .kill()
          .catch(() => undefined),
        p.listener.kill().catch(() => undefined),
      ]);
      stopping.set(p.name, stopReplicas(p, everything));
    }
    const spawnListener = (p: SimNodeParts): void => {
      p.listener = ManagedProcess.spawn({
        name: `kubelet-port-${p.name}`,
        command: process.execPath,
        args: listenerScript(p.probePort),
        dir,
      });
      const listener = p.listener;
      scope.add({ stop: () => listener.stop(500) });
    };

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
      hang: async (name) => {
        const p = nodes.get(name)!;
        const t0 = Date.now();
        kwok.byName(name).freeze();
        // Frozen, not gone: the kernel still accepts on the probed port, nothing answers.
        p.listener.signalGroup("SIGSTOP");
        await stopReplicas(p, everything);
        return t0;
      },
      resume: async (name) => {
        const p = nodes.get(name)!;
        kwok.byName(name).thaw();
        p.listener.signalGroup("SIGCONT");
        await waitUntil(`${name}'s port answers`, () => answers(p.probePort), 10_000, 50);
        p.boots++;
        await startReplicas(replicaEnv, p);
        await Promise.all(replicasReady(p));
      },
      partitionFromPeers: async (name) => nodes.get(name)!.listener.kill(),
      healPartition: async (name) => spawnListener(nodes.get(name)!),
      reboot: async (name) => {
        const p = nodes.get(name)!;
        await stopping.get(name);
        await stopReplicas(p, everything);
        await p.listener.kill();
        p.bmc.power = "On";
        spawnListener(p);
        await waitUntil(`${name}'s port answers`, () => answers(p.probePort), 10_000, 50);
        const kw = kwok.byName(name);
        await kw.restart({ reboot: true });
        relays.get(name)!.heal();
        p.boots++;
        await startReplicas(replicaEnv, p);
        await Promise.all(replicasReady(p));
        p.downAt = undefined;
        return kw.bootId;
      },
      stop: () => scope.stopAll(),
    };
  } catch (err) {
    await scope.stopAll().catch(() => undefined);
    throw err;
  }
}

export { sleep };

/** The whole pipeline in this process (its control plane and kwok starts are timed too); timed (start-times.ts). */
export function startPipelineCluster(
  opts: Parameters<typeof startPipelineClusterNow>[0] = {},
): Promise<PipelineCluster> {
  return timedStart("pipeline-cluster", `${opts.nodes?.length ?? 3} nodes`, () =>
    startPipelineClusterNow(opts),
  );
}
