// `fastfence source`: runs one event-source (observer) replica until SIGINT/SIGTERM.
// Needs FASTFENCE_NODE_NAME (the node it runs on) and FASTFENCE_KAFKA_BROKERS; with
// --http PORT it serves health checks and Prometheus metrics. Its output is its
// structured log (JSON lines), so -o takes json only. The command line is checked
// before anything heavy is loaded or started.
import { createServer } from "node:http";
import { defineCommand, outputHelp, parseCommand, parsePort, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { KUBE_TARGET_OPTIONS, kubeTargetHelp } from "./specs.ts";

export const SOURCE_ARGS = defineCommand({
  command: "source",
  options: {
    brokers: { type: "string" },
    node: { type: "string" },
    http: { type: "string" },
    ...KUBE_TARGET_OPTIONS,
  },
  positionals: 0,
  outputs: ["json"],
});

const USAGE = `Usage: fastfence source [--node NAME] [--brokers host:port,...] [--http PORT]
  --node NAME             the node this replica runs on (default $FASTFENCE_NODE_NAME)
  --brokers LIST          Kafka bootstrap servers (default $FASTFENCE_KAFKA_BROKERS)
  --http PORT             serve /health/readiness, /health/liveness and /metrics on PORT
${kubeTargetHelp()}
${outputHelp(SOURCE_ARGS, "the replica logs JSON lines (infra/log.ts)")}
  -h, --help              this help`;

export async function sourceCommand(argv: string[]): Promise<number> {
  const { values, help } = parseCommand(SOURCE_ARGS, argv);
  if (help) return (console.log(USAGE), EXIT.ok);
  const port = parsePort("source", "--http", values.http);
  const { loadRuntimeConfig } = await import("../infra/config.ts");
  const config = loadRuntimeConfig({
    ...process.env,
    ...(values.brokers ? { FASTFENCE_KAFKA_BROKERS: values.brokers } : {}),
    ...(values.node ? { FASTFENCE_NODE_NAME: values.node } : {}),
    ...(await import("./kube-target.ts")).kubeTargetEnv("source", values),
  });
  if (!config.FASTFENCE_NODE_NAME)
    throw new UsageError("source", "the event source needs its node: --node or FASTFENCE_NODE_NAME");
  if (!config.FASTFENCE_KAFKA_BROKERS)
    throw new UsageError("source", "the event source needs Kafka: --brokers or FASTFENCE_KAFKA_BROKERS");
  const { loadKubeConfig } = await import("./kube-target.ts");
  const { createSourceMetrics } = await import("../infra/metrics.ts");
  const { createLogger } = await import("../infra/log.ts");
  const { hostEventSource } = await import("../app/source.ts");
  const kc = loadKubeConfig("source", values);
  const log = createLogger("event-source");
  const { registry, ...metrics } = createSourceMetrics();
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
  const src = await hostEventSource({ config, kubeConfig: kc, log, metrics });
  await src.ready;
  ready = true;
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  server?.close();
  await src.stop();
  return EXIT.ok;
}
