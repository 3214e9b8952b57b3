// Child process of kafkajs-stop-frozen.test.ts: one kafkajs consumer (with fastfence's
// fixes applied, infra/bus/kafkajs-failover.ts) that stops itself at the moment kafkajs
// tears its fetchers down to rebuild them for a changed set of brokers. It runs in its own process because the bug it looks for starves the
// event loop of whatever process it is in. It reports on stdout, one JSON object a line:
// a tick every 100 ms with the process's CPU time, and the moments it joined, began stopping
// and finished stopping. It must never talk to anything but the brokers it is given.
import { createInterface } from "node:readline";
import { Kafka, logLevel } from "kafkajs";
import { applyKafkaJsFailoverFixes } from "../../infra/bus/kafkajs-failover.ts";
import type { KafkaSecurity } from "../../infra/bus/kafka-security.ts";

export interface StopChildConfig {
  /** Bootstrap brokers, never the one the test freezes (a frozen seed would stall metadata). */
  brokers: string[];
  security: KafkaSecurity;
  topic: string;
  groupId: string;
  requestTimeoutMs: number;
}

const cfg = JSON.parse(process.env.FASTFENCE_STOP_CHILD ?? "{}") as StopChildConfig;
const say = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

if (!applyKafkaJsFailoverFixes()) {
  say({ error: "kafkajs internals changed: failover fixes not applied" });
  process.exit(2);
}

setInterval(() => {
  const cpu = process.cpuUsage();
  say({ tick: Date.now(), cpuMs: (cpu.user + cpu.system) / 1000 });
}, 100);

let armed = false;
let stopping = false;
createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "arm") armed = true;
});

const kafka = new Kafka({
  clientId: "stop-child",
  brokers: cfg.brokers,
  connectionTimeout: 1000,
  requestTimeout: cfg.requestTimeoutMs,
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 8 },
  ...(cfg.security.ssl ? { ssl: cfg.security.ssl } : {}),
  ...(cfg.security.sasl ? { sasl: cfg.security.sasl } : {}),
  logLevel: logLevel.DEBUG,
  // kafkajs' fetch manager logs this when it tears its fetchers down, which it does (without
  // being asked to stop) only to rebuild them for a changed set of brokers, or after an error.
  logCreator: () => (entry) => {
    if (process.env.FASTFENCE_STOP_CHILD_DEBUG)
      process.stderr.write(`${Date.now()} ${entry.namespace} ${entry.log.message}\n`);
    if (!armed || stopping || entry.log.message !== "Stopping fetchers...") return;
    stopping = true;
    say({ stopping: Date.now() });
    void consumer.stop().then(
      () => say({ stopped: Date.now() }),
      (e: unknown) => say({ error: `stop failed: ${String(e)}` }),
    );
  },
});

const consumer = kafka.consumer({
  groupId: cfg.groupId,
  sessionTimeout: 6000,
  heartbeatInterval: 500,
  maxWaitTimeInMs: 500,
  metadataMaxAge: 500,
});
consumer.on(consumer.events.GROUP_JOIN, () => say({ joined: Date.now() }));
await consumer.connect();
await consumer.subscribe({ topics: [cfg.topic], fromBeginning: true });
await consumer.run({ eachMessage: async () => undefined });
