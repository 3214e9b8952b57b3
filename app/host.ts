// The composition root: starts one pipeline stage (Kafka consumer or Knative HTTP) inside the current
// process, from a RuntimeConfig and a KubeConfig — builds the adapters, the bus, logs, metrics and tracing
// (infra/tracing.ts: off unless an OTLP endpoint is set), runs the stage's pure decision through the stage
// executor (and, for stages that re-drive incidents, the reconciler), and returns a handle to stop it. Used
// by `fastfence run`, the lab and the integration tests, so all three run the same wiring; it decides nothing.
import type { KubeConfig } from "@kubernetes/client-node";
import { stopReplica } from "./stop-steps.ts";
import { readFile } from "node:fs/promises";
import { systemClock, type Clock } from "../core/clock.ts";
import { FastfenceError } from "../core/errors.ts";
import { CATALOG, TOPICS, acksFor, isEventType, parseEvent } from "../events/catalog.ts";
import { encodeHttp, encodeKafka } from "../events/codec.ts";
import { envelope, type FfEvent } from "../events/envelope.ts";
import type { PureStage } from "../functions/contract.ts";
import { findStage, stageNames } from "../functions/registry.ts";
import { createKafkaBus } from "../infra/bus/kafka-bus.ts";
import type { KafkaBusConfig } from "../infra/bus/kafka-config.ts";
import { kafkaSecurityFrom } from "../infra/bus/kafka-security.ts";
import type { Bus } from "../infra/bus/bus.ts";
import { KubeMetal3Api } from "../infra/bmc/metal3.ts";
import {
  httpAllowedSubjects,
  httpAudience,
  selfFor,
  kafkaRuntimeSettings,
  metal3Namespaces,
  trustedConfirmers,
  type RuntimeConfig,
} from "../infra/config.ts";
import { BmcPowerExecutor, startHeartbeatWatch } from "../infra/fence/power.ts";
import { Kube } from "../infra/kube/client.ts";
import { IncidentStore } from "../infra/kube/incidents.ts";
import { LeaseManager } from "../infra/kube/lease.ts";
import { NodeOps } from "../infra/kube/nodes.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { PolicyStatusReporter } from "../infra/kube/policy-status.ts";
import { createLogger, type Logger } from "../infra/log.ts";
import { IncidentEventRecorder } from "../infra/kube/incident-events.ts";
import { PlannedReader } from "../infra/kube/planned.ts";
import { RemediatorReader } from "../infra/kube/remediators.ts";
import { describeConflict } from "../core/remediators.ts";
import { recordOpenIncidents } from "../infra/runtime/incident-gauges.ts";
import { startBackground } from "./background.ts";
import { createFunctionMetrics, type FunctionMetrics } from "../infra/metrics.ts";
import type { CatalogView } from "../infra/runtime/dispatch.ts";
import { LeaseHandoff } from "../infra/kube/lease-handoff.ts";
import { stageRunner, type StageAdapters, type StageRunner } from "../infra/runtime/stage-executor.ts";
import { startReconciler } from "../infra/runtime/reconciler.ts";
import { startHttpRuntime } from "../infra/runtime/http-runtime.ts";
import {
  createTokenReviewAuthenticator,
  kubeTokenReviewer,
  noAuthentication,
} from "../infra/runtime/http-auth.ts";
import { startKafkaRuntime } from "../infra/runtime/kafka-runtime.ts";
import { createTracing, type Tracing } from "../infra/tracing.ts";
import { stageSettings } from "./stage-settings.ts";

/**
 * The catalog as the runtimes see it; `singleTopic` (FASTFENCE_KAFKA_TOPIC, e.g. the Knative broker's
 * topic) puts every event on one topic: the HTTP runtime publishes its extra events there, the Kafka
 * runtime consumes from and publishes to it. Dead letters keep their own topic.
 */
export function catalogViewFor(singleTopic?: string): CatalogView {
  return singleTopic ? { ...catalogView, topicOf: () => singleTopic } : catalogView;
}

export const catalogView: CatalogView = {
  parse: parseEvent,
  topicOf: (type) => {
    if (!isEventType(type))
      throw new FastfenceError("FF_INVALID_EVENT", `no topic for unknown event type ${type}`);
    return CATALOG[type].topic;
  },
  deadLetterTopic: TOPICS.deadLetter,
};

