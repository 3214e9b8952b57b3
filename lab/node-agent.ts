// The node agent of one simulated lab node: in one process (cheap on 2 cores), the node's
// event-source replica and one replica of every pipeline function (Kafka runtime), wired
// exactly like the integration tests and `fastfence run` (app/host.ts), with the settings
// its Knative Service ships (lab/replica-settings.ts); each replica connects to Kafka as its
// own component's user, from the Secret-like credential files of lab/kafka.ts
// (FASTFENCE_KAFKA_* settings, as the manifests set them). As the lab's admin
// it first creates the topics and the manifests' KafkaUser ACLs. It also
// serves a tiny control endpoint on a Unix socket in the node dir (AGENT_SOCKET: out of
// band, so a partitioned node still takes it) for the "function-only crash" fault (stops
// chosen replicas while the node stays healthy), its replicas' metrics on the node's
// address (AGENT_METRICS_PORT), and writes agent.json
// (ready, replicas) into the node dir. It decides nothing itself.
import { KubeConfig } from "@kubernetes/client-node";
import { writeFileSync, readFileSync, rmSync } from "node:fs";
import { createServer, type RequestListener } from "node:http";
import { join } from "node:path";
import { systemClock } from "../core/clock.ts";
import { createKafkaBus, type KafkaBus } from "../infra/bus/kafka-bus.ts";
import { kafkaSecurityFrom } from "../infra/bus/kafka-security.ts";
import type { Component } from "../events/catalog.ts";
import { applyKafkaAcls, readKafkaUsers } from "../harness/env/kafka-auth.ts";
import { labKafkaEnv, labKafkaSecurity } from "./kafka.ts";
import { loadRuntimeConfig } from "../infra/config.ts";
import { Kube } from "../infra/kube/client.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { createLogger } from "../infra/log.ts";
import { hostFunction, kafkaBusSettings, pipelineTopics, type HostedFunction } from "../app/host.ts";
import { labStageEnv, shippedStages } from "./replica-settings.ts";
import { stageNames } from "../functions/registry.ts";
import { startEventSource, type EventSource } from "../source/event-source.ts";
import type { WatchdogAgentConfig } from "../source/watchdog-agent.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import { AGENT_SOCKET, type AgentStatus } from "./types.ts";

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
}

const cfg = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as AgentConfig;
const log = createLogger("lab-agent", { level: process.env.FASTFENCE_LOG_LEVEL ?? "warn" }).child({
  node: cfg.node,
});
const status: AgentStatus = {
  ready: false,
  source: false,
  functions: [],
  startedAt: new Date().toISOString(),
  step: "starting",
};
const save = () => writeFileSync(join(cfg.dir, "agent.json"), JSON.stringify(status));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const step = (what: string) => {
  status.step = what;
  save();
  log.info({ incident: "none" }, `agent: ${what}`);
};

async function retry<T>(what: string, fn: () => Promise<T>, tries = 240, everyMs = 500): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= tries) throw err;
      if (i % 20 === 0 || everyMs >= 1000)
        log.warn({ err: String(err) }, `${what}: still retrying (try ${i})`);
      await sleep(everyMs);
    }
  }
}

/** One function replica and the bus it alone uses. */
interface FunctionReplica {
  fn: HostedFunction;
  bus: KafkaBus;
}

/** Replicas of this node, as one unit: started together, stopped together on a failed start. */
interface Replicas {
  source?: EventSource;
  sourceBus?: KafkaBus;
  fns: FunctionReplica[];
}

async function stopFunction(f: FunctionReplica): Promise<void> {
  await f.fn.stop().catch(() => undefined);
  await f.bus.close().catch(() => undefined);
}

async function stopReplicas(r: Replicas): Promise<void> {
  for (const f of r.fns) await stopFunction(f);
  await r.source?.stop().catch(() => undefined);
  await r.sourceBus?.close().catch(() => undefined);
}

/** A component's settings, as its pod would get them from its Secret mounts. */
const componentEnv = (c: Component) => ({
  FASTFENCE_NAMESPACE: cfg.namespace,
  FASTFENCE_NODE_NAME: cfg.node,
  ...labKafkaEnv(c),
});

