// The fastfence processes "on" one node of the pipeline cluster (pipeline-cluster.ts): one
// event-source replica and one replica of each function (Kafka runtime), each as its own
// service-account identity — started when the node boots, stopped when it crashes or is
// powered off. Harness code for the integration tests: it never talks to anything off
// loopback.
import type { KubeConfig } from "@kubernetes/client-node";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { Logger } from "../../infra/log.ts";
import type { HostedEventSource, HostedFunction } from "../../app/index.ts";
import { stageNames } from "../../functions/registry.ts";
import type { Component } from "../../events/catalog.ts";
import type { LabRedfishServer } from "../emulators/redfish/server.ts";
import { FASTFENCE_NAMESPACE as NAMESPACE } from "../kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../kube/identity.ts";
import type { KafkaClusterView } from "./kafka.ts";
import type { ManagedProcess } from "./process.ts";
import { shippedApp, startSourceFromEnv } from "../shipped-app.ts";

export interface SimNodeParts {
  name: string;
  probePort: number;
  listener: ManagedProcess;
  bmc: LabRedfishServer;
  /** The event source with the bus it alone uses (stopped together). */
  source?: HostedEventSource;
  /** Each stage owns its bus (built from its config) and closes it when stopped. */
  functions: HostedFunction[];
  /** Set when the node was crashed or powered off. */
  downAt?: number;
  /** How often it was rebooted (0: its first boot). */
  boots: number;
}

/** What a node's replicas are started with. */
export interface ReplicaEnv {
  kc: KubeConfig;
  kafka: KafkaClusterView;
  log: Logger;
  policy: FencingPolicySpec;
  runtimeEnv?: Record<string, string>;
  /** A token for the component's ServiceAccount, through the node's API relay. */
  identityKc(component: string, node: string): Promise<KubeConfig>;
}

export const EVERYTHING = { source: true, functions: stageNames() };

/**
 * A replica's name (its pod's, FASTFENCE_REPLICA): `<fn>-<node>`, and after a reboot
 * `<fn>-<node>-b<n>`, as pods created anew get new names — so its Kafka consumer group is
 * new too and starts at the end of its topics.
 */
export function replicaName(parts: SimNodeParts, fn: string): string {
  return `${fn}-${parts.name}${parts.boots ? `-b${parts.boots}` : ""}`;
}

/**
 * Settings of this environment, not choices of behaviour: what a node's replicas share.
 * Vouching is off (every node's replicas share the loopback address, so they cannot each
 * have the vouch port) and the consumer session is short, for the tests' fault bounds.
 */
const HARNESS_ENV = {
  FASTFENCE_WATCHDOG_VOUCH_PORT: "0",
  FASTFENCE_KAFKA_SESSION_TIMEOUT_MS: "3000",
};

/** A component's settings on `node`, as its pod would get them (env and Secret mounts). */
export function replicaConfigEnv(
  env: Pick<ReplicaEnv, "kafka" | "runtimeEnv">,
  component: Component,
  node: string,
  replica: string,
): Record<string, string> {
  return {
    FASTFENCE_NAMESPACE: NAMESPACE,
    FASTFENCE_REPLICA: replica,
    FASTFENCE_NODE_NAME: node,
    FASTFENCE_KAFKA_BROKERS: env.kafka.bootstrap,
    FASTFENCE_LOG_LEVEL: process.env.FASTFENCE_LOG_LEVEL ?? "warn",
    ...HARNESS_ENV,
    ...env.kafka.clientEnv(component),
    ...env.runtimeEnv,
  };
}

/**
 * Start the node's replicas (a boot): the event source and every stage, each through the
 * composition roots of the unpacked artifact (harness/shipped-app.ts), each with its own
 * bus built from its config as `fastfence run` and `fastfence source` build theirs.
 */
export async function startReplicas(env: ReplicaEnv, parts: SimNodeParts): Promise<void> {
  const { log } = env;
  const { app } = await shippedApp();
  const replica = (fn: string) => replicaName(parts, fn);
  parts.source = await startSourceFromEnv(
    app,
    replicaConfigEnv(env, "event-source", parts.name, replica("source")),
    // bound to a Pod on its node: the token carries the node claim the heartbeat-Lease
    // admission policy (knative/base/admission) requires, as a DaemonSet pod's does
    await serviceAccountKubeConfig(env.kc, {
      namespace: NAMESPACE,
      serviceAccount: "fastfence-source",
      node: parts.name,
      podName: `fastfence-${replica("source")}`.slice(0, 63),
      tolerations: [{ operator: "Exists" }], // as the DaemonSet's (knative/base/source)
    }),
    log.child({ component: "event-source", replica: replica("source") }),
  );
  for (const fn of app.stageNames()) {
    parts.functions.push(
      await app.hostFunction({
        name: fn,
        mode: { kafka: true },
        config: app.loadRuntimeConfig(replicaConfigEnv(env, fn as Component, parts.name, replica(fn))),
        kubeConfig: await env.identityKc(fn, parts.name),
        log: log.child({ component: fn }),
        processMetrics: false, // every node's stages share the test's process
      }),
    );
  }
}

export const replicasReady = (p: SimNodeParts): Promise<void>[] => [
  p.source!.ready,
  ...p.functions.map((f) => f.ready),
];

/** Stop the event source and/or the named functions (each closes its own bus). */
export async function stopReplicas(
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
}
