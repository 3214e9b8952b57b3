// The event source (observer) replica: watches Nodes and kubelet Leases (source/source-watches.ts)
// and publishes node.condition events; probes its k ring successors over TCP every
// probe interval and publishes node.observed events, each signed with this replica's
// in-memory Ed25519 key (source/observer-key.ts) and carrying, on this replica's own
// clock, when it last saw the target's heartbeat Lease renewed (a watch on the heartbeat
// namespace); renews its own node's heartbeat Lease through the API server, publishing
// its public key there. Several replicas run at once, on different nodes. It publishes
// facts only and decides nothing; a publish failure is logged and the next probe
// re-reports, so it never blocks probing on Kafka. It follows the FencingPolicy the way the
// stages do: applyPolicy (called every policy reload period by source/policy-follow.ts)
// re-applies the probe settings and suspicion.leaseStaleMs to the running probers, timers
// and trackers, and re-decides whether its node's watchdog may be armed (only when the
// policy's entry for the node has the watchdog level, source/watchdog-settings.ts); nothing
// needs a restart. It never writes or logs its private key.
import type { KubeConfig, V1Lease, V1Node } from "@kubernetes/client-node";
import type { Clock } from "../core/clock.ts";
import { DEFAULT_POLICY, type FencingPolicySpec } from "../core/policy.ts";
import type { WatchdogReport } from "../core/watchdog.ts";
import { sourceWatches } from "./source-watches.ts";
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
import type { WatchdogAgentConfig } from "./watchdog-agent.ts";
import { startHeartbeat, type ApiEndpoints, type Heartbeat } from "./heartbeat.ts";
import { settingsChanges, sourceSettings, type SourceSettings } from "./policy-follow.ts";
import { ObserverKey } from "./observer-key.ts";
import { EVENT_TYPES } from "../events/catalog.ts";
import type { NodeObserved } from "../events/schemas.ts";
import { tcpProbe } from "./tcp-probe.ts";
import { OBSERVER_KEY_ANNOTATION, OBSERVER_PREVIOUS_KEY_ANNOTATION } from "../core/evidence-proof.ts";
import { probeAddress } from "../core/probe-address.ts";

export interface EventSourceConfig {
  /** This replica's id (pod name). */
  replica: string;
  /** The node this replica runs on (never probes itself). */
  node: string;
  /** The probe settings at start (the policy's probe); applyPolicy replaces them. */
  probe: FencingPolicySpec["probe"];
  /** suspicion.leaseStaleMs at start; applyPolicy replaces it. */
  leaseStaleMs: number;
  /**
   * The FencingPolicy at start, for the watchdog's arming decision (its node entries);
   * applyPolicy replaces it. Unset: the defaults, which give no node a watchdog level.
   */
  policy?: FencingPolicySpec;
  /** Informer restart delay after an error, ms. Default 500. */
  informerRestartMs?: number;
  /** Publish everything to this topic instead of the catalog's (Knative broker topic). */
  topic?: string;
  /** Namespace of this node's heartbeat Lease (fastfence-alive-<node>); unset = no heartbeat. */
  heartbeatNamespace?: string;
  /**
   * API servers the heartbeat renewals and the watches may fail over to
   * (FASTFENCE_KUBE_ENDPOINTS); unset = the kubeconfig's only.
   */
  apiEndpoints?: ApiEndpoints;
  /**
   * Where the node's watchdog device is and how to pet it (source/watchdog-settings.ts
   * watchdogDevice); unset = no device, no agent, no report. Armed only while the policy's
   * entry for this node has the watchdog level. Needs heartbeatNamespace.
   */
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
  /** Resolves once every watch (nodes, kubelet Leases, heartbeat Leases) has listed. */
  ready: Promise<void>;
  stop(): Promise<void>;
  /** Current probe targets (for status output and tests). */
  targets(): string[];
  /**
   * Applies a (re-read) FencingPolicy to the running replica: probe interval, timeout, port,
   * observers per node, heartbeat interval, suspicion.leaseStaleMs, and the watchdog's
   * arming. Returns the fields that changed (e.g. "probe.intervalMs"), logged once.
   */
  applyPolicy(policy: FencingPolicySpec): string[];
  /** The settings in force now, and this node's watchdog report (undefined: no device). */
  effective(): EffectiveSourceSettings;
}

export interface EffectiveSourceSettings extends SourceSettings {
  watchdog?: WatchdogReport;
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
  let policy = config.policy ?? DEFAULT_POLICY;
  let settings: SourceSettings = { probe: config.probe, leaseStaleMs: config.leaseStaleMs };
  const conditions = new ConditionTracker(observer, settings.leaseStaleMs);
  const nodes = new Map<string, V1Node>();
  const inFlight = new Set<string>();
  let stopped = false;
  let targets: string[] = [];
  const key = new ObserverKey();
  let leaseDurationMs = heartbeatLeaseDurationMs(settings.probe.heartbeatIntervalMs);
  // An in-flight renewal is dated at most half a heartbeat interval before it is seen.
  const sightings = new HeartbeatSightings(leaseDurationMs, settings.probe.heartbeatIntervalMs / 2);
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

