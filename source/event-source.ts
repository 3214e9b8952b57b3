// The event source (observer) replica: watches Nodes and kubelet Leases with informers
// and publishes node.condition events; probes its k ring successors over TCP every
// probe interval and publishes node.observed events, each signed with this replica's
// in-memory Ed25519 key (source/observer-key.ts) and carrying, on this replica's own
// clock, when it last saw the target's heartbeat Lease renewed (a watch on the heartbeat
// namespace); renews its own node's heartbeat Lease through the API server, publishing
// its public key there. Several replicas run at once, on different nodes. It publishes
// facts only and decides nothing; a publish failure is logged and the next probe
// re-reports, so it never blocks probing on Kafka. It never writes or logs its private key.
import {
  makeInformer,
  type KubeConfig,
  type V1Lease,
  type V1Node,
  CoordinationV1Api,
  CoreV1Api,
} from "@kubernetes/client-node";
import type { Clock } from "../core/clock.ts";
import { heartbeatLeaseName } from "../core/decision.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import { Kube } from "../infra/kube/client.ts";
import { LeaseManager } from "../infra/kube/lease.ts";
import { makePooledApiClient } from "../infra/kube/pooled-auth.ts";
import { acksFor, catalogEntry, type EventType } from "../events/catalog.ts";
import { encodeKafka } from "../events/codec.ts";
import { envelope, type OutgoingEvent } from "../events/envelope.ts";
import type { Bus } from "../infra/bus/bus.ts";
import type { Logger } from "../infra/log.ts";
import { ConditionTracker, type NodeSnapshot } from "./condition-tracker.ts";
import { ProbeTracker } from "./probe-tracker.ts";
import { hasOutOfServiceTaint, probeTargets, ringMembers } from "../core/ring.ts";
import { heartbeatLeaseDurationMs } from "../core/rules.ts";
import { HeartbeatSightings } from "./heartbeat-sightings.ts";
import { startWatchdogAgent, type WatchdogAgent, type WatchdogAgentConfig } from "./watchdog-agent.ts";
import { ObserverKey } from "./observer-key.ts";
import { NODE_TIMEOUT_ANNOTATION, parseNodeTimeout } from "../core/watchdog-status.ts";
import { EVENT_TYPES } from "../events/catalog.ts";
import type { NodeObserved } from "../events/schemas.ts";
import { tcpProbe } from "./tcp-probe.ts";
import { performance } from "node:perf_hooks";
import { OBSERVER_KEY_ANNOTATION, OBSERVER_PREVIOUS_KEY_ANNOTATION } from "../core/evidence-proof.ts";
import { askPeers } from "./vouch-client.ts";
import { startVouchServer, vouchRecorder, type VouchServer } from "./vouch-server.ts";
import { probeAddress } from "../core/probe-address.ts";

export interface EventSourceConfig {
  /** This replica's id (pod name). */
  replica: string;
  /** The node this replica runs on (never probes itself). */
  node: string;
  probe: FencingPolicySpec["probe"];
  leaseStaleMs: number;
  /** Informer restart delay after an error, ms. Default 500. */
  informerRestartMs?: number;
  /** Publish everything to this topic instead of the catalog's (Knative broker topic). */
  topic?: string;
  /** Namespace of this node's heartbeat Lease (fastfence-alive-<node>); unset = no heartbeat. */
  heartbeatNamespace?: string;
  /** The node's watchdog (source/watchdog-agent.ts); unset = none. Needs heartbeatNamespace. */
  watchdog?: WatchdogAgentConfig;
  /**
   * Port of the vouch endpoint on the node network (source/vouch-server.ts): this replica
   * vouches for peers there and, with a watchdog, asks its peers on the same port. Unset: no
   * vouching (a node that loses the API stops petting).
   */
  vouchPort?: number;
}

/** Counters the event source updates (served on /metrics by `fastfence source --http`). */
export interface SourceMetrics {
  probes: { inc(labels: { result: "ok" | "missed" }): void };
  published: { inc(labels: { type: string }): void };
  publishErrors: { inc(): void };
  /** The watchdog agent's gauges, by this node (fastfence_watchdog_armed / _petting). */
  watchdogArmed?: { set(labels: { node: string }, v: number): void };
  watchdogPetting?: { set(labels: { node: string }, v: number): void };
}

export interface EventSource {
  /** Resolves when both informers have listed once. */
  ready: Promise<void>;
  stop(): Promise<void>;
  /** Current probe targets (for status output and tests). */
  targets(): string[];
}

