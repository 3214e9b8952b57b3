// The composition root of the event source: from a RuntimeConfig (FASTFENCE_* settings) and a
// KubeConfig it reads the FencingPolicy, builds the Kafka bus with kafkaBusSettings (the same
// builder as the stages), derives the watchdog agent's and the vouch endpoint's settings, logs
// the effective settings once, and starts one observer replica. `fastfence source`, the test
// harness and the lab all start the event source through here, so a setting the product reads
// is the setting the tests exercise. It decides nothing and never logs a secret.
import type { KubeConfig } from "@kubernetes/client-node";
import { systemClock, type Clock } from "../core/clock.ts";
import { FastfenceError } from "../core/errors.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import { createKafkaBus, type KafkaBus } from "../infra/bus/kafka-bus.ts";
import type { KafkaBusConfig } from "../infra/bus/kafka-config.ts";
import type { RuntimeConfig } from "../infra/config.ts";
import { Kube, kubeEndpointsOptions } from "../infra/kube/client.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { createLogger, type Logger } from "../infra/log.ts";
import {
  startEventSource,
  type EventSource,
  type EventSourceConfig,
  type SourceMetrics,
} from "../source/event-source.ts";
import { startPolicyFollower } from "../source/policy-follow.ts";
import { watchdogDevice } from "../source/watchdog-settings.ts";
import { kafkaBusSettings } from "./host.ts";

/** What the event source runs with, as logged at start ("event source: effective settings"). */
export interface EventSourceSettings {
  source: EventSourceConfig;
  kafka: {
    brokers: string;
    clientId: string;
    client: RuntimeConfig["FASTFENCE_KAFKA_CLIENT"];
    sessionTimeoutMs?: number;
    hedgeAfterMs?: number;
    metadataMaxAgeMs?: number;
    acks?: KafkaBusConfig["acks"];
    /** TLS on, and the SCRAM user (never a password or key). */
    tls: boolean;
    user?: string;
  };
  policy: string;
}

/** The Kafka client id of an event-source replica. */
export const sourceClientId = (replica: string): string => `fastfence-source-${replica}`;

/**
 * The event source's settings from its config and the policy: pure, so every entry point
 * (CLI, harness, lab) can be compared on the same inputs. Throws FastfenceError
 * (FF_INVALID_CONFIG) naming a missing node or Kafka address, InvalidInputError for bad
 * watchdog settings.
 */
export function eventSourceSettings(
  config: RuntimeConfig,
  policy: FencingPolicySpec,
  bus: KafkaBusConfig,
): EventSourceSettings {
  if (!config.FASTFENCE_NODE_NAME)
    throw new FastfenceError("FF_INVALID_CONFIG", "the event source needs its node: FASTFENCE_NODE_NAME");
  // Where the device is; the policy's entry for this node decides whether it is armed.
  const watchdog = watchdogDevice(config);
  const source: EventSourceConfig = {
    replica: config.FASTFENCE_REPLICA,
    node: config.FASTFENCE_NODE_NAME,
    probe: policy.probe,
    leaseStaleMs: policy.suspicion.leaseStaleMs,
    policy,
    heartbeatNamespace: config.FASTFENCE_NAMESPACE,
    ...(config.FASTFENCE_KUBE_ENDPOINTS
      ? { apiEndpoints: kubeEndpointsOptions(config.FASTFENCE_KUBE_ENDPOINTS) }
      : {}),
    ...(watchdog ? { watchdog } : {}),
    ...(config.FASTFENCE_WATCHDOG_VOUCH_PORT > 0 ? { vouchPort: config.FASTFENCE_WATCHDOG_VOUCH_PORT } : {}),
    ...(config.FASTFENCE_KAFKA_TOPIC ? { topic: config.FASTFENCE_KAFKA_TOPIC } : {}),
  };
  return {
    source,
    kafka: {
      brokers: bus.brokers,
      clientId: bus.clientId,
      client: config.FASTFENCE_KAFKA_CLIENT,
      ...(bus.sessionTimeoutMs !== undefined ? { sessionTimeoutMs: bus.sessionTimeoutMs } : {}),
      ...(bus.hedgeAfterMs !== undefined ? { hedgeAfterMs: bus.hedgeAfterMs } : {}),
      ...(bus.metadataMaxAgeMs !== undefined ? { metadataMaxAgeMs: bus.metadataMaxAgeMs } : {}),
      ...(bus.acks !== undefined ? { acks: bus.acks } : {}),
      tls: !!bus.security?.ssl,
      ...(bus.security?.sasl ? { user: bus.security.sasl.username } : {}),
    },
    policy: config.FASTFENCE_POLICY,
  };
}

export interface HostedEventSource {
  source: EventSource;
  bus: KafkaBus;
  settings: EventSourceSettings;
  ready: Promise<void>;
  /** Stops the replica, then closes its bus. */
  stop(): Promise<void>;
}

/**
 * Starts one event-source replica in this process: reads the policy from the API and follows
 * its changes, as the stages' readers do (source/policy-follow.ts).
 */
export async function hostEventSource(opts: {
  config: RuntimeConfig;
  kubeConfig: KubeConfig;
  log?: Logger;
  clock?: Clock;
  metrics?: SourceMetrics;
}): Promise<HostedEventSource> {
  const { config } = opts;
  const log = (opts.log ?? createLogger("event-source")).child({ replica: config.FASTFENCE_REPLICA });
  if (!config.FASTFENCE_KAFKA_BROKERS)
    throw new FastfenceError("FF_INVALID_CONFIG", "the event source needs Kafka: FASTFENCE_KAFKA_BROKERS");
  const clock = opts.clock ?? systemClock;
  const kube = new Kube(opts.kubeConfig, {
    requestTimeoutMs: config.FASTFENCE_KUBE_TIMEOUT_MS,
    ...kubeEndpointsOptions(config.FASTFENCE_KUBE_ENDPOINTS),
    log,
  });
  const reader = new PolicyReader(kube, config.FASTFENCE_POLICY, undefined, { log });
  const policy = await reader.get(clock.now());
  const busConfig = kafkaBusSettings(config, sourceClientId(config.FASTFENCE_REPLICA), log);
  const settings = eventSourceSettings(config, policy, busConfig);
  log.info({ incident: "none", node: settings.source.node, settings }, "event source: effective settings");
  const bus = createKafkaBus(busConfig, config.FASTFENCE_KAFKA_CLIENT);
  try {
    const source = await startEventSource({
      kubeConfig: opts.kubeConfig,
      bus,
      clock,
      log,
      config: settings.source,
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
    });
    // The policy re-read as the stages re-read it, its changes applied to the running source.
    const follower = startPolicyFollower({ read: (now) => reader.get(now), source, clock, log });
    return {
      source,
      bus,
      settings,
      ready: source.ready,
      stop: async () => {
        follower.stop();
        kube.close();
        await source.stop().catch(() => undefined);
        await bus.close().catch(() => undefined);
      },
    };
  } catch (err) {
    kube.close();
    await bus.close().catch(() => undefined);
    throw err;
  }
}
