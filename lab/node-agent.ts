// The node agent of one simulated lab node: in one process (cheap on 2 cores), the node's
// event-source replica and one replica of every pipeline function (Kafka runtime), started
// through the composition roots of the unpacked artifact (app/index.ts, loaded from the
// directory the lab hands it), exactly like `fastfence run` and `fastfence source`, with the
// settings its Knative Service ships (lab/replica-settings.ts); each replica connects to
// Kafka as its own component's user, from the Secret-like credential files of lab/kafka.ts
// (FASTFENCE_KAFKA_* settings, as the manifests set them), and to the API server as its
// component's shipped ServiceAccount (lab/replica-identity.ts; the agent mints the tokens
// with the lab's credentials, as a kubelet does). As the lab's admin it first creates the
// topics and the manifests' KafkaUser ACLs. It also
// serves a tiny control endpoint on a Unix socket in the node dir (AGENT_SOCKET: out of
// band, so a partitioned node still takes it) for the "function-only crash" fault (stops
// chosen replicas while the node stays healthy), its replicas' metrics on the node's
// address (AGENT_METRICS_PORT), and writes agent.json
// (ready, replicas) into the node dir. It decides nothing itself.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { writeFileSync, readFileSync, rmSync } from "node:fs";
import { createServer, type RequestListener } from "node:http";
import { join } from "node:path";
import { createKafkaBus } from "../infra/bus/kafka-bus.ts";
import type { Component } from "../events/catalog.ts";
import { applyKafkaAcls, readKafkaUsers } from "../harness/env/kafka-auth.ts";
import { importApp, startSourceFromEnv } from "../harness/shipped-app.ts";
import { labKafkaSecurity } from "./kafka.ts";
import { Kube } from "../infra/kube/client.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { createLogger } from "../infra/log.ts";
import type { HostedEventSource, HostedFunction } from "../app/index.ts";
import { pipelineTopics } from "../app/host.ts";
import { labSourceSettings, labStageEnv, shippedSourceEnv, shippedStages } from "./replica-settings.ts";
import { forgetEarlierBoots, identityPodName, replicaKubeConfig } from "./replica-identity.ts";
import { whoAmI } from "../infra/kube/whoami.ts";
import { randomUUID } from "node:crypto";
import { labComponentEnv, labSourceEnv, type AgentConfig } from "./agent-env.ts";
import { AGENT_SOCKET, type AgentStatus } from "./types.ts";

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
let stepSince = Date.now();
const step = (what: string) => {
  status.steps = [...(status.steps ?? []), { step: status.step, ms: Date.now() - stepSince }];
  stepSince = Date.now();
  status.step = what;
  save();
  log.info({ incident: "none" }, `agent: ${what}`);
};

async function retry<T>(what: string, fn: () => Promise<T>, tries = 240, everyMs = 500): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      status.lastError = `${what}: ${(err instanceof Error ? err.message : String(err)).split("\n")[0]!.slice(0, 300)}`;
      save();
      if (i >= tries) throw err;
      if (i % 20 === 0 || everyMs >= 1000)
        log.warn({ err: String(err) }, `${what}: still retrying (try ${i})`);
      await sleep(everyMs);
    }
  }
}

const app = await importApp(cfg.artifact);

/** Replicas of this node, as one unit: started together, stopped together on a failed start. */
interface Replicas {
  source?: HostedEventSource;
  fns: HostedFunction[];
}

async function stopReplicas(r: Replicas): Promise<void> {
  for (const f of r.fns) await f.stop().catch(() => undefined);
  await r.source?.stop().catch(() => undefined);
}

/** The node's event source (with its watchdog agent, when the lab gives one), as `fastfence source` starts it. */
const startSource = async (kc: KubeConfig): Promise<HostedEventSource> =>
  startSourceFromEnv(
    app,
    labSourceEnv(cfg, labSourceSettings(shippedSourceEnv())),
    await identity(kc, "event-source"),
    log.child({ component: "event-source" }),
  );

/** This boot's name in its identity Pods (a new one at every power-on). */
const boot = randomUUID().slice(0, 8);
/**
 * The event source's identity Pod: a new one at each start of the source (this boot's first,
 * then one per restart, as a DaemonSet replaces its pod: the old one deleted first).
 */
let sourceIncarnation = 0;
const sourceBoot = () => `${boot}-${sourceIncarnation}`;
async function nextSourcePod(kc: KubeConfig): Promise<void> {
  if (sourceIncarnation > 0)
    await kc
      .makeApiClient(CoreV1Api)
      .deleteNamespacedPod({
        name: identityPodName(cfg.node, sourceBoot()),
        namespace: cfg.namespace,
        gracePeriodSeconds: 0,
      })
      .catch((err: { code?: number }) => {
        if (err.code !== 404) throw err;
      });
  sourceIncarnation++;
}

/** Each stage's identity of this boot (its pod's token, which outlives a container restart). */
const stageIdentities = new Map<Component, KubeConfig>();

/**
 * A replica's own identity: its shipped ServiceAccount's token (lab/replica-identity.ts),
 * minted with the agent's lab credentials as the kubelet mints a pod's; recorded in
 * agent.json as the API server names it.
 */