function snapshot(n: V1Node): NodeSnapshot {
  const c = n.status?.conditions?.find((x) => x.type === "Ready");
  return {
    name: n.metadata?.name ?? "",
    bootId: n.status?.nodeInfo?.bootID ?? "",
    ready: (c?.status as NodeSnapshot["ready"]) ?? "Unknown",
    ...(c?.reason ? { readyReason: c.reason } : {}),
    ...(c?.lastTransitionTime ? { readyTransitionAt: new Date(c.lastTransitionTime).getTime() } : {}),
  };
}

export { PROBE_ADDRESS_ANNOTATION } from "../core/probe-address.ts";

export async function startEventSource(opts: {
  kubeConfig: KubeConfig;
  bus: Bus;
  clock: Clock;
  log: Logger;
  config: EventSourceConfig;
  metrics?: SourceMetrics;
}): Promise<EventSource> {
  const { kubeConfig, bus, clock, log, config, metrics } = opts;
  const source = `/fastfence/event-source/${config.replica}`;
  const observer = { replica: config.replica, node: config.node };
  const probes = new ProbeTracker(observer);
  const conditions = new ConditionTracker(observer, config.leaseStaleMs);
  const nodes = new Map<string, V1Node>();
  const inFlight = new Set<string>();
  let stopped = false;
  let targets: string[] = [];
  const key = new ObserverKey();
  const leaseDurationMs = heartbeatLeaseDurationMs(config.probe.heartbeatIntervalMs);
  // An in-flight renewal is dated at most half a heartbeat interval before it is seen.
  const sightings = new HeartbeatSightings(leaseDurationMs, config.probe.heartbeatIntervalMs / 2);
  // Observations are published only once this replica's key is on its node's heartbeat
  // Lease: before that every consumer would refuse them (UnknownObserverKey).
  let keyPublished = false;

  function publish(events: OutgoingEvent[]): void {
    if (events.length === 0) return;
    const now = clock.now();
    for (const out of events) {
      if (out.type === EVENT_TYPES.nodeObserved) {
        if (!keyPublished) continue;
        out.data = key.signObservation(out.data as NodeObserved);
      }
      const ev = envelope(out, source, now);
      const topic = config.topic ?? catalogEntry(out.type as EventType).topic;
      bus.publish(topic, [encodeKafka(ev)], { acks: acksFor(out.type) }).then(
        () => metrics?.published.inc({ type: out.type }),
        (err: unknown) => {
          metrics?.publishErrors.inc();
          log.warn(
            { incident: "none", node: out.subject, err },
            "publishing an observation failed; the next probe re-reports",
          );
        },
      );
    }
  }

  const core = makePooledApiClient(kubeConfig, CoreV1Api);
  const coord = makePooledApiClient(kubeConfig, CoordinationV1Api);
  const nodeInformer = makeInformer<V1Node>(kubeConfig, "/api/v1/nodes", () => core.listNode());
  const leaseInformer = makeInformer<V1Lease>(
    kubeConfig,
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    () => coord.listNamespacedLease({ namespace: "kube-node-lease" }),
  );
  // The probe ring: every node but those fenced off (out-of-service taint, core/ring.ts).
  const ring = () =>
    ringMembers(
      [...nodes].map(([name, n]) => ({
        name,
        outOfService: hasOutOfServiceTaint(n.spec?.taints),
      })),
    );
  const onNode = (n: V1Node) => {
    const name = n.metadata?.name;
    if (!name) return;
    const previousBoot = nodes.get(name)?.status?.nodeInfo?.bootID;
    const boot = n.status?.nodeInfo?.bootID;
    if (previousBoot && boot && previousBoot !== boot) probes.rearm(name);
    nodes.set(name, n);
    targets = probeTargets(config.node, ring(), config.probe.observersPerNode);
    probes.retain(targets);
    publish(conditions.onNode(snapshot(n), clock.now()));
  };
  nodeInformer.on("add", onNode);
  nodeInformer.on("update", onNode);
  nodeInformer.on("delete", (n) => {
    const name = n.metadata?.name;
    if (!name) return;
    nodes.delete(name);
    conditions.onNodeDeleted(name);
    targets = probeTargets(config.node, ring(), config.probe.observersPerNode);
    probes.retain(targets);
  });
  const onLease = (l: V1Lease) => {
    const renew = l.spec?.renewTime;
    if (l.metadata?.name && renew)
      conditions.onLease(l.metadata.name, new Date(renew as unknown as string).getTime());
  };
  leaseInformer.on("add", onLease);
  leaseInformer.on("update", onLease);

  // The heartbeat Leases, seen on this replica's own clock (the heartbeat veto's input).
  const hbNamespace = config.heartbeatNamespace ?? "default";
  const heartbeatInformer = makeInformer<V1Lease>(
    kubeConfig,
    `/apis/coordination.k8s.io/v1/namespaces/${hbNamespace}/leases`,
    () => coord.listNamespacedLease({ namespace: hbNamespace }),
  );
  const peerKeys = new Map<string, string[]>();
  const onHeartbeat = (l: V1Lease) => {
    if (!l.metadata?.name) return;
    const ann = l.metadata.annotations ?? {};
    peerKeys.set(
      l.metadata.name,
      [ann[OBSERVER_KEY_ANNOTATION], ann[OBSERVER_PREVIOUS_KEY_ANNOTATION]].filter((k): k is string => !!k),
    );
    const renew = l.spec?.renewTime ? new Date(l.spec.renewTime as unknown as string).getTime() : undefined;
    sightings.onLease(l.metadata.name, l.metadata.resourceVersion ?? "", clock.now(), renew);
  };
  heartbeatInformer.on("add", onHeartbeat);
  heartbeatInformer.on("update", onHeartbeat);
  heartbeatInformer.on("delete", (l) => l.metadata?.name && sightings.onDelete(l.metadata.name));
  const startHeartbeatWatch = () =>
    heartbeatInformer.start().then(() => sightings.setListed(true, clock.now()));

  // Informers stop on errors other than 410: supervise and restart them.
  for (const [name, inf] of [
    ["nodes", nodeInformer],
    ["leases", leaseInformer],
    ["heartbeats", heartbeatInformer],
  ] as const) {
    inf.on("error", (err: unknown) => {
      if (inf === heartbeatInformer) sightings.setListed(false, clock.now());
      if (stopped) return;
      log.warn({ incident: "none", node: config.node, informer: name, err }, "informer stopped; restarting");
      setTimeout(() => {
        if (stopped) return;
        (inf === heartbeatInformer ? startHeartbeatWatch() : inf.start()).catch(() => undefined);
      }, config.informerRestartMs ?? 500);
    });
  }
  const ready = Promise.all([
    nodeInformer.start(),
    leaseInformer.start(),
    // Without a heartbeat namespace nothing is watched: the watch never syncs.
    config.heartbeatNamespace ? startHeartbeatWatch() : undefined,
  ]).then(() => undefined);

  async function probeOne(target: string): Promise<void> {
    const n = nodes.get(target);
    const addr = n && probeAddress(n, config.probe.port);
    if (!addr) return;
    inFlight.add(target);
    try {
      const r = await tcpProbe(addr.host, addr.port, config.probe.timeoutMs);
      if (stopped) return;
      metrics?.probes.inc({ result: r.ok ? "ok" : "missed" });
      const at = clock.now();
      const seenAt = sightings.seenAt(target);
      const renewedBy = sightings.renewedBy(target);
      // The boot ID as the API says now, not when the probe began: a reboot seen during
      // the probe re-armed the tracker, so this result is the new boot's first.
      const ev = probes.onResult({
        target,
        targetBootId: nodes.get(target)?.status?.nodeInfo?.bootID ?? "",
        ok: r.ok,
        at,
        rttMs: r.rttMs,
        address: addr.host,
        port: addr.port,
        ...(seenAt !== undefined ? { heartbeatSeenAt: seenAt } : {}),
        ...(renewedBy !== undefined ? { heartbeatRenewedBy: renewedBy } : {}),
        heartbeatSynced: sightings.synced(at),
      });
      if (ev) publish([ev]);
    } finally {
      inFlight.delete(target);
    }
  }

  // The node's own heartbeat through the API server: proof, for confirm, that a node its
  // peers cannot reach is still alive (partitioned, not dead). Renewed every
  // probe.heartbeatIntervalMs; a failed renewal is just skipped (the next one retries).
  let heartbeatTimer: NodeJS.Timeout | undefined;
  let watchdog: WatchdogAgent | undefined;
  let vouchServer: VouchServer | undefined;
  /** The peers' vouch endpoints and the keys they published, for this node's agent. */
  const vouchPeers = (port: number) => ({
    self: config.node,
    peers: [...nodes.values()].flatMap((n) => {
      const name = n.metadata?.name;
      const host = name && name !== config.node ? probeAddress(n, port)?.host : undefined;
      return host ? [{ node: name!, host, port }] : [];
    }),
    publishedKeys: (n: string) => peerKeys.get(heartbeatLeaseName(n)) ?? [],
    timeoutMs: Math.max(200, Math.floor((config.watchdog?.renewGraceMs ?? 2000) / 4)),
    mono: () => performance.now(),
  });
  let finalBeat: (() => Promise<void>) | undefined;
  if (config.heartbeatNamespace) {
    const interval = config.probe.heartbeatIntervalMs;
    const leases = new LeaseManager(new Kube(kubeConfig, { requestTimeoutMs: Math.max(500, interval * 2) }), {
      namespace: config.heartbeatNamespace,
      durationSeconds: leaseDurationMs / 1000,
    });
    if (config.watchdog)
      watchdog = await startWatchdogAgent({
        config: config.watchdog,
        node: config.node,
        bootId: () => nodes.get(config.node)?.status?.nodeInfo?.bootID ?? "",
        clusterSize: () => Math.max(1, nodes.size),
        // Per node (core/watchdog-status.ts); "unknown" until this node's Node is listed.
        nodeTimeout: () => {
          const self = nodes.get(config.node);
          return self ? parseNodeTimeout(self.metadata?.annotations?.[NODE_TIMEOUT_ANNOTATION]) : "unknown";
        },
        log,
        ...(config.vouchPort !== undefined
          ? { askPeers: () => askPeers(vouchPeers(config.vouchPort!)) }
          : {}),
        ...(metrics?.watchdogArmed && metrics.watchdogPetting
          ? {
              metrics: {
                armed: { set: (v: number) => metrics.watchdogArmed?.set({ node: config.node }, v) },
                petting: { set: (v: number) => metrics.watchdogPetting?.set({ node: config.node }, v) },
              },
            }
          : {}),
      });
    const renew = () =>
      leases.acquire(heartbeatLeaseName(config.node), config.replica, clock.now(), {
        annotations: (cur) => ({ ...key.annotations(cur), ...watchdog?.annotations() }),
      });
    if (config.vouchPort !== undefined)
      vouchServer = await startVouchServer({
        node: config.node,
        port: config.vouchPort,
        isPeer: (n) => n !== config.node && nodes.has(n),
        // A vouch is a renewal of this node's own Lease that also bumps the vouchee's counter.
        record: vouchRecorder({
          leases,
          lease: heartbeatLeaseName(config.node),
          holder: config.replica,
          now: () => clock.now(),
          keep: (cur) => ({ ...key.annotations(cur), ...watchdog?.annotations() }),
        }),
        sign: (c) => key.signVouch(c),
        log,
      });
    finalBeat = async () => void (await renew().catch(() => undefined));
    let busy = false;
    const beat = () => {
      if (busy || stopped) return;
      busy = true;
      renew()
        .then((r) => {
          if (r.acquired) watchdog?.onRenewed();
          if (r.acquired && !keyPublished) {
            keyPublished = true;
            log.info(
              { incident: "none", node: config.node, keyId: key.keyId },
              "observer key published on the heartbeat Lease",
            );
          }
        })
        .catch((err: unknown) =>
          log.debug({ incident: "none", node: config.node, err }, "heartbeat renewal failed"),
        )
        .finally(() => (busy = false));
    };
    beat();
    heartbeatTimer = setInterval(beat, interval);
  } else {
    log.warn(
      { incident: "none", node: config.node },
      "no heartbeat namespace: the observer key is not published, so every observation will be refused",
    );
    keyPublished = true;
  }

  const probeTimer = setInterval(() => {
    for (const t of targets) if (!inFlight.has(t)) void probeOne(t);
    publish(conditions.tick(clock.now()));
  }, config.probe.intervalMs);

  log.info({ incident: "none", node: config.node, replica: config.replica }, "event source started");
  return {
    ready,
    targets: () => [...targets],
    stop: async () => {
      stopped = true;
      clearInterval(probeTimer);
      clearInterval(heartbeatTimer);
      await vouchServer?.close();
      // Disarm first (a graceful stop never resets the node), then say so on the Lease.
      if (watchdog) {
        await watchdog.stop();
        await finalBeat?.();
      }
      await Promise.allSettled([nodeInformer.stop(), leaseInformer.stop(), heartbeatInformer.stop()]);
    },
  };
}
