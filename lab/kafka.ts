// Kafka for the lab: one KRaft broker+controller per simulated node, listening on the
// node's own address (10.77.0.x:9092, controller :9093). Writes each broker's
// server.properties and log4j config, formats its storage (on the host, before the node
// starts) and returns the java command the node launcher runs. Tuned so a dead broker's
// partitions move within ~2 s (brief stall source 1). Never binds outside the node's netns.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { jvmArgs, log4jConfig } from "../test/env/kafka.ts";

export const KAFKA_PORT = 9092;
export const KAFKA_CONTROLLER_PORT = 9093;

export interface LabBroker {
  id: number;
  ip: string;
  dir: string;
}

export function bootstrapOf(brokers: LabBroker[]): string {
  return brokers.map((b) => `${b.ip}:${KAFKA_PORT}`).join(",");
}

/** Write configs and format storage for every broker; returns the java argv per broker id. */
export async function prepareBrokers(brokers: LabBroker[], heap = "384m"): Promise<Map<number, string[]>> {
  const n = brokers.length;
  const rf = Math.min(3, n);
  const isr = rf >= 3 ? 2 : 1;
  // A base64url UUID like Kafka's own; never one starting with "-", which the storage
  // tool's argument parser would take for an option.
  let clusterId = "";
  while (!clusterId || clusterId.startsWith("-"))
    clusterId = Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString("base64url");
  const voters = brokers
    .slice(0, Math.min(3, n))
    .map((b) => `${b.id}@${b.ip}:${KAFKA_CONTROLLER_PORT}`)
    .join(",");
  const cmds = new Map<number, string[]>();
  await Promise.all(
    brokers.map(async (b) => {
      mkdirSync(b.dir, { recursive: true });
      const voter = b.id <= 3;
      const props: Record<string, string | number | boolean> = {
        "process.roles": voter ? "broker,controller" : "broker",
        "node.id": b.id,
        "controller.quorum.voters": voters,
        listeners: voter
          ? `PLAINTEXT://${b.ip}:${KAFKA_PORT},CONTROLLER://${b.ip}:${KAFKA_CONTROLLER_PORT}`
          : `PLAINTEXT://${b.ip}:${KAFKA_PORT}`,
        "advertised.listeners": `PLAINTEXT://${b.ip}:${KAFKA_PORT}`,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": join(b.dir, "data"),
        "num.partitions": 3,
        "default.replication.factor": rf,
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 6,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": false,
        // Stall source 1: a dead broker is fenced by the controller after a broker
        // session without heartbeats. Until then it stays in the ISR of every partition it
        // replicates, and a record is visible to consumers only once every in-sync replica
        // has it: the whole pipeline waits (Kafka's defaults 9000/2000 ms). Lower means a
        // broker starved of CPU for this long is fenced too (its leaderships move; no record
        // is lost); 700 ms is 5 missed heartbeats.
        "broker.session.timeout.ms": 700,
        "broker.heartbeat.interval.ms": 140,
        // ... and when the dead node was the active KRaft controller, the others notice
        // within fetch.timeout and elect a new one (pre-vote, then vote; a failed round
        // waits election.timeout to 2x it). Kafka's defaults 2000/1000 made the first crash
        // of every lab ~2 s slower. A follower's fetch is answered at the latest when the
        // leader appends its no-op record (metadata.max.idle.interval.ms, 200 ms here), so
        // 600 ms is three missed answers; pre-vote keeps one starved follower from
        // unseating a live controller.
        "controller.quorum.fetch.timeout.ms": 600,
        "controller.quorum.election.timeout.ms": 300,
        "controller.quorum.election.backoff.max.ms": 300,
        "metadata.max.idle.interval.ms": 200,
        "group.min.session.timeout.ms": 500,
        "group.consumer.min.session.timeout.ms": 500,
        "group.consumer.session.timeout.ms": 6000,
        "group.consumer.min.heartbeat.interval.ms": 100,
        "group.consumer.heartbeat.interval.ms": 1000,
        // A leader also drops a dead follower from a partition's ISR by itself, sooner than
        // the controller when the controller died too: once the partition got a record the
        // follower lacks and it has not caught up for replica.lag.time.max.ms (checked every
        // half of it; Kafka: 30 s). Lower drops live followers that are slow to start
        // fetching after leaderships moved (seen at 750 ms on 2 cores): partitions fall
        // below min.insync.replicas and refuse writes for a moment.
        "replica.lag.time.max.ms": 1000,
        "replica.fetch.wait.max.ms": 250,
        "replica.socket.timeout.ms": 3000,
        // A rebooted broker gets its preferred leaderships back soon (so each bench trial
        // crashes a node that leads partitions again).
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
      const propsPath = join(b.dir, "server.properties");
      writeFileSync(
        propsPath,
        Object.entries(props)
          .map(([k, v]) => `${k}=${v}`)
          .join("\n") + "\n",
      );
      const log4jPath = join(b.dir, "log4j2.yaml");
      writeFileSync(log4jPath, log4jConfig(join(b.dir, "kafka.log")));
      await new Promise<void>((res, rej) => {
        const c = spawn(
          "java",
          [
            ...jvmArgs("128m", log4jPath),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            clusterId,
            "-c",
            propsPath,
          ],
          {
            stdio: ["ignore", "pipe", "pipe"],
          },
        );
        let out = "";
        c.stdout.on("data", (d: Buffer) => (out += d.toString()));
        c.stderr.on("data", (d: Buffer) => (out += d.toString()));
        c.once("error", rej);
        c.once("exit", (code) =>
          code === 0 ? res() : rej(new Error(`kafka storage format failed: ${out.slice(-2000)}`)),
        );
      });
      cmds.set(b.id, ["java", ...jvmArgs(heap, log4jPath), "kafka.Kafka", propsPath]);
    }),
  );
  return cmds;
}