async function identity(kc: KubeConfig, component: Component): Promise<KubeConfig> {
  // A restarted container keeps its pod and its token (no API call, as a kubelet's restart).
  const kept = stageIdentities.get(component);
  if (kept) return kept;
  if (component === "event-source") await nextSourcePod(kc);
  const own = await replicaKubeConfig(kc, {
    namespace: cfg.namespace,
    node: cfg.node,
    component,
    boot: component === "event-source" ? sourceBoot() : boot,
  });
  const who = await whoAmI(new Kube(own));
  status.identities = { ...status.identities, [component]: who.username };
  save();
  if (component !== "event-source") stageIdentities.set(component, own);
  return own;
}

/**
 * One function replica: the stage's Service settings from the rendered manifests
 * (lab/replica-settings.ts) and this environment's own, started as `fastfence run` starts it
 * (its bus built from that config).
 */
async function startFunction(kc: KubeConfig, fn: string): Promise<HostedFunction> {
  return app.hostFunction({
    name: fn,
    mode: { kafka: true },
    config: app.loadRuntimeConfig({
      ...labStageEnv(fn, shippedStages()),
      ...labComponentEnv(cfg, fn as Component),
      FASTFENCE_REPLICA: `${fn}-${cfg.node}`,
    }),
    kubeConfig: await identity(kc, fn as Component),
    log: log.child({ component: fn }),
    processMetrics: false, // five stages share this process
  });
}

async function startReplicas(kc: KubeConfig): Promise<Replicas> {
  const r: Replicas = { fns: [] };
  try {
    r.source = await startSource(kc);
    for (const fn of app.stageNames()) r.fns.push(await startFunction(kc, fn));
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
  step("forgetting earlier boots' identities");
  await retry("identities", () => forgetEarlierBoots(kc, cfg.namespace, cfg.node));
  step("reading the FencingPolicy");
  // Only once it exists: every replica reads it at start.
  await retry("policy", () => new PolicyReader(new Kube(kc), "default").get(Date.now()));

  // A replica that fails to start (a broker not yet coordinator, an API hiccup) is
  // started again with the others, as a pod's container would be restarted.
  step("starting replicas");
  const started = await retry("starting replicas", () => startReplicas(kc), 5, 2000);
  const { fns } = started;
  let { source } = started;
  const saveReplicas = () => {
    status.functions = fns.map((f) => f.name);
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
      await f.ready;
      fns.push(f);
      saveReplicas();
      log.info({ incident: "none", fn: name }, "agent: function replica restarted");
    }
  };

  // The event source's Pod deleted while this node runs (a release on a lying BMC's word):
  // the kubelet kills that pod's container and the DaemonSet controller makes a new pod,
  // whose new bound token the source starts with (the old one is invalid once its Pod is gone).
  let following = false;
  const followSourcePod = async () => {
    if (following || !source) return;
    following = true;
    try {
      const gone = await kc
        .makeApiClient(CoreV1Api)
        .readNamespacedPod({ name: identityPodName(cfg.node, sourceBoot()), namespace: cfg.namespace })
        .then(
          () => false,
          (err: { code?: number }) => err.code === 404, // unreachable API: nothing known
        );
      if (!gone || !source) return;
      log.warn({ incident: "none" }, "agent: the event source's Pod was deleted; starting it again");
      await source.stop().catch(() => undefined);
      source = await retry("restarting the event source", () => startSource(kc), 30, 1000);
      saveReplicas();
    } catch (err) {
      log.error({ incident: "none", err: String(err) }, "agent: restarting the event source failed");
    } finally {
      following = false;
    }
  };
  setInterval(() => void followSourcePod(), 1000).unref();

  // Control: POST /crash?functions=a,b&source=1 stops those replicas (a crashed pod);
  // &restart=1 starts the event source again after its graceful stop (a rolling update);
  // &restartAfterMs=N starts the stopped functions again N ms later (a crashed container).
  // GET /metrics: every running function replica's metrics, one after the other.
  const handle: RequestListener = (req, res) => {
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
      const restartAfter = u.searchParams.get("restartAfterMs");
      const restartAfterMs = restartAfter === null ? undefined : Number(restartAfter);
      if (restartAfterMs !== undefined && !(Number.isInteger(restartAfterMs) && restartAfterMs >= 0)) {
        res.writeHead(400).end(`restartAfterMs must be a whole number of ms >= 0, got ${restartAfter}`);
        return;
      }
      void (async () => {
        const crashed = fns.filter((f) => names.includes(f.name));
        // Side by side: each stop waits at most the runtime's stopLeaveWaitMs for a frozen broker.
        await Promise.all(crashed.map((f) => f.stop().catch(() => undefined)));
        for (const f of crashed) fns.splice(fns.indexOf(f), 1);
        if (stopSource && source) {
          await source.stop().catch(() => undefined);
          source = undefined;
          if (u.searchParams.get("restart") === "1") {
            const again = await retry("restarting the event source", () => startSource(kc), 10, 1000);
            await again.ready;
            source = again;
          }
        }
        saveReplicas();
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(status));
        if (restartAfterMs !== undefined && crashed.length)
          setTimeout(() => {
            restartFunctions(crashed.map((f) => f.name)).catch((err: unknown) =>
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
