// Real Apache Kafka brokers (KRaft combined mode, broker+controller in one JVM) for the
// integration tests: 1 broker, or 3 brokers forming a 3-voter controller quorum, on free
// loopback ports, tuned to notice a dead broker within ~2 s. Secured as in production
// (kafka-auth.ts): TLS + SCRAM-SHA-512 clients, the standard authorizer, and the users and
// ACLs of the manifests' KafkaUsers; clientSecurity(principal) connects as one of them.
// Brokers are restartable and keep their data dir and ports. Must never listen off
// loopback or outlive the test process.
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import type { KafkaPrincipal } from "../../events/kafka-acls.ts";
import type { KafkaSecurity } from "../../infra/bus/kafka-security.ts";
import { EnvError, sleep } from "./base.ts";
import {
  applyKafkaAcls,
  clientSecurityOf,
  clientEnvOf,
  makeKafkaAuth,
  securityProtocolMap,
  type KafkaAuth,
} from "./kafka-auth.ts";
import {
  formatStorage,
  jvmArgs,
  kafkaCdsPath,
  log4jConfig,
  newClusterId,
  writeServerProperties,
} from "./kafka-jvm.ts";
import { freePort } from "./ports.ts";
import { canConnect } from "./probes.ts";
import { ManagedProcess } from "./process.ts";
import { makeTempDir, removeTempDir } from "./registry.ts";
import { startAll } from "./scope.ts";
import { timedStart } from "./start-times.ts";

/** offsets.topic.num.partitions of the test brokers. */
const OFFSETS_PARTITIONS = 6;

/**
 * The __consumer_offsets partition whose leader coordinates `groupId` on the test brokers:
 * |Java hashCode(groupId)| mod offsets.topic.num.partitions, as Kafka's Utils.abs.
 */
export function coordinatorPartition(groupId: string): number {
  let h = 0;
  for (const ch of groupId) h = (Math.imul(31, h) + ch.charCodeAt(0)) | 0;
  return Math.abs(h) % OFFSETS_PARTITIONS;
}

export interface KafkaOptions {
  brokers?: 1 | 3;
  /** Extra server.properties lines (`key=value`), applied to every broker. */
  properties?: Record<string, string | number | boolean>;
  /** JVM heap (default 512m). */
  heap?: string;
  readyTimeoutMs?: number;
  /** Internal: write a CDS archive when the brokers exit (see buildKafkaCds). */
  cdsDumpTo?: string;
}

export interface KafkaBroker {
  id: number;
  port: number;
  controllerPort: number;
  dataDir: string;
  logPath: string;
  readonly running: boolean;
  /** Graceful shutdown (SIGTERM, SIGKILL after graceMs, default 15 s). */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL: a crashed broker. */
  kill(): Promise<void>;
  /** Start again on the same ports and data; waits until it accepts connections. */
  start(): Promise<void>;
  /** SIGSTOP / SIGCONT the JVM (a hung broker). */
  freeze(): void;
  thaw(): void;
}

/** A broker as a test file may know it: where it listens and logs, not its process. */
export type KafkaBrokerInfo = Pick<KafkaBroker, "id" | "port" | "controllerPort" | "dataDir" | "logPath">;

/**
 * What a test file uses of a Kafka cluster, its own (KafkaCluster) or the run's shared one
 * (shared-kafka.ts): addresses, broker logs and credentials, never the broker processes.
 */
export interface KafkaClusterView {
  /** "127.0.0.1:p1,127.0.0.1:p2,..." */
  bootstrap: string;
  brokers: readonly KafkaBrokerInfo[];
  clusterId: string;
  /** TLS + SCRAM settings for KafkaJsBus / new Kafka, as `principal` (admin: the super user). */
  clientSecurity(principal: KafkaPrincipal): KafkaSecurity;
  /** The same as FASTFENCE_KAFKA_* settings (CA and password files), as a pod's Secret mounts give them. */
  clientEnv(principal: KafkaPrincipal): Record<string, string>;
  /** An own cluster stops; the shared one is reset to its start state. */
  stop(): Promise<void>;
}

export interface KafkaCluster extends KafkaClusterView {
  brokers: KafkaBroker[];
  timings: Record<string, number>;
  /** Users, passwords and the CA (kafka-auth.ts). */
  auth: KafkaAuth;
}

/**
 * The ids of the brokers a metadata request lists (unfenced brokers), asked as `security`
 * (kafkajs: the bus's own client; kcat's SCRAM-SHA-512 is refused by Kafka 4.1 brokers).
 */
