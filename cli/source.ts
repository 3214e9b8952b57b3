// `fastfence source`: runs one event-source (observer) replica until SIGINT/SIGTERM.
// Needs FASTFENCE_NODE_NAME (the node it runs on) and FASTFENCE_KAFKA_BROKERS; with
// --http PORT it serves health checks and Prometheus metrics.
import { KubeConfig } from "@kubernetes/client-node";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { Counter, Registry, collectDefaultMetrics } from "prom-client";
import { systemClock } from "../core/clock.ts";
import { FastfenceError } from "../core/errors.ts";
import { parsePort } from "./args.ts";
import { loadRuntimeConfig } from "../infra/config.ts";
import { KafkaJsBus } from "../infra/bus/kafkajs-bus.ts";
import { Kube } from "../infra/kube/client.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { createLogger } from "../infra/log.ts";
import { startEventSource } from "../source/event-source.ts";

const USAGE = `Usage: fastfence source [--node NAME] [--brokers host:port,...] [--http PORT]
  --node      the node this replica runs on (default $FASTFENCE_NODE_NAME)
  --brokers   Kafka bootstrap servers (default $FASTFENCE_KAFKA_BROKERS)
  --http      serve /health/readiness, /health/liveness and /metrics on PORT`;

export async function sourceCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      brokers: { type: "string" },
      node: { type: "string" },
      http: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return (console.log(USAGE), 0);
  const port = parsePort("--http", values.http);
  const config = loadRuntimeConfig({
    ...process.env,
    ...(values.brokers ? { FASTFENCE_KAFKA_BROKERS: values.brokers } : {}),
    ...(values.node ? { FASTFENCE_NODE_NAME: values.node } : {}),
  });
  if (!config.FASTFENCE_NODE_NAME)
    throw new FastfenceError(
      "FF_INVALID_CONFIG",
      "the event source needs its node: --node or FASTFENCE_NODE_NAME",
    );
  if (!config.FASTFENCE_KAFKA_BROKERS)
    throw new FastfenceError(
      "FF_INVALID_CONFIG",
      "the event source needs Kafka: --brokers or FASTFENCE_KAFKA_BROKERS",
    );
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const log = createLogger("event-source").child({ replica: config.FASTFENCE_REPLICA });
  const policy = await new PolicyReader(new Kube(kc), config.FASTFENCE_POLICY).get(Date.now());
  const bus = new KafkaJsBus({
    brokers: config.FASTFENCE_KAFKA_BROKERS,
    clientId: `fastfence-source-${config.FASTFENCE_REPLICA}`,
    log,
  });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "fastfence_process_" });
  const metrics = {
    probes: new Counter({
      name: "fastfence_probes_total",
      help: "Probes by result.",
      labelNames: ["result"],
      registers: [registry],
    }),
    published: new Counter({
      name: "fastfence_source_events_published_total",
      help: "Events published.",
      labelNames: ["type"],
      registers: [registry],
    }),
    publishErrors: new Counter({
      name: "fastfence_source_publish_errors_total",
      help: "Failed publishes.",
      registers: [registry],
    }),
  };
  let ready = false;
  const server =
    port === undefined
      ? undefined
      : createServer((req, res) => {
          if (req.url === "/health/liveness") return void res.writeHead(200).end("ok");
          if (req.url === "/health/readiness")
            return void res.writeHead(ready ? 200 : 503).end(ready ? "ok" : "starting");
          if (req.url === "/metrics")
            return void registry
              .metrics()
              .then((m) => res.writeHead(200, { "content-type": registry.contentType }).end(m));
          res.writeHead(404).end();
        }).listen(port);
  const src = await startEventSource({
    kubeConfig: kc,
    bus,
    clock: systemClock,
    log,
    metrics,
    config: {
      replica: config.FASTFENCE_REPLICA,
      node: config.FASTFENCE_NODE_NAME,
      probe: policy.probe,
      leaseStaleMs: policy.suspicion.leaseStaleMs,
      heartbeatNamespace: config.FASTFENCE_NAMESPACE,
      ...(config.FASTFENCE_KAFKA_TOPIC ? { topic: config.FASTFENCE_KAFKA_TOPIC } : {}),
    },
  });
  await src.ready;
  ready = true;
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  server?.close();
  await src.stop();
  await bus.close();
  return 0;
}
