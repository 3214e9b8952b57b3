// Starts this node's watchdog agent (source/watchdog-agent.ts) inside its event source, wired
// to what the event source knows: the Node objects its informer lists (this node's boot ID,
// labels and per-node timeout annotation, the cluster's size, the peers' vouch endpoints),
// the peers' published observer keys, and the FencingPolicy in force now, from which
// watchdogWanted (source/watchdog-settings.ts) decides on every pet round whether the agent
// may arm. It owns no timer and writes nothing itself: `record` (the event source's heartbeat
// renewal) is how a report reaches the Lease.
import { performance } from "node:perf_hooks";
import type { V1Node } from "@kubernetes/client-node";
import { heartbeatLeaseName } from "../core/decision.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import { probeAddress } from "../core/probe-address.ts";
import { NODE_TIMEOUT_ANNOTATION, parseNodeTimeout } from "../core/watchdog-status.ts";
import type { Logger } from "../infra/log.ts";
import type { VouchRequest, VouchRequestClaim } from "../core/vouch.ts";
import { askPeers } from "./vouch-client.ts";
import { startWatchdogAgent, type WatchdogAgent, type WatchdogAgentConfig } from "./watchdog-agent.ts";
import { watchdogWanted } from "./watchdog-settings.ts";

export function startNodeWatchdog(o: {
  config: WatchdogAgentConfig;
  node: string;
  nodes: ReadonlyMap<string, V1Node>;
  /** Heartbeat Lease name → the observer keys its node published. */
  peerKeys: ReadonlyMap<string, string[]>;
  /** Signs this node's vouch requests with its observer key. */
  signVouchRequest: (c: VouchRequestClaim) => VouchRequest;
  policy: () => FencingPolicySpec;
  /** Writes the agent's current report on the heartbeat Lease; true once acknowledged. */
  record: () => Promise<boolean>;
  vouchPort?: number;
  log: Logger;
  metrics?: {
    watchdogArmed?: { set(labels: { node: string }, v: number): void };
    watchdogPetting?: { set(labels: { node: string }, v: number): void };
  };
}): Promise<WatchdogAgent> {
  const { config, node, nodes, metrics } = o;
  /** The peers' vouch endpoints and the keys they published, for this node's agent. */
  const vouchPeers = (port: number) => ({
    self: node,
    peers: [...nodes.values()].flatMap((n) => {
      const name = n.metadata?.name;
      const host = name && name !== node ? probeAddress(n, port)?.host : undefined;
      return host ? [{ node: name!, host, port }] : [];
    }),
    publishedKeys: (n: string) => o.peerKeys.get(heartbeatLeaseName(n)) ?? [],
    sign: o.signVouchRequest,
    now: () => Date.now(),
    timeoutMs: Math.max(200, Math.floor(config.renewGraceMs / 4)),
    mono: () => performance.now(),
  });
  return startWatchdogAgent({
    config,
    node,
    bootId: () => nodes.get(node)?.status?.nodeInfo?.bootID ?? "",
    clusterSize: () => Math.max(1, nodes.size),
    // Per node (core/watchdog-status.ts); "unknown" until this node's Node is listed.
    nodeTimeout: () => {
      const self = nodes.get(node);
      return self ? parseNodeTimeout(self.metadata?.annotations?.[NODE_TIMEOUT_ANNOTATION]) : "unknown";
    },
    log: o.log,
    // The policy's answer now; this node's labels may select its entry.
    wanted: () => {
      const self = nodes.get(node);
      return watchdogWanted(
        config,
        o.policy(),
        self ? { name: node, labels: self.metadata?.labels ?? {} } : undefined,
      );
    },
    // "not armed" is on the Lease, acknowledged, before the device is ever disarmed.
    record: o.record,
    ...(o.vouchPort !== undefined ? { askPeers: () => askPeers(vouchPeers(o.vouchPort!)) } : {}),
    ...(metrics?.watchdogArmed && metrics.watchdogPetting
      ? {
          metrics: {
            armed: { set: (v: number) => metrics.watchdogArmed?.set({ node }, v) },
            petting: { set: (v: number) => metrics.watchdogPetting?.set({ node }, v) },
          },
        }
      : {}),
  });
}