export async function brokerIds(
  bootstrap: string,
  security: KafkaSecurity,
  timeoutMs = 3000,
): Promise<number[]> {
  const admin = new Kafka({
    clientId: "fastfence-harness-probe",
    brokers: bootstrap.split(","),
    logLevel: logLevel.NOTHING,
    connectionTimeout: Math.min(1000, timeoutMs),
    requestTimeout: timeoutMs,
    retry: { retries: 0 },
    ...security,
  }).admin();
  try {
    await admin.connect();
    return (await admin.describeCluster()).brokers.map((b) => b.nodeId).sort((a, b) => a - b);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** True once the broker answers a metadata request that lists all `expected` brokers. */
async function metadataOk(bootstrap: string, expected: number, security: KafkaSecurity): Promise<boolean> {
  try {
    return (await brokerIds(bootstrap, security)).length >= expected;
  } catch {
    return false;
  }
}

/** Start a KRaft Kafka cluster of 1 or 3 combined broker/controller nodes. */
async function startKafkaNow(opts: KafkaOptions = {}): Promise<KafkaCluster> {
  const n = opts.brokers ?? 1;
  const heap = opts.heap ?? "512m";
  const timeout = opts.readyTimeoutMs ?? 90_000;
  const dir = makeTempDir("kafka");
  const t0 = Date.now();
  const timings: Record<string, number> = {};
  const clusterId = newClusterId();
  const ports: { id: number; port: number; controllerPort: number }[] = [];
  for (let i = 1; i <= n; i++)
    ports.push({ id: i, port: await freePort(), controllerPort: await freePort() });
  const voters = ports.map((p) => `${p.id}@127.0.0.1:${p.controllerPort}`).join(",");
  const bootstrap = ports.map((p) => `127.0.0.1:${p.port}`).join(",");

  try {
    return await startAll(async (scope) => {
      scope.add({ stop: async () => removeTempDir(dir) });
      const auth = await makeKafkaAuth(join(dir, "auth"), []);
      const admin = clientSecurityOf(auth, "admin");
      timings.pki = Date.now() - t0;
      const brokers: KafkaBroker[] = [];
      const formats: Promise<void>[] = [];
      for (const p of ports) {
        const bdir = join(dir, `broker-${p.id}`);
        const dataDir = join(bdir, "data");
        mkdirSync(bdir, { recursive: true });
        const props: Record<string, string | number | boolean> = {
          "process.roles": "broker,controller",
          "node.id": p.id,
          "controller.quorum.voters": voters,
          listeners: `CLIENT://127.0.0.1:${p.port},CONTROLLER://127.0.0.1:${p.controllerPort}`,
          "advertised.listeners": `CLIENT://127.0.0.1:${p.port}`,
          "controller.listener.names": "CONTROLLER",
          "listener.security.protocol.map": securityProtocolMap(),
          "inter.broker.listener.name": "CLIENT",
          ...auth.brokerProps,
          "log.dirs": dataDir,
          "num.partitions": n,
          "default.replication.factor": n,
          "min.insync.replicas": n === 3 ? 2 : 1,
          "offsets.topic.replication.factor": n,
          "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
          "transaction.state.log.replication.factor": n,
          "transaction.state.log.min.isr": n === 3 ? 2 : 1,
          "share.coordinator.state.topic.replication.factor": n,
          "share.coordinator.state.topic.min.isr": n === 3 ? 2 : 1,
          "group.initial.rebalance.delay.ms": 0,
          "auto.create.topics.enable": false,
          "delete.topic.enable": true,
          // Notice a dead broker fast (stall source 1 in the brief).
          "broker.session.timeout.ms": 2000,
          "broker.heartbeat.interval.ms": 500,
          "controller.quorum.fetch.timeout.ms": 2000,
          "controller.quorum.election.timeout.ms": 1000,
          "controller.quorum.election.backoff.max.ms": 1000,
          "controlled.shutdown.enable": true,
          "group.min.session.timeout.ms": 500,
          "group.consumer.min.session.timeout.ms": 500,
          "group.consumer.session.timeout.ms": 6000,
          "group.consumer.min.heartbeat.interval.ms": 100,
          "group.consumer.heartbeat.interval.ms": 1000,
          "replica.lag.time.max.ms": 5000,
          "replica.socket.timeout.ms": 3000,
          "num.network.threads": 2,
          "num.io.threads": 2,
          "num.recovery.threads.per.data.dir": 1,
          "background.threads": 2,
          "log.segment.bytes": 16 * 1024 * 1024,
          "log.cleaner.enable": true,
          "log.cleaner.threads": 1,
          "log.cleaner.dedupe.buffer.size": 4 * 1024 * 1024,
          ...opts.properties,
        };
        const propsPath = join(bdir, "server.properties");
        writeServerProperties(propsPath, props);
        const logPath = join(bdir, "kafka.log");
        const log4jPath = join(bdir, "log4j2.yaml");
        writeFileSync(log4jPath, log4jConfig(logPath));
        formats.push(
          formatStorage(clusterId, propsPath, log4jPath, opts.cdsDumpTo ? "none" : "use", auth.formatArgs),
        );

        let proc: ManagedProcess | undefined;
        const spawnBroker = (): ManagedProcess =>
          ManagedProcess.spawn({
            name: `kafka-${p.id}`,
            command: "java",
            dir: bdir,
            logFile: "kafka.stdout.log",
            args: [
              ...jvmArgs(heap, log4jPath, opts.cdsDumpTo ? { dumpTo: opts.cdsDumpTo } : "use"),
              "kafka.Kafka",
              propsPath,
            ],
          });
        const waitUp = async (m: ManagedProcess): Promise<void> => {
          await m.waitReady(() => canConnect(p.port), timeout, 100);
          // Then until it answers metadata requests itself.
          await m.waitReady(() => metadataOk(`127.0.0.1:${p.port}`, 1, admin), timeout, 200);
        };
        const broker: KafkaBroker = {
          id: p.id,
          port: p.port,
          controllerPort: p.controllerPort,
          dataDir,
          logPath,
          get running() {
            return proc?.running ?? false;
          },
          stop: async (graceMs = 15_000) => {
            await proc?.stop(graceMs);
          },
          kill: async () => {
            await proc?.kill();
          },
          start: async () => {
            if (proc?.running) return;
            proc = spawnBroker();
            await waitUp(proc);
          },
          freeze: () => proc?.signalGroup("SIGSTOP"),
          thaw: () => proc?.signalGroup("SIGCONT"),
        };
        brokers.push(broker);
        scope.add({ stop: () => broker.stop() });
      }
      await Promise.all(formats);
      timings.format = Date.now() - t0;
      await Promise.all(brokers.map((b) => b.start()));
      timings.listening = Date.now() - t0;
      const first = brokers[0];
      if (!first) throw new EnvError("no brokers");
      // Ready = metadata lists every broker (the quorum has a leader and all registered).
      const deadline = Date.now() + timeout;
      while (!(await metadataOk(bootstrap, n, admin))) {
        if (Date.now() > deadline) throw new EnvError(`kafka cluster not ready after ${timeout} ms`);
        await sleep(200);
      }
      timings.metadata = Date.now() - t0;
      // The manifests' KafkaUsers' ACLs (the users exist since format time).
      await applyKafkaAcls(bootstrap, admin, auth.users);
      timings.ready = Date.now() - t0;
      return {
        bootstrap,
        brokers,
        clusterId,
        timings,
        auth,
        clientSecurity: (principal) => clientSecurityOf(auth, principal),
        clientEnv: (principal) => clientEnvOf(auth, principal),
        stop: async () => {
          // Stop all brokers at once: stopping one by one makes the last ones wait on the
          // lost quorum during controlled shutdown.
          await Promise.all(brokers.map((b) => b.stop(n === 1 ? 15_000 : 2000)));
          await scope.stopAll();
        },
      };
    });
  } catch (err) {
    throw err instanceof EnvError ? err : new EnvError("kafka failed to start", { cause: err });
  }
}

/**
 * Build the broker CDS archive (kafkaCdsPath()) if it is missing: run one broker with
 * -XX:ArchiveClassesAtExit, stop it gracefully, move the archive into place. ~15 s, once
 * per Kafka classpath. Returns the archive path.
 */
export async function buildKafkaCds(): Promise<string> {
  const target = kafkaCdsPath();
  if (existsSync(target)) return target;
  mkdirSync(dirname(target), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  const cluster = await startKafka({ brokers: 1, cdsDumpTo: tmp });
  await cluster.brokers[0]?.stop(60_000); // the JVM writes the archive while exiting
  await cluster.stop();
  if (!existsSync(tmp)) throw new EnvError(`JVM did not write the CDS archive ${tmp}`);
  renameSync(tmp, target);
  return target;
}

/** Start a KRaft Kafka cluster of 1 or 3 combined broker/controller nodes; timed (start-times.ts). */
export function startKafka(opts: KafkaOptions = {}): Promise<KafkaCluster> {
  const n = opts.brokers ?? 1;
  return timedStart("kafka", `${n} broker${n === 1 ? "" : "s"}`, () => startKafkaNow(opts));
}
