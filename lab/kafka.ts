// Kafka for the lab: one KRaft broker+controller per simulated node, listening on the
// node's own address (10.77.0.x:9092, controller :9093). Writes each broker's
// server.properties and log4j config, formats its storage (on the host, before the node
// starts) and returns the java command the node launcher runs. Secured like the product
// (harness/env/kafka-auth.ts): TLS + SCRAM-SHA-512 on :9092, mutual TLS between
// controllers, the standard authorizer; the users and ACLs are the manifests' KafkaUsers,
// their passwords written as Secret-like files under LAB_KAFKA_AUTH. Failover settings
// are the shipped cluster's plus the lab's overrides (lab/broker-settings.ts). Also reads
// the cluster's metadata: live brokers and partition leaders per broker. Never binds
// outside the node's netns.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { brokerFencings, fencingsText } from "./broker-fencings.ts";
import { LAB_RUN } from "./state.ts";
import { brokerSettingsMode, labBrokerSettings, type BrokerValue } from "./broker-settings.ts";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { kafkaUserName, type KafkaPrincipal } from "../events/kafka-acls.ts";
import type { KafkaSecurity } from "../infra/bus/kafka-security.ts";
import { kafkaSecurityFrom } from "../infra/bus/kafka-security.ts";
import { sleep } from "../harness/env/base.ts";
import { makeKafkaAuth, securityProtocolMap, writeCredentialFiles } from "../harness/env/kafka-auth.ts";
import {
  formatStorage,
  jvmArgs,
  log4jConfig,
  newClusterId,
  writeServerProperties,
} from "../harness/env/kafka-jvm.ts";

export const KAFKA_PORT = 9092;
export const KAFKA_CONTROLLER_PORT = 9093;
/**
 * The lab's Kafka credentials, laid out like Secret volumes: ca.crt, and <user>/password
 * for every KafkaUser of knative/base/kafka plus fastfence-admin.
 */
export const LAB_KAFKA_AUTH = join(LAB_RUN, "kafka-auth");

/** The FASTFENCE_KAFKA_* settings that make a replica connect as `principal` (the lab's files). */
export function labKafkaEnv(principal: KafkaPrincipal): Record<string, string> {
  const user = kafkaUserName(principal);
  return {
    FASTFENCE_KAFKA_CA_FILE: join(LAB_KAFKA_AUTH, "ca.crt"),
    FASTFENCE_KAFKA_USERNAME: user,
    FASTFENCE_KAFKA_PASSWORD_FILE: join(LAB_KAFKA_AUTH, user, "password"),
  };
}

/** TLS + SCRAM settings for a lab client connecting as `principal`, read from the lab's files. */
export function labKafkaSecurity(principal: KafkaPrincipal): KafkaSecurity {
  return kafkaSecurityFrom({ ...labKafkaEnv(principal), FASTFENCE_KAFKA_INSECURE: "false" });
}

export interface LabBroker {
  id: number;
  ip: string;
  dir: string;
}

export function bootstrapOf(brokers: LabBroker[]): string {
  return brokers.map((b) => `${b.ip}:${KAFKA_PORT}`).join(",");
}

/**
 * The lab's machinery, not failover behaviour, the same in every mode: topics created by
 * the agents with 3 partitions, few offsets partitions and threads (2 cores), and a rebooted
 * broker given its preferred leaderships back within 5 s (Kafka: 300 s), so each bench
 * trial crashes a node that leads partitions again. A unit test fails if one of these is
 * also a shipped or overridden setting (lab/broker-settings.ts).
 */
export const LAB_BROKER_MACHINERY: Readonly<Record<string, BrokerValue>> = {
  "num.partitions": 3,
  "offsets.topic.num.partitions": 6,
  "auto.create.topics.enable": false,
  "auto.leader.rebalance.enable": true,
  "leader.imbalance.check.interval.seconds": 5,
  "leader.imbalance.per.broker.percentage": 0,
  "num.network.threads": 2,
  "num.io.threads": 2,
  "num.recovery.threads.per.data.dir": 1,
  "background.threads": 2,
  "log.segment.bytes": 16 * 1024 * 1024,
  "log.cleaner.threads": 1,
  "log.cleaner.dedupe.buffer.size": 4 * 1024 * 1024,
};

/** The shape of the lab's cluster a broker's properties depend on. */
export interface BrokerShape {
  /** How many brokers. */
  n: number;
  /** controller.quorum.voters. */
  voters: string;
  /** TLS/SCRAM/authorizer properties (harness/env/kafka-auth.ts). */
  authProps: Record<string, string>;
  /** The failover settings (labBrokerSettings). */
  settings: Record<string, BrokerValue>;
}