/** The node's event source (with its watchdog agent, when the lab gives one) on a bus of its own. */
async function startSource(
  kc: KubeConfig,
  policy: FencingPolicySpec,
): Promise<{ source: EventSource; bus: KafkaBus }> {
  const kafkaLog = log.child({ component: "kafka" });
  const replica = `source-${cfg.node}`;
  const bus = createKafkaBus({
    brokers: cfg.brokers,
    clientId: replica,
    security: kafkaSecurityFrom(loadRuntimeConfig(componentEnv("event-source")), kafkaLog),
    log: kafkaLog,
  });
  try {
    const source = await startEventSource({
      kubeConfig: kc,
      bus,
      clock: systemClock,
      log: log.child({ component: "event-source" }),
      config: {
        replica,
        node: cfg.node,
        probe: policy.probe,
        leaseStaleMs: policy.suspicion.leaseStaleMs,
        policy, // the watchdog is armed only where its node entry has the watchdog level
        heartbeatNamespace: cfg.namespace,
        ...(cfg.watchdog ? { watchdog: cfg.watchdog } : {}),
      },
    });
    return { source, bus };
  } catch (err) {
    await bus.close().catch(() => undefined);
    throw err;
  }
}

/**
 * One function replica: the stage's Service settings from the rendered manifests
 * (lab/replica-settings.ts), this environment's own, and its bus from that config as
 * `fastfence run` builds it.
 */
async function startFunction(kc: KubeConfig, fn: string): Promise<FunctionReplica> {
  const replica = `${fn}-${cfg.node}`;
  const config = loadRuntimeConfig({
    ...labStageEnv(fn, shippedStages()),
    ...componentEnv(fn as Component),
    ...(process.env.FASTFENCE_KAFKA_CLIENT
      ? { FASTFENCE_KAFKA_CLIENT: process.env.FASTFENCE_KAFKA_CLIENT }
      : {}),
    FASTFENCE_KAFKA_BROKERS: cfg.brokers,
    FASTFENCE_REPLICA: replica,
  });
  const bus = createKafkaBus(
    kafkaBusSettings(config, replica, log.child({ component: "kafka", client: replica })),
    config.FASTFENCE_KAFKA_CLIENT,
  );
  try {
    const hosted = await hostFunction({
      name: fn,
      mode: { kafka: true },
      config,
      kubeConfig: kc,
      bus,
      log: log.child({ component: fn }),
    });
    return { fn: hosted, bus };
  } catch (err) {
    await bus.close().catch(() => undefined);
    throw err;
  }
}

async function startReplicas(kc: KubeConfig, policy: FencingPolicySpec): Promise<Replicas> {
  const r: Replicas = { fns: [] };
  try {
    const src = await startSource(kc, policy);
    r.sourceBus = src.bus;
    r.source = src.source;
    for (const fn of stageNames()) r.fns.push(await startFunction(kc, fn));
    // Until every replica has synced its watches / joined its consumer group, name the
    // ones still pending in agent.json, so a slow start says what it waits for.
    const waiting: [string, Promise<void>][] = [
      ["event-source", r.source.ready],
      ...r.fns.map((f): [string, Promise<void>] => [f.fn.name, f.fn.ready]),
    ];
    const pending = new Set(waiting.map(([n]) => n));
    status.pending = [...pending];
    save();
    await Promise.all(
      waiting.map(([n, p]) =>
        p.then(() => {
          pending.delete(n);
          status.pending = [...pending];
          save();
        }),
      ),
    );
    return r;
  } catch (err) {
    await stopReplicas(r);
    throw err;
  }
}

