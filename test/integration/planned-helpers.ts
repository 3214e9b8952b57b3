// Helpers of the planned-work acceptance test (pipeline-planned-work.test.ts): a record of
// every NodeFence status change as a watch delivers it (so a phase that lasts a few
// milliseconds, like Confirmed before Fencing, is still seen), merge patches of the
// FencingPolicy and of Nodes, the MachineConfig daemon's annotations, a medik8s
// NodeMaintenance, an OpenShift ClusterVersion, an operator's fence request made as a
// cluster admin, the event log, and a replay of a node's recorded misses. Test code only.
import {
  AuthenticationV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from "@kubernetes/client-node";
import { Kafka, logLevel } from "kafkajs";
import type { NodeFence, Phase } from "../../core/incident.ts";
import { BOOT_ID_LABEL, NODE_LABEL, bootIdLabel, incidentName } from "../../core/incident.ts";
import {
  MC_CURRENT_CONFIG_ANNOTATION,
  MC_DESIRED_CONFIG_ANNOTATION,
  MC_STATE_ANNOTATION,
  PAUSE_ANNOTATION,
} from "../../core/planned.ts";
import { EVENT_TYPES, parseEvent, TOPICS, type AnyFfEvent } from "../../events/catalog.ts";
import { decodeKafka, encodeKafka } from "../../events/codec.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { NAMESPACE, replicaName, type PipelineCluster } from "../../harness/env/pipeline-cluster.ts";
import type { LabRedfishServer } from "../../harness/emulators/redfish/server.ts";
import { stageNames } from "../../functions/registry.ts";
import { waitFor } from "./pipeline-helpers.ts";

const NODEFENCES = { group: "fastfence.io", version: "v1alpha1", plural: "nodefences" };
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** One status of one incident, when the watch delivered it. */
export interface Seen {
  at: number;
  name: string;
  node: string;
  phase: Phase;
  reason?: string;
  message?: string;
}

/** Every change of (phase, reason, message) of every NodeFence, from a watch (re-opened if it ends). */
export class IncidentHistory {
  readonly seen: Seen[] = [];
  private readonly last = new Map<string, string>();
  private ctl: AbortController | undefined;
  private stopped = false;

  private readonly kc: KubeConfig;
  private constructor(kc: KubeConfig) {
    this.kc = kc;
  }

  static async start(c: PipelineCluster): Promise<IncidentHistory> {
    const h = new IncidentHistory(c.kc);
    await h.open();
    return h;
  }

  private async open(): Promise<void> {
    const path = `/apis/fastfence.io/v1alpha1/namespaces/${NAMESPACE}/nodefences`;
    this.ctl = await new Watch(this.kc).watch(
      path,
      {},
      (_type, obj: NodeFence) => this.record(obj),
      () => {
        if (!this.stopped) setTimeout(() => void this.open().catch(() => undefined), 200);
      },
    );
  }

  private record(inc: NodeFence): void {
    const st = inc.status;
    if (!st) return;
    const key = JSON.stringify([st.phase, st.reason, st.message]);
    if (this.last.get(inc.metadata.name) === key) return;
    this.last.set(inc.metadata.name, key);
    this.seen.push({
      at: Date.now(),
      name: inc.metadata.name,
      node: inc.spec.nodeName,
      phase: st.phase,
      ...(st.reason !== undefined ? { reason: st.reason } : {}),
      ...(st.message !== undefined ? { message: st.message } : {}),
    });
  }

  of(name: string): Seen[] {
    return this.seen.filter((s) => s.name === name);
  }

  /** Waits until incident `name` shows a status matching `want` (phase, and reason if given). */
  async until(name: string, want: { phase: Phase | Phase[]; reason?: string }, timeoutMs: number) {
    const phases = Array.isArray(want.phase) ? want.phase : [want.phase];
    return waitFor(
      `${name} ${phases.join("|")}${want.reason ? `/${want.reason}` : ""}`,
      async () =>
        this.of(name).find(
          (s) => phases.includes(s.phase) && (want.reason === undefined || s.reason === want.reason),
        ),
      timeoutMs,
    );
  }

  /** The incident's statuses as lines, in ms from t0. */
  timeline(name: string, t0: number): string {
    return this.of(name)
      .map((s) => `  +${String(s.at - t0).padStart(6)} ms  ${s.phase}${s.reason ? ` ${s.reason}` : ""}`)
      .join("\n");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.ctl?.abort();
  }
}

/** The power commands a BMC received since `mark` (its stats.resets length before). */
export function commandsSince(bmc: LabRedfishServer, mark: number): string[] {
  return bmc.stats.resets.slice(mark).map((r) => r.type);
}

export async function patchPolicy(c: PipelineCluster, spec: Record<string, unknown>): Promise<void> {
  await c.custom.patchClusterCustomObject(
    {
      group: "fastfence.io",
      version: "v1alpha1",
      plural: "fencingpolicies",
      name: "default",
      body: { spec },
    },
    merge,
  );
}

export async function patchNode(c: PipelineCluster, name: string, body: object): Promise<void> {
  await c.core.patchNode({ name, body }, merge);
}

/** What the machine-config daemon does before it reboots a node into a new config: cordon, Working. */
export async function mcoUpdating(c: PipelineCluster, node: string): Promise<void> {
  await patchNode(c, node, {
    spec: { unschedulable: true },
    metadata: {
      annotations: {
        [MC_STATE_ANNOTATION]: "Working",
        [MC_CURRENT_CONFIG_ANNOTATION]: "rendered-master-old",
        [MC_DESIRED_CONFIG_ANNOTATION]: "rendered-master-new",
      },
    },
  });
}

/** What it does once the node is back: Done, current = desired, uncordon. */
export async function mcoDone(c: PipelineCluster, node: string): Promise<void> {
  await patchNode(c, node, {
    spec: { unschedulable: null },
    metadata: {
      annotations: {
        [MC_STATE_ANNOTATION]: "Done",
        [MC_CURRENT_CONFIG_ANNOTATION]: "rendered-master-new",
      },
    },
  });
}

const NODE_MAINTENANCES = {
  group: "nodemaintenance.medik8s.io",
  version: "v1beta1",
  plural: "nodemaintenances",
};

export async function createNodeMaintenance(c: PipelineCluster, node: string, reason: string) {
  const name = `nm-${node}`;
  await c.custom.createClusterCustomObject({
    ...NODE_MAINTENANCES,
    body: {
      apiVersion: "nodemaintenance.medik8s.io/v1beta1",
      kind: "NodeMaintenance",
      metadata: { name },
      spec: { nodeName: node, reason },
    },
  });
  return { name, delete: () => c.custom.deleteClusterCustomObject({ ...NODE_MAINTENANCES, name }) };
}

const CLUSTER_VERSIONS = { group: "config.openshift.io", version: "v1", plural: "clusterversions" };

/** ClusterVersion "version" with Progressing=True and `message` (set through the status subresource). */
export async function startUpgrade(c: PipelineCluster, message: string) {
  const cv = (await c.custom.createClusterCustomObject({
    ...CLUSTER_VERSIONS,
    body: {
      apiVersion: "config.openshift.io/v1",
      kind: "ClusterVersion",
      metadata: { name: "version" },
      spec: { clusterID: "5f2a8c1e-0b3d-4e6f-9a7b-1c2d3e4f5a6b", channel: "stable-4.16" },
    },
  })) as { metadata: { resourceVersion: string } };
  const now = new Date().toISOString();
  await c.custom.replaceClusterCustomObjectStatus({
    ...CLUSTER_VERSIONS,
    name: "version",
    body: {
      apiVersion: "config.openshift.io/v1",
      kind: "ClusterVersion",
      metadata: { name: "version", resourceVersion: cv.metadata.resourceVersion },
      spec: { clusterID: "5f2a8c1e-0b3d-4e6f-9a7b-1c2d3e4f5a6b", channel: "stable-4.16" },
      status: {
        availableUpdates: null,
        desired: { image: "quay.io/openshift-release-dev/ocp-release@sha256:0", version: "4.16.3" },
        observedGeneration: 1,
        versionHash: "h0",
        conditions: [
          { type: "Progressing", status: "True", lastTransitionTime: now, reason: "", message },
          { type: "Available", status: "True", lastTransitionTime: now, reason: "", message: "" },
        ],
      },
    },
  });
  return { delete: () => c.custom.deleteClusterCustomObject({ ...CLUSTER_VERSIONS, name: "version" }) };
}

/** Every planned-work state and policy setting these tests set, taken away (after a failed scenario). */
export async function resetPlannedWork(c: PipelineCluster): Promise<void> {
  await patchPolicy(c, { mode: null, paused: null, pausedReason: null, plannedWork: null });
  const nms = (await c.custom.listClusterCustomObject(NODE_MAINTENANCES)) as {
    items: { metadata: { name: string } }[];
  };
  for (const m of nms.items)
    await c.custom.deleteClusterCustomObject({ ...NODE_MAINTENANCES, name: m.metadata.name });
  await c.custom
    .deleteClusterCustomObject({ ...CLUSTER_VERSIONS, name: "version" })
    .catch((err: { code?: number }) => {
      if (err.code !== 404) throw err;
    });
  const none = {
    [PAUSE_ANNOTATION]: null,
    [MC_STATE_ANNOTATION]: null,
    [MC_DESIRED_CONFIG_ANNOTATION]: null,
  };
  for (const node of c.nodes.keys())
    await patchNode(c, node, { spec: { unschedulable: null }, metadata: { annotations: none } });
}

/**
 * `fastfence fence NODE --reason` done by hand: a NodeFence for the node's current boot,
 * created as a cluster admin (system:masters) whose user name the API server reports back
 * (SelfSubjectReview) and the request names.
 */
export async function requestFence(c: PipelineCluster, node: string, reason: string) {
  const kc = new KubeConfig();
  kc.loadFromFile(await c.cp.makeUserKubeconfig("alice", ["system:masters"]));
  const self = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
  const by = self.status!.userInfo!.username!;
  const bootId = (await c.core.readNode({ name: node })).status!.nodeInfo!.bootID;
  const name = incidentName(node, bootId);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const operatorRequest = { by, reason, at: new Date().toISOString() };
  try {
    await custom.createNamespacedCustomObject({
      ...NODEFENCES,
      namespace: NAMESPACE,
      body: {
        apiVersion: "fastfence.io/v1alpha1",
        kind: "NodeFence",
        metadata: { name, labels: { [NODE_LABEL]: node, [BOOT_ID_LABEL]: bootIdLabel(bootId) } },
        spec: { nodeName: node, bootId, operatorRequest },
      },
    });
  } catch (err) {
    // an incident of this boot is open already (a suspicion that led nowhere): ask on it
    if ((err as { code?: number }).code !== 409) throw err;
    await custom.patchNamespacedCustomObject(
      { ...NODEFENCES, namespace: NAMESPACE, name, body: { spec: { operatorRequest } } },
      merge,
    );
  }
  return { name, by, bootId };
}

/** Every event on the pipeline's topics, read as the audit principal (as `fastfence trace` does). */
export async function readEvents(c: PipelineCluster): Promise<AnyFfEvent[]> {
  const bus = createKafkaBus({
    brokers: c.kafka.bootstrap,
    clientId: "trace",
    security: c.kafka.clientSecurity("audit"),
  });
  try {
    const records = await bus.readAll(Object.values(TOPICS).filter((t) => t !== TOPICS.deadLetter));
    return records.map((r) => parseEvent(decodeKafka(r)));
  } finally {
    await bus.close();
  }
}

/**
 * Publishes again, with the event source's credentials, every signed miss recorded for
 * `node` since `sinceMs` (what a detect replica that lags, or resumes an old offset,
 * would read late). Returns how many.
 */
export async function replayMisses(c: PipelineCluster, node: string, sinceMs: number): Promise<number> {
  const misses = (await readEvents(c)).filter(
    (e) =>
      e.type === EVENT_TYPES.nodeObserved &&
      e.data.target === node &&
      e.data.result === "missed" &&
      Date.parse(e.time) >= sinceMs,
  );
  const bus = createKafkaBus({
    brokers: c.kafka.bootstrap,
    clientId: "replay",
    security: c.kafka.clientSecurity("event-source"),
  });
  try {
    await bus.publish(
      TOPICS.observations,
      misses.map((e) => encodeKafka(e)),
    );
  } finally {
    await bus.close();
  }
  return misses.length;
}

/**
 * Waits until every function replica on a live node has caught up with its topics (its
 * consumer group's committed offsets at the partitions' ends), so a scenario starts on an
 * idle pipeline and not behind the backlog a rebooted node's replicas resume from.
 * Returns how long that took, ms.
 */
export async function pipelineIdle(c: PipelineCluster, timeoutMs = 60_000): Promise<number> {
  const t0 = Date.now();
  const kafka = new Kafka({
    clientId: "test-lag",
    brokers: c.kafka.bootstrap.split(","),
    logLevel: logLevel.NOTHING,
    ...c.kafka.clientSecurity("admin"),
  });
  const admin = kafka.admin();
  await admin.connect();
  try {
    const live = [...c.nodes.values()].filter((n) => n.downAt === undefined);
    const groups = stageNames().flatMap((fn) => live.map((n) => `fastfence-${fn}-${replicaName(n, fn)}`));
    const topics = Object.values(TOPICS).filter((t) => t !== TOPICS.deadLetter);
    await waitFor(
      "every live replica caught up with its topics",
      async () => {
        const ends = new Map<string, bigint>();
        for (const topic of topics)
          for (const p of await admin.fetchTopicOffsets(topic))
            ends.set(`${topic}/${p.partition}`, BigInt(p.high));
        for (const groupId of groups)
          for (const t of await admin.fetchOffsets({ groupId, topics }))
            for (const p of t.partitions) {
              const end = ends.get(`${t.topic}/${p.partition}`) ?? 0n;
              // -1: nothing committed yet (the group started at the end and read nothing since)
              if (p.offset !== "-1" && BigInt(p.offset) < end) return false;
            }
        return true;
      },
      timeoutMs,
      250,
    );
  } finally {
    await admin.disconnect();
  }
  return Date.now() - t0;
}
