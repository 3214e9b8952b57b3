// What a lab node agent gives each fastfence replica: its config (agent-config.json, written
// by node-launch.ts) turned into the FASTFENCE_* environment a pod of that component would
// get from its env and Secret mounts (started with harness/shipped-app.ts
// startSourceFromEnv, as `fastfence source` starts from its pod's). Pure: it never adds a
// setting a pod's environment would not carry, and starts nothing.
import type { Component } from "../events/catalog.ts";
import type { WatchdogAgentConfig } from "../source/watchdog-agent.ts";
import { labKafkaEnv } from "./kafka.ts";

export interface AgentConfig {
  node: string;
  ip: string;
  dir: string;
  kubeconfig: string;
  brokers: string;
  brokerCount: number;
  /** Replicas per pipeline-topic partition; unset = the shipped layout (lab/node-launch.ts). */
  topicReplicas?: number;
  namespace: string;
  /** TCP port on the node's address for GET /metrics (and the same routes as the socket). */
  metricsPort: number;
  /** The node's emulated watchdog (lab/watchdog.ts), when the lab gives one. */
  watchdog?: WatchdogAgentConfig;
  /** The unpacked artifact (harness/artifact.ts) whose app/ the replicas run. */
  artifact: string;
}

/** A component's settings on this node, as its pod would get them from its env and Secret mounts. */
export function labComponentEnv(cfg: AgentConfig, c: Component): Record<string, string> {
  return {
    FASTFENCE_NAMESPACE: cfg.namespace,
    FASTFENCE_NODE_NAME: cfg.node,
    FASTFENCE_KAFKA_BROKERS: cfg.brokers,
    ...labKafkaEnv(c),
    ...(process.env.FASTFENCE_KAFKA_CLIENT
      ? { FASTFENCE_KAFKA_CLIENT: process.env.FASTFENCE_KAFKA_CLIENT }
      : {}),
  };
}

/** The emulated watchdog (lab/watchdog.ts) as the DaemonSet's FASTFENCE_WATCHDOG_* settings. */
export function watchdogEnv(w: WatchdogAgentConfig | undefined): Record<string, string> {
  return w
    ? {
        FASTFENCE_WATCHDOG_DEVICE: w.devicePath,
        ...(w.timeoutMs !== undefined ? { FASTFENCE_WATCHDOG_TIMEOUT_MS: String(w.timeoutMs) } : {}),
        // The lab's FIFO is accepted only in this mode, which no shipped overlay sets.
        ...(w.emulation ? { FASTFENCE_WATCHDOG_EMULATION: w.emulation } : {}),
        FASTFENCE_WATCHDOG_RENEW_GRACE_MS: String(w.renewGraceMs),
        FASTFENCE_WATCHDOG_PET_INTERVAL_MS: String(w.petIntervalMs),
      }
    : {};
}

/**
 * The event source's environment on this node: `shipped` (the DaemonSet's settings the lab
 * keeps, replica-settings.ts labSourceSettings), then this node's, with its emulated
 * watchdog when the lab gives one.
 */
export function labSourceEnv(cfg: AgentConfig, shipped: Record<string, string> = {}): Record<string, string> {
  return {
    ...shipped,
    ...labComponentEnv(cfg, "event-source"),
    FASTFENCE_REPLICA: `source-${cfg.node}`,
    ...watchdogEnv(cfg.watchdog),
  };
}
