// The node agent of one simulated lab node: in one process (cheap on 2 cores), the node's
// event-source replica and one replica of every pipeline function (Kafka runtime), wired
// exactly like the integration tests and `fastfence run` (app/host.ts), with the settings
// its Knative Service ships (lab/replica-settings.ts); each replica connects to Kafka as its
// own component's user, from the Secret-like credential files of lab/kafka.ts
// (FASTFENCE_KAFKA_* settings, as the manifests set them). As the lab's admin
// it first creates the topics and the manifests' KafkaUser ACLs. It also
// serves a tiny control endpoint on the node's address for the "function-only crash"
// fault (stops chosen replicas while the node stays healthy) and writes agent.json
// (ready, replicas) into the node dir. It decides nothing itself.
import { KubeConfig } from "@kubernetes/client-node";
import { writeFileSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
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
import type { AgentStatus } from "./types.ts";

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
  controlPort: number;
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

/** Replicas of this node, as one unit: started together, stopped together on a failed start. */
interface Replicas {
  source?: EventSource;
  fns: HostedFunction[];
  buses: KafkaBus[];
}

async function stopReplicas(r: Replicas): Promise<void> {
  for (const f of r.fns) await f.stop().catch(() => undefined);
  await r.source?.stop().catch(() => undefined);
  for (const b of r.buses) await b.close().catch(() => undefined);
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

async function startReplicas(kc: KubeConfig, policy: FencingPolicySpec): Promise<Replicas> {
  const r: Replicas = { fns: [], buses: [] };
  const shipped = shippedStages();
  try {
    const replica = (fn: string) => `${fn}-${cfg.node}`;
    const kafkaLog = log.child({ component: "kafka" });
    const src = await startSource(kc, policy);
    r.buses.push(src.bus);
    r.source = src.source;
    for (const fn of stageNames()) {
      // The stage's Service settings from the rendered manifests (lab/replica-settings.ts),
      // this environment's own, and its bus from that config as `fastfence run` builds it.
      const config = loadRuntimeConfig({
        ...labStageEnv(fn, shipped),
        ...componentEnv(fn as Component),
        ...(process.env.FASTFENCE_KAFKA_CLIENT
          ? { FASTFENCE_KAFKA_CLIENT: process.env.FASTFENCE_KAFKA_CLIENT }
          : {}),
        FASTFENCE_KAFKA_BROKERS: cfg.brokers,
        FASTFENCE_REPLICA: replica(fn),
      });
      const bus = createKafkaBus(
        kafkaBusSettings(config, replica(fn), kafkaLog.child({ client: replica(fn) })),
        config.FASTFENCE_KAFKA_CLIENT,
      );
      r.buses.push(bus);
      r.fns.push(
        await hostFunction({
          name: fn,
          mode: { kafka: true },
          config,
          kubeConfig: kc,
          bus,
          log: log.child({ component: fn }),
        }),
      );
    }
    // Until every replica has synced its watches / joined its consumer group, name the
    // ones still pending in agent.json, so a slow start says what it waits for.
    const waiting: [string, Promise<void>][] = [
      ["event-source", r.source.ready],
      ...r.fns.map((f): [string, Promise<void>] => [f.name, f.ready]),
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
  const fns = started.fns;
  let source = started.source;
  status.ready = true;
  status.source = true;
  status.functions = fns.map((f) => f.name);
  status.readyAt = new Date().toISOString();
  step("ready");

  // Control: POST /crash?functions=a,b&source=1 stops those replicas (a crashed pod);
  // &restart=1 starts the event source again after its graceful stop (a rolling update).
  // GET /metrics: every running function replica's metrics, one after the other.
  createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    if (req.method === "GET" && u.pathname === "/metrics") {
      void Promise.all(fns.map((f) => f.metrics.registry.metrics())).then(
        (texts) => res.writeHead(200, { "content-type": "text/plain" }).end(texts.join("\n")),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    if (req.method === "POST" && u.pathname === "/crash") {
      const names = (u.searchParams.get("functions") ?? "").split(",").filter(Boolean);
      const stopSource = u.searchParams.get("source") === "1";
      void (async () => {
        // Side by side: each stop waits at most the runtime's stopLeaveWaitMs for a frozen broker.
        await Promise.all(
          fns.filter((x) => names.includes(x.name)).map((f) => f.stop().catch(() => undefined)),
        );
        for (let i = fns.length - 1; i >= 0; i--) if (names.includes(fns[i]!.name)) fns.splice(i, 1);
        if (stopSource && source) {
          await source.stop().catch(() => undefined);
          source = undefined;
          if (u.searchParams.get("restart") === "1") {
            const again = await retry("restarting the event source", () => startSource(kc, policy), 10, 1000);
            await again.source.ready;
            source = again.source;
          }
        }
        status.functions = fns.map((f) => f.name);
        status.source = !!source;
        save();
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(status));
      })();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(status));
  }).listen(cfg.controlPort, cfg.ip);
}

main().catch((err: unknown) => {
  log.error({ err: String(err) }, "node agent failed");
  status.failed = `${status.step}: ${String(err)}`;
  save();
  process.exit(1);
});