export { pipelineTopics } from "./topics.ts";

/** A replica's Kafka bus settings, all from its config: `fastfence run`'s and the lab's (lab/node-agent.ts). */
export function kafkaBusSettings(config: RuntimeConfig, clientId: string, log: Logger): KafkaBusConfig {
  if (!config.FASTFENCE_KAFKA_BROKERS)
    throw new FastfenceError("FF_INVALID_CONFIG", "FASTFENCE_KAFKA_BROKERS is required for --kafka");
  return {
    brokers: config.FASTFENCE_KAFKA_BROKERS,
    clientId,
    sessionTimeoutMs: config.FASTFENCE_KAFKA_SESSION_TIMEOUT_MS,
    hedgeAfterMs: config.FASTFENCE_KAFKA_HEDGE_MS,
    metadataMaxAgeMs: config.FASTFENCE_KAFKA_METADATA_MAX_AGE_MS,
    acks: config.FASTFENCE_KAFKA_ACKS,
    security: kafkaSecurityFrom(config, log),
    log,
  };
}

export interface HostedFunction {
  name: string;
  ready: Promise<void>;
  metrics: FunctionMetrics;
  /** HTTP port when hosted over HTTP. */
  port?: number;
  stop(): Promise<void>;
}

export async function hostFunction(opts: {
  name: string;
  mode: { kafka: true } | { http: number; host?: string };
  config: RuntimeConfig;
  kubeConfig: KubeConfig;
  bus?: Bus;
  clock?: Clock;
  log?: Logger;
  /**
   * Node.js process metrics (GC, event loop, memory) on this stage's registry. Default: on
   * when the stage has its own process and bus. A process hosting several stages (the lab's
   * node agent, the test harness) turns them off: they would be sampled once per stage.
   */
  processMetrics?: boolean;
}): Promise<HostedFunction> {
  const { config } = opts;
  const def = findStage(opts.name);
  if (!def)
    throw new FastfenceError(
      "FF_INVALID_CONFIG",
      `unknown function "${opts.name}"; functions: ${stageNames().join(", ")}`,
    );
  const clock = opts.clock ?? systemClock;
  const log = (opts.log ?? createLogger(def.name)).child({ replica: config.FASTFENCE_REPLICA });
  const settings = stageSettings(def.name, opts.mode, config);
  log.info({ incident: "none", node: settings.node, settings }, "stage: effective settings");
  const metrics = createFunctionMetrics({ defaultMetrics: opts.processMetrics ?? !opts.bus });
  const kube = new Kube(opts.kubeConfig, {
    requestTimeoutMs: config.FASTFENCE_KUBE_TIMEOUT_MS,
    extraEndpoints: (config.FASTFENCE_KUBE_ENDPOINTS ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  });
  const ns = config.FASTFENCE_NAMESPACE;
  const metal3 = new KubeMetal3Api(kube, { namespaces: metal3Namespaces(config) });
  const remediators = new RemediatorReader(kube);
  const heartbeats = def.name === "fence" ? startHeartbeatWatch(kube, ns, log) : undefined;
  const who = { component: def.name, instance: config.FASTFENCE_REPLICA };
  const adapters: StageAdapters = {
    kube,
    incidents: new IncidentStore(kube, ns),
    nodes: new NodeOps(kube),
    leases: new LeaseManager(kube, { namespace: ns }), // fencing Leases: the policy's leaseDurationMs
    leaseNamespace: ns,
    policy: new PolicyReader(kube, config.FASTFENCE_POLICY, undefined, {
      log,
      metrics,
      reporter: new PolicyStatusReporter(kube, {
        component: def.name,
        instance: config.FASTFENCE_REPLICA,
        log,
      }),
    }),
    power: new BmcPowerExecutor(kube, ns, clock, metal3, { log, metrics, ...(heartbeats && { heartbeats }) }),
    metal3,
    ...(def.name === "fence" && { handoff: new LeaseHandoff(kube, { namespace: ns, log, ...who }) }),
    events: new IncidentEventRecorder(kube, { ...who, log, metrics }),
    planned: new PlannedReader(kube, {
      remediators: (n, now) => remediators.conflictsFor(n, now).then((cs) => cs.map(describeConflict)),
      warm: (now) => remediators.snapshot(now, true),
    }),
  };
  const self = selfFor(config, def.name);
  const runner = stageRunner(def, adapters, self, { trustedConfirmers: trustedConfirmers(config) });
  // confirm and fence: planned-work reads kept warm; confirm: RemediatorConflict condition and
  // event-source coverage; fence: BMC health.
  const report = startBackground({
    stage: def.name,
    config,
    kube,
    nodes: adapters.nodes,
    policy: adapters.policy,
    remediators,
    planned: adapters.planned!,
    metal3,
    metrics,
    clock,
    log,
    also: heartbeats ? [heartbeats] : [], // fence's own watch of the heartbeat Leases (watchdog level)
  });
  const handler = runner.handle;
  await warmUp(adapters.incidents, log);
  // Read the policy once now, so an invalid one is reported at start, not at the first
  // event. Errors are left to the first event (the API may be briefly down).
  await adapters.policy.get(clock.now()).catch(() => undefined);
  const ownBus = !opts.bus;
  const needBus = "kafka" in opts.mode;
  let bus = opts.bus;
  if (!bus && (needBus || config.FASTFENCE_KAFKA_BROKERS)) {
    bus = createKafkaBus(
      kafkaBusSettings(config, `fastfence-${def.name}-${config.FASTFENCE_REPLICA}`, log),
      config.FASTFENCE_KAFKA_CLIENT,
    );
  }
  const dispatch = { handlerTimeoutMs: config.FASTFENCE_HANDLER_TIMEOUT_MS };
  const tracing = await createTracing(config, { stage: def.name, replica: config.FASTFENCE_REPLICA });
  if (tracing.enabled) log.info({ incident: "none", node: "none" }, "tracing: exporting spans over OTLP");
  const catalog = catalogViewFor(config.FASTFENCE_KAFKA_TOPIC);
  if ("kafka" in opts.mode) {
    const rt = await startKafkaRuntime({
      def,
      handler,
      bus: bus!,
      catalog,
      clock,
      log,
      metrics,
      tracing,
      config: { ...kafkaRuntimeSettings(config), dispatch },
    });
    const kbus = bus!;
    const reconciler = reconcilerFor(
      def,
      runner,
      adapters,
      config,
      clock,
      log,
      metrics,
      tracing,
      async (evs) => {
        for (const ev of evs)
          await kbus.publish(catalog.topicOf(ev.type), [encodeKafka(ev)], { acks: acksFor(ev.type) });
      },
    );
    return {
      name: def.name,
      ready: rt.ready,
      metrics,
      stop: () =>
        stopReplica({ rt, reconciler, report, ownBus: ownBus ? bus : undefined, tracing }, { clock, log }),
    };
  }
  const b = bus;
  const publishExtra: ((evs: FfEvent[]) => Promise<void>) | undefined = config.K_SINK
    ? (evs) =>
        postToSink(config.K_SINK!, evs, config.FASTFENCE_KUBE_TIMEOUT_MS, config.FASTFENCE_SINK_TOKEN_FILE, {
          traceHeader: tracing.enabled,
        })
    : b
      ? async (evs) => {
          for (const ev of evs) await b.publish(catalog.topicOf(ev.type), [encodeKafka(ev)]);
        }
      : undefined;
  const rt = await startHttpRuntime({
    def,
    handler,
    catalog,
    clock,
    log,
    metrics,
    port: opts.mode.http,
    ...(opts.mode.host ? { host: opts.mode.host } : {}),
    replica: config.FASTFENCE_REPLICA,
    auth:
      config.FASTFENCE_HTTP_AUTH === "none"
        ? noAuthentication
        : createTokenReviewAuthenticator({
            audience: httpAudience(config, def.name),
            allowedSubjects: httpAllowedSubjects(config),
            reviewer: kubeTokenReviewer(kube, config.FASTFENCE_HTTP_AUTH_TIMEOUT_MS),
            clock,
            cacheTtlMs: config.FASTFENCE_HTTP_AUTH_CACHE_SECONDS * 1000,
          }),
    dispatch,
    tracing,
    ...(publishExtra ? { publishExtra } : {}),
  });
  const reconciler = reconcilerFor(
    def,
    runner,
    adapters,
    config,
    clock,
    log,
    metrics,
    tracing,
    async (evs) => {
      if (publishExtra) await publishExtra(evs);
      else
        log.warn(
          { incident: "none", node: "none", events: evs.map((e) => e.type) },
          "no K_SINK or Kafka: a resync's events are not published (its writes stand; the next stage's resync picks them up)",
        );
    },
  );
  return {
    name: def.name,
    ready: Promise.resolve(),
    metrics,
    port: rt.port,
    stop: () =>
      stopReplica({ rt, reconciler, report, ownBus: ownBus ? b : undefined, tracing }, { clock, log }),
  };
}

/**
 * The reconciler of a stage that re-drives incidents (PureStage.resyncPhases), publishing
 * each resync's events with this replica as their source; none for other stages.
 */
function reconcilerFor(
  def: PureStage,
  runner: StageRunner,
  ad: StageAdapters,
  config: RuntimeConfig,
  clock: Clock,
  log: Logger,
  metrics: FunctionMetrics,
  tracing: Tracing,
  publish: (evs: FfEvent[]) => Promise<void>,
) {
  if (!def.resyncPhases?.length || !def.locateResync) return undefined;
  const source = `/fastfence/${def.name}/${config.FASTFENCE_REPLICA}`;
  return startReconciler({
    stage: def.name,
    phases: def.resyncPhases,
    ...(def.resyncWants ? { wants: def.resyncWants } : {}),
    runner,
    listOpen: () => ad.incidents.listOpen(),
    policy: (now) => ad.policy.get(now),
    publish: (outs, tp) => publish(outs.map((o) => envelope(o, source, clock.now(), undefined, tp))),
    handlerTimeoutMs: config.FASTFENCE_HANDLER_TIMEOUT_MS,
    clock,
    log,
    observe: (open, policy, now) => recordOpenIncidents(metrics, open, policy, now),
    tracing,
  });
}

/**
 * POSTs events to a Knative sink (binary mode), one request each; a non-2xx is a retriable
 * error. With `tokenFile` (FASTFENCE_SINK_TOKEN_FILE) each post carries its token as a bearer
 * token, read afresh every time (the kubelet rotates it); the token is never logged. With
 * `traceHeader` (tracing on) each post also carries the event's traceparent as the W3C
 * `traceparent` header, so a Knative broker with tracing on continues the incident's trace.
 */
export async function postToSink(
  url: string,
  events: FfEvent[],
  timeoutMs: number,
  tokenFile?: string,
  opts: { traceHeader?: boolean } = {},
): Promise<void> {
  for (const ev of events) {
    const { headers, body } = encodeHttp(ev);
    if (opts.traceHeader && ev.traceparent) headers.traceparent = ev.traceparent;
    if (tokenFile) {
      let token: string;
      try {
        token = (await readFile(tokenFile, "utf8")).trim();
      } catch (err) {
        throw new FastfenceError("FF_BUS_UNAVAILABLE", `cannot read the sink token file ${tokenFile}`, {
          cause: err,
          retriable: true,
        });
      }
      headers.authorization = `Bearer ${token}`;
    }
    let res: Response;
    try {
      res = await fetch(url, { method: "POST", headers, body, signal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      throw new FastfenceError("FF_BUS_UNAVAILABLE", `sink ${new URL(url).host} unreachable`, {
        cause: err,
        retriable: true,
      });
    }
    if (!res.ok)
      throw new FastfenceError("FF_BUS_UNAVAILABLE", `sink answered HTTP ${res.status}`, { retriable: true });
  }
}

/**
 * Reads the incident store once before taking events. The apiserver builds a custom
 * resource's storage and watch cache on its first request and answers lists with 429 until
 * the cache is ready (about a second); that must not happen during the first incident. A
 * failure is only logged: the API may be briefly down, and every handler retries on its
 * own. An identity that may not list NodeFences (403) simply never lists them.
 */
async function warmUp(incidents: IncidentStore, log: Logger): Promise<void> {
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      await incidents.list();
      return;
    } catch (err) {
      if (err instanceof FastfenceError && !err.retriable) return;
      if (attempt === 5) log.warn({ incident: "none", node: "none", err }, "cannot read NodeFences yet");
      else await new Promise((r) => setTimeout(r, 300 * attempt));
    }
  }
}