/** One broker's server.properties: identity and listeners, machinery, then the failover settings. */
export function brokerProperties(
  b: Pick<LabBroker, "id" | "ip" | "dir">,
  x: BrokerShape,
): Record<string, BrokerValue> {
  const voter = b.id <= 3;
  const rf = Math.min(3, x.n);
  const isr = rf >= 3 ? 2 : 1;
  return {
    "process.roles": voter ? "broker,controller" : "broker",
    "node.id": b.id,
    "controller.quorum.voters": x.voters,
    listeners: voter
      ? `CLIENT://${b.ip}:${KAFKA_PORT},CONTROLLER://${b.ip}:${KAFKA_CONTROLLER_PORT}`
      : `CLIENT://${b.ip}:${KAFKA_PORT}`,
    "advertised.listeners": `CLIENT://${b.ip}:${KAFKA_PORT}`,
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": securityProtocolMap(),
    "inter.broker.listener.name": "CLIENT",
    ...x.authProps,
    "log.dirs": join(b.dir, "data"),
    ...LAB_BROKER_MACHINERY,
    "share.coordinator.state.topic.replication.factor": rf,
    "share.coordinator.state.topic.min.isr": isr,
    // Failover behaviour: the shipped cluster's own settings (knative/kafka-cluster), plus
    // the lab overrides unless FASTFENCE_LAB_BROKERS=shipped (lab/broker-settings.ts, each
    // with its reason; docs/lab.md "Broker settings").
    ...x.settings,
    // A lab smaller than three nodes cannot hold three replicas.
    ...(x.n < 3
      ? {
          "default.replication.factor": rf,
          "min.insync.replicas": isr,
          "offsets.topic.replication.factor": rf,
          "transaction.state.log.replication.factor": rf,
          "transaction.state.log.min.isr": isr,
        }
      : {}),
  };
}

/** Write configs and format storage for every broker; returns the java argv per broker id. */
export async function prepareBrokers(
  brokers: LabBroker[],
  settings: Record<string, BrokerValue> = labBrokerSettings(brokerSettingsMode()),
  heap = "384m",
): Promise<Map<number, string[]>> {
  const n = brokers.length;
  const clusterId = newClusterId();
  const voters = brokers
    .slice(0, Math.min(3, n))
    .map((b) => `${b.id}@${b.ip}:${KAFKA_CONTROLLER_PORT}`)
    .join(",");
  const cmds = new Map<number, string[]>();
  // One CA and one broker certificate naming every broker's address; SCRAM users added
  // at format time; ACLs are created by the node agents (as the admin) once brokers run.
  const auth = await makeKafkaAuth(
    join(LAB_RUN, "kafka-pki"),
    brokers.map((b) => b.ip),
  );
  writeCredentialFiles(auth, LAB_KAFKA_AUTH);
  await Promise.all(
    brokers.map(async (b) => {
      mkdirSync(b.dir, { recursive: true });
      const props = brokerProperties(b, { n, voters, authProps: auth.brokerProps, settings });
      const propsPath = join(b.dir, "server.properties");
      writeServerProperties(propsPath, props);
      const log4jPath = join(b.dir, "log4j2.yaml");
      writeFileSync(log4jPath, log4jConfig(join(b.dir, "kafka.log")));
      await formatStorage(clusterId, propsPath, log4jPath, "use", auth.formatArgs);
      cmds.set(b.id, ["java", ...jvmArgs(heap, log4jPath), "kafka.Kafka", propsPath]);
    }),
  );
  return cmds;
}

/** Brokers alive and partition leaders per broker id (pipeline topics). */
export async function kafkaMeta(
  brokers: string,
): Promise<{ brokers: number; leaders: Record<number, number> }> {
  const kafka = new Kafka({
    brokers: brokers.split(","),
    clientId: "lab-meta",
    logLevel: logLevel.NOTHING,
    ...labKafkaSecurity("admin"),
    connectionTimeout: 1000,
    requestTimeout: 2000,
    retry: { retries: 1 },
  });
  const admin = kafka.admin();
  await admin.connect();
  try {
    const c = await admin.describeCluster();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith("fastfence"));
    const leaders: Record<number, number> = {};
    if (topics.length) {
      const md = await admin.fetchTopicMetadata({ topics });
      for (const t of md.topics)
        for (const p of t.partitions) leaders[p.leader] = (leaders[p.leader] ?? 0) + 1;
    }
    return { brokers: c.brokers.length, leaders };
  } finally {
    await admin.disconnect();
  }
}