async function main(): Promise<void> {
  save();
  const kc = new KubeConfig();
  kc.loadFromFile(cfg.kubeconfig);
  const adminSecurity = labKafkaSecurity("admin");
  step("creating topics");
  const admin = createKafkaBus({
    brokers: cfg.brokers,
    clientId: `lab-admin-${cfg.node}`,
    security: adminSecurity,
  });
  // Only once every broker runs: with fewer replicas than brokers, a broker still
  // starting would hold no replica at all.
  await retry("topics", () =>
    admin.ensureTopics(pipelineTopics(cfg.brokerCount, 3, cfg.topicReplicas), { brokers: cfg.brokerCount }),
  );
  await admin.close().catch(() => undefined);
  // Every agent applies the same ACLs (creating an existing ACL changes nothing).
  step("creating ACLs");
  const users = readKafkaUsers();
  await retry("acls", () => applyKafkaAcls(cfg.brokers, adminSecurity, users));
  step("reading the FencingPolicy");
  const policy = await retry("policy", () => new PolicyReader(new Kube(kc), "default").get(Date.now()));

  // A replica that fails to start (a broker not yet coordinator, an API hiccup) is
  // started again with the others, as a pod's container would be restarted.
  step("starting replicas");
  const started = await retry("starting replicas", () => startReplicas(kc, policy), 5, 2000);
  const { fns } = started;
  let { source, sourceBus } = started;
  const saveReplicas = () => {
    status.functions = fns.map((f) => f.fn.name);
    status.source = !!source;
    save();
  };
  status.ready = true;
  status.readyAt = new Date().toISOString();
  saveReplicas();
  step("ready");

  /** Starts `names` again, as the kubelet restarts crashed containers (each retried until it runs). */
  const restartFunctions = async (names: string[]) => {
    for (const name of names) {
      const f = await retry(`restarting ${name}`, () => startFunction(kc, name), 240, 1000);
      await f.fn.ready;
      fns.push(f);
      saveReplicas();
      log.info({ incident: "none", fn: name }, "agent: function replica restarted");
    }
  };

  // Control: POST /crash?functions=a,b&source=1 stops those replicas (a crashed pod);
  // &restart=1 starts the event source again after its graceful stop (a rolling update);
  // &restartAfterMs=N starts the stopped functions again N ms later (a crashed container).
  // GET /metrics: every running function replica's metrics, one after the other.
  const handle: RequestListener = (req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    if (req.method === "GET" && u.pathname === "/metrics") {
      void Promise.all(fns.map((f) => f.fn.metrics.registry.metrics())).then(
        (texts) => res.writeHead(200, { "content-type": "text/plain" }).end(texts.join("\n")),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    if (req.method === "POST" && u.pathname === "/crash") {
      const names = (u.searchParams.get("functions") ?? "").split(",").filter(Boolean);
      const stopSource = u.searchParams.get("source") === "1";
      const restartAfter = u.searchParams.get("restartAfterMs");
      const restartAfterMs = restartAfter === null ? undefined : Number(restartAfter);
      if (restartAfterMs !== undefined && !(Number.isInteger(restartAfterMs) && restartAfterMs >= 0)) {
        res.writeHead(400).end(`restartAfterMs must be a whole number of ms >= 0, got ${restartAfter}`);
        return;
      }
      void (async () => {
        const crashed = fns.filter((f) => names.includes(f.fn.name));
        // Side by side: each stop waits at most the runtime's stopLeaveWaitMs for a frozen broker.
        await Promise.all(crashed.map(stopFunction));
        for (const f of crashed) fns.splice(fns.indexOf(f), 1);
        if (stopSource && source) {
          await source.stop().catch(() => undefined);
          await sourceBus?.close().catch(() => undefined);
          source = undefined;
          sourceBus = undefined;
          if (u.searchParams.get("restart") === "1") {
            const again = await retry("restarting the event source", () => startSource(kc, policy), 10, 1000);
            await again.source.ready;
            ({ source, bus: sourceBus } = again);
          }
        }
        saveReplicas();
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(status));
        if (restartAfterMs !== undefined && crashed.length)
          setTimeout(() => {
            restartFunctions(crashed.map((f) => f.fn.name)).catch((err: unknown) =>
              log.error({ incident: "none", err: String(err) }, "agent: restarting function replicas failed"),
            );
          }, restartAfterMs);
      })();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(status));
  };
  // The lab's control calls use the socket; metrics are scraped over the node's network.
  const socket = join(cfg.dir, AGENT_SOCKET);
  rmSync(socket, { force: true }); // the previous boot's
  createServer(handle).listen(socket);
  createServer(handle).listen(cfg.metricsPort, cfg.ip);
}

main().catch((err: unknown) => {
  log.error({ err: String(err) }, "node agent failed");
  status.failed = `${status.step}: ${String(err)}`;
  save();
  process.exit(1);
});
