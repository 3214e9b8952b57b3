// `fastfence run <function> --kafka | --http PORT`: hosts one pipeline function in this
// process until SIGINT/SIGTERM, then stops cleanly (finishes the in-flight event, leaves
// the consumer group). Configuration comes from FASTFENCE_* environment variables
// (infra/config.ts) and the kubeconfig (in-cluster, $KUBECONFIG or ~/.kube/config).
import { KubeConfig } from "@kubernetes/client-node";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { parsePort } from "./args.ts";
import { FUNCTIONS } from "../functions/registry.ts";
import { loadRuntimeConfig } from "../infra/config.ts";
import { hostFunction } from "../infra/runtime/host.ts";

function usage(): string {
  const fns = FUNCTIONS.map(
    (f) => `  ${f.name.padEnd(22)}${f.critical ? "[critical] " : ""}${f.description}`,
  ).join("\n");
  return `Usage: fastfence run <function> (--kafka | --http PORT) [--brokers host:port,...]

Functions:
${fns}

Options:
  --kafka          consume the function's topics as a Kafka consumer (local runner, lab)
  --http PORT      serve the Knative Functions HTTP contract on PORT (POST CloudEvents to /)
  --brokers LIST   Kafka bootstrap servers (default $FASTFENCE_KAFKA_BROKERS)
  --metrics PORT   with --kafka: serve /metrics and /health/* on PORT (--http serves them itself)

Environment: FASTFENCE_NAMESPACE, FASTFENCE_REPLICA, FASTFENCE_IDENTITY, FASTFENCE_TRUSTED_CONFIRMERS,
FASTFENCE_KUBE_ENDPOINTS, FASTFENCE_KUBE_TIMEOUT_MS, FASTFENCE_GROUP_MODE, ... (see docs/config-reference.md)`;
}

export async function runCommand(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      kafka: { type: "boolean" },
      http: { type: "string" },
      brokers: { type: "string" },
      metrics: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return (console.log(usage()), 0);
  const name = positionals[0];
  if (!name || (!values.kafka && values.http === undefined) || (values.kafka && values.http !== undefined)) {
    console.error(usage());
    return 2;
  }
  const port = parsePort("--http", values.http);
  const config = loadRuntimeConfig({
    ...process.env,
    ...(values.brokers ? { FASTFENCE_KAFKA_BROKERS: values.brokers } : {}),
  });
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const hosted = await hostFunction({
    name,
    mode: port === undefined ? { kafka: true } : { http: port },
    config,
    kubeConfig: kc,
  });
  const metricsPort = parsePort("--metrics", values.metrics);
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : createServer((req, res) => {
          if (req.url === "/health/readiness" || req.url === "/health/liveness")
            return void res.writeHead(200).end("ok");
          if (req.url === "/metrics")
            return void hosted.metrics.registry
              .metrics()
              .then((m) =>
                res.writeHead(200, { "content-type": hosted.metrics.registry.contentType }).end(m),
              );
          res.writeHead(404).end();
        }).listen(metricsPort);
  await hosted.ready;
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  metricsServer?.close();
  await hosted.stop();
  return 0;
}
