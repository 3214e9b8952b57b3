// The fastfence processes "on" one node of the pipeline cluster (pipeline-cluster.ts): one
// event-source replica and one replica of each function (Kafka runtime), each as its own
// service-account identity — started when the node boots, stopped when it crashes or is
// powered off. Harness code for the integration tests: it never talks to anything off
// loopback.
import type { KubeConfig } from "@kubernetes/client-node";
import { systemClock } from "../../core/clock.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import { createKafkaBus, type KafkaBus } from "../../infra/bus/kafka-bus.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import type { Logger } from "../../infra/log.ts";
import { hostFunction, type HostedFunction } from "../../app/host.ts";
import { stageNames } from "../../functions/registry.ts";
import type { Component } from "../../events/catalog.ts";
import { startEventSource, type EventSource } from "../../source/event-source.ts";
import type { LabRedfishServer } from "../emulators/redfish/server.ts";
import { FASTFENCE_NAMESPACE as NAMESPACE } from "../kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../kube/identity.ts";
import type { KafkaCluster } from "./kafka.ts";
import type { ManagedProcess } from "./process.ts";

export interface SimNodeParts {
  name: string;
  probePort: number;
  listener: ManagedProcess;
  bmc: LabRedfishServer;
  source?: EventSource;
  functions: HostedFunction[];
  buses: KafkaBus[];
  /** Set when the node was crashed or powered off. */
  downAt?: number;
  /** How often it was rebooted (0: its first boot). */
  boots: number;
}

/** What a node's replicas are started with. */
export interface ReplicaEnv {
  kc: KubeConfig;
  kafka: KafkaCluster;
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

/** Start the node's replicas (a boot). */
export async function startReplicas(env: ReplicaEnv, parts: SimNodeParts): Promise<void> {
  const { kafka, log } = env;
  const replica = (fn: string) => replicaName(parts, fn);
  const srcBus = createKafkaBus({
    brokers: kafka.bootstrap,
    clientId: replica("source"),
    security: kafka.clientSecurity("event-source"),
  });
  parts.buses.push(srcBus);
  parts.source = await startEventSource({
    // bound to a Pod on its node: the token carries the node claim the heartbeat-Lease
    // admission policy (knative/base/admission) requires, as a DaemonSet pod's does
    kubeConfig: await serviceAccountKubeConfig(env.kc, {
      namespace: NAMESPACE,
      serviceAccount: "fastfence-source",
      node: parts.name,
      podName: `fastfence-${replica("source")}`.slice(0, 63),
      tolerations: [{ operator: "Exists" }], // as the DaemonSet's (knative/base/source)
    }),
    bus: srcBus,
    clock: systemClock,
    log: log.child({ component: "event-source", replica: replica("source") }),
    config: {
      replica: replica("source"),
      node: parts.name,
      probe: env.policy.probe,
      leaseStaleMs: env.policy.suspicion.leaseStaleMs,
      heartbeatNamespace: NAMESPACE,
    },
  });
  for (const fn of stageNames()) {
    const bus = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: replica(fn),
      sessionTimeoutMs: 3000,
      security: kafka.clientSecurity(fn as Component),
    });
    parts.buses.push(bus);
    const config = loadRuntimeConfig({
      FASTFENCE_NAMESPACE: NAMESPACE,
      FASTFENCE_REPLICA: replica(fn),
      FASTFENCE_NODE_NAME: parts.name,
      ...env.runtimeEnv,
    });
    parts.functions.push(
      await hostFunction({
        name: fn,
        mode: { kafka: true },
        config,
        kubeConfig: await env.identityKc(fn, parts.name),
        bus,
        log: log.child({ component: fn }),
      }),
    );
  }
}

export const replicasReady = (p: SimNodeParts): Promise<void>[] => [
  p.source!.ready,
  ...p.functions.map((f) => f.ready),
];

/** Stop the event source and/or the named functions; once nothing runs, close the node's buses. */
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
  if (which.source && p.functions.length === 0) {
    await Promise.all(p.buses.map((b) => b.close().catch(() => undefined)));
    p.buses = [];
  }
}