  const watches = sourceWatches({
    kubeConfig,
    ...(config.apiEndpoints ? { apiEndpoints: config.apiEndpoints } : {}),
    ...(config.heartbeatNamespace ? { heartbeatNamespace: config.heartbeatNamespace } : {}),
    heartbeatQuietMs: () => leaseDurationMs,
    ...(config.informerRestartMs !== undefined ? { restartMs: config.informerRestartMs } : {}),
    onHeartbeatListed: (listed) => sightings.setListed(listed, clock.now()),
    node: config.node,
    log,
  });
  const { nodes: nodeInformer, leases: leaseInformer, heartbeats: heartbeatInformer } = watches;
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
    targets = probeTargets(config.node, ring(), settings.probe.observersPerNode);
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
    targets = probeTargets(config.node, ring(), settings.probe.observersPerNode);
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

  const ready = watches.start();

  async function probeOne(target: string): Promise<void> {
    const n = nodes.get(target);
    const addr = n && probeAddress(n, settings.probe.port);
    if (!addr) return;
    inFlight.add(target);
    try {
      const r = await tcpProbe(addr.host, addr.port, settings.probe.timeoutMs);
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

  // The node's own heartbeat through the API server (source/heartbeat.ts), with its
  // watchdog agent and vouch endpoint when configured.
  let heartbeat: Heartbeat | undefined;
  if (config.heartbeatNamespace)
    heartbeat = await startHeartbeat({
      kubeConfig,
      namespace: config.heartbeatNamespace,
      node: config.node,
      replica: config.replica,
      clock,
      log,
      key,
      nodes,
      peerKeys,
      policy: () => policy,
      intervalMs: settings.probe.heartbeatIntervalMs,
      ...(config.apiEndpoints ? { apiEndpoints: config.apiEndpoints } : {}),
      leaseDurationMs: () => leaseDurationMs,
      ...(config.watchdog ? { watchdog: config.watchdog } : {}),
      ...(config.vouchPort !== undefined ? { vouchPort: config.vouchPort } : {}),
      ...(metrics ? { metrics } : {}),
      onAcquired: () => {
        if (keyPublished) return;
        keyPublished = true;
        log.info(
          { incident: "none", node: config.node, keyId: key.keyId },
          "observer key published on the heartbeat Lease",
        );
      },
    });
  else {
    log.warn(
      { incident: "none", node: config.node },
      "no heartbeat namespace: the observer key is not published, so every observation will be refused",
    );
    keyPublished = true;
  }

  const probeRound = () => {
    for (const t of targets) if (!inFlight.has(t)) void probeOne(t);
    publish(conditions.tick(clock.now()));
  };
  let probeTimer = setInterval(probeRound, settings.probe.intervalMs);

  function applyPolicy(next: FencingPolicySpec): string[] {
    policy = next;
    const was = settings;
    settings = sourceSettings(next);
    const changed = settingsChanges(was, settings);
    if (changed.includes("probe.intervalMs")) {
      clearInterval(probeTimer);
      if (!stopped) probeTimer = setInterval(probeRound, settings.probe.intervalMs);
    }
    if (changed.includes("probe.observersPerNode")) {
      targets = probeTargets(config.node, ring(), settings.probe.observersPerNode);
      probes.retain(targets);
    }
    if (changed.includes("probe.heartbeatIntervalMs")) {
      leaseDurationMs = heartbeatLeaseDurationMs(settings.probe.heartbeatIntervalMs);
      sightings.setTiming(leaseDurationMs, settings.probe.heartbeatIntervalMs / 2);
      heartbeat?.setInterval(settings.probe.heartbeatIntervalMs);
    }
    if (changed.includes("suspicion.leaseStaleMs")) conditions.setLeaseStaleMs(settings.leaseStaleMs);
    // probe.timeoutMs and probe.port are read by every probe as it starts.
    if (changed.length)
      log.info(
        {
          incident: "none",
          node: config.node,
          changed,
          probe: settings.probe,
          leaseStaleMs: settings.leaseStaleMs,
        },
        "event source: FencingPolicy changes applied",
      );
    // The watchdog follows on its next pet round or renewal (arm, or record "not armed" then disarm).
    return changed;
  }
  if (config.policy) applyPolicy(config.policy);

  log.info({ incident: "none", node: config.node, replica: config.replica }, "event source started");
  return {
    ready,
    targets: () => [...targets],
    applyPolicy,
    effective: () => ({
      ...settings,
      ...(heartbeat?.watchdog ? { watchdog: heartbeat.watchdog.report() } : {}),
    }),
    stop: async () => {
      stopped = true;
      clearInterval(probeTimer);
      // "not armed" recorded on the Lease first, then disarmed (source/watchdog-agent.ts).
      await heartbeat?.stop();
      await watches.stop();
    },
  };
}