/** A lab node as its broker: node index i runs broker id i + 1, its files under dir. */
interface BrokerNode {
  name: string;
  index: number;
  dir: string;
}

/**
 * Steady state before anything is measured: brokers that started late lead nothing until
 * Kafka's leader rebalance (every 5 s here) hands them their preferred partitions back;
 * a crash before that would take down most leaders at once, which a running cluster
 * never has. Waits up to 30 s for every broker to lead at least its share minus one.
 */
export async function waitLeadersBalanced(
  brokers: string,
  nodes: BrokerNode[],
  log: (line: string) => void,
  timeoutMs = 30_000,
): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const { leaders } = await kafkaMeta(brokers).catch(() => ({ leaders: {} as Record<number, number> }));
    const counts = nodes.map((x) => leaders[x.index + 1] ?? 0);
    const total = counts.reduce((a, b) => a + b, 0);
    const share = Math.floor(total / nodes.length);
    const fenced = () =>
      `; brokers fenced on a session timeout so far: ${fencingsText(brokerFencings(nodes))}`;
    if (total > 0 && counts.every((c) => c >= share - 1)) {
      log(`partition leaders balanced (${counts.join("/")}) in ${Date.now() - t0} ms${fenced()}`);
      return;
    }
    if (Date.now() - t0 > timeoutMs) {
      log(
        `partition leaders still unbalanced after ${timeoutMs} ms (${counts.join("/")}); going on${fenced()}`,
      );
      return;
    }
    await sleep(1000);
  }
}

/**
 * The active KRaft controller's broker id, from the voters' quorum-state files (each voter
 * writes the leader it follows with that leader's epoch; a dead voter's file is stale, so
 * the highest epoch wins). Undefined when no voter names a leader. Reads files only.
 */
export function activeControllerId(brokerDirs: readonly string[]): number | undefined {
  let best: { id: number; epoch: number } | undefined;
  for (const dir of brokerDirs) {
    let q: { leaderId?: unknown; leaderEpoch?: unknown };
    try {
      q = JSON.parse(
        readFileSync(join(dir, "data", "__cluster_metadata-0", "quorum-state"), "utf8"),
      ) as typeof q;
    } catch {
      continue; // not a voter, not formatted yet, or mid-write
    }
    if (typeof q.leaderId !== "number" || q.leaderId < 0 || typeof q.leaderEpoch !== "number") continue;
    if (!best || q.leaderEpoch > best.epoch) best = { id: q.leaderId, epoch: q.leaderEpoch };
  }
  return best?.id;
}

/** A trial's victim and why: partition leaders it hosts, the most any node hosts, controller or not. */
export interface VictimChoice {
  name: string;
  leaders: number;
  mostLeaders: number;
  activeController: boolean;
}

/**
 * With `preferController`, the active KRaft controller's node (the choice records how many
 * leaders it hosts); without, the node hosting the most partition leaders among the others
 * (ties: first), so a bench's victim mix is exactly what it asked for: a trial is a
 * controller trial only when it asked for one (the leaders are balanced, so the busiest node
 * was the controller's in about one trial of three, by chance).
 */
export async function chooseVictim(
  brokers: string,
  nodes: BrokerNode[],
  brokerDirs: readonly string[],
  preferController: boolean,
): Promise<VictimChoice> {
  // The metadata read may meet a broker that just restarted (a refused connection, a
  // leadership still moving, most often with Kafka's 9 s broker session): ask again.
  let leaders: Record<number, number> = {};
  for (let attempt = 1; ; attempt++) {
    try {
      ({ leaders } = await kafkaMeta(brokers));
      break;
    } catch (err) {
      if (attempt >= 5) throw err;
      await sleep(1000);
    }
  }
  const led = (x: BrokerNode) => leaders[x.index + 1] ?? 0;
  const most = Math.max(0, ...nodes.map(led));
  const ctl = activeControllerId(brokerDirs);
  const ctlNode = nodes.find((x) => x.index + 1 === ctl);
  const others = nodes.filter((x) => x !== ctlNode);
  const busiest = Math.max(0, ...others.map(led));
  const pick = preferController && ctlNode ? ctlNode : (others.find((x) => led(x) === busiest) ?? nodes[0]!);
  return { name: pick.name, leaders: led(pick), mostLeaders: most, activeController: pick === ctlNode };
}
