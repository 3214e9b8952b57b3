// `fastfence run <function> --kafka | --http PORT`: hosts one pipeline function in this
// process until SIGINT/SIGTERM, then stops cleanly (finishes the in-flight event, leaves
// the consumer group). Configuration comes from FASTFENCE_* environment variables
// (infra/config.ts) and the kubeconfig (in-cluster, $KUBECONFIG or ~/.kube/config).
// Its output is the stage's structured log (JSON lines), so -o takes json only. The
// command line is checked before anything heavy is loaded or started.
import { createServer } from "node:http";
import { defineCommand, outputHelp, parseCommand, parsePort, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { KUBE_TARGET_OPTIONS, kubeTargetHelp } from "./specs.ts";

export const RUN_ARGS = defineCommand({
  command: "run",
  options: {
    kafka: { type: "boolean" },
    http: { type: "string" },
    brokers: { type: "string" },
    metrics: { type: "string" },
    ...KUBE_TARGET_OPTIONS,
  },
  positionals: 1,
  outputs: ["json"],
});

async function usage(): Promise<string> {
  const { STAGES } = await import("../functions/registry.ts");
  const fns = STAGES.map(
    (f) => `  ${f.name.padEnd(22)}${f.critical ? "[critical] " : ""}${f.description}`,
  ).join("\n");
  return `Usage: fastfence run <function> (--kafka | --http PORT) [--brokers host:port,...]

Functions:
${fns}

Options:
  --kafka                 consume the function's catalog topics as a Kafka consumer (how the shipped
                          Services run the critical stages; the lab)
  --http PORT             serve the Knative Functions HTTP contract on PORT (POST CloudEvents to /);
                          each POST needs a bearer token the API server accepts for the function's
                          audience (FASTFENCE_HTTP_AUTH, FASTFENCE_HTTP_AUDIENCE; docs/deploy-knative.md)
  --brokers LIST          Kafka bootstrap servers (default $FASTFENCE_KAFKA_BROKERS)
  --metrics PORT          with --kafka: serve /metrics and /health/* on PORT; readiness answers 503
                          until the consumer has joined (--http serves them itself)
${kubeTargetHelp()}
${outputHelp(RUN_ARGS, "a running stage logs JSON lines (infra/log.ts)")}
  -h, --help              this help

Environment: FASTFENCE_NAMESPACE, FASTFENCE_REPLICA, FASTFENCE_IDENTITY, FASTFENCE_TRUSTED_CONFIRMERS,
FASTFENCE_KUBE_ENDPOINTS, FASTFENCE_KUBE_TIMEOUT_MS, FASTFENCE_GROUP_MODE, ... (see docs/config-reference.md)`;
}

export async function runCommand(argv: string[]): Promise<number> {
  const { values, positionals, help } = parseCommand(RUN_ARGS, argv);
  if (help) return (console.log(await usage()), EXIT.ok);
  const name = positionals[0];
  if (!name) throw new UsageError("run", "which function? fastfence run <function> (--help lists them)");
  if (Boolean(values.kafka) === (values.http !== undefined))
    throw new UsageError("run", "give exactly one of --kafka and --http PORT");
  const port = parsePort("run", "--http", values.http);
  const metricsPort = parsePort("run", "--metrics", values.metrics);
  const { findStage } = await import("../functions/registry.ts");
  if (!findStage(name))
    throw new UsageError("run", `unknown function "${name}" (fastfence run --help lists them)`);

  const { kubeTargetEnv, loadKubeConfig } = await import("./kube-target.ts");
  const { loadRuntimeConfig } = await import("../infra/config.ts");
  const { hostFunction } = await import("../app/host.ts");
  const config = loadRuntimeConfig({
    ...process.env,
    ...(values.brokers ? { FASTFENCE_KAFKA_BROKERS: values.brokers } : {}),
    ...kubeTargetEnv("run", values),
  });
  const kc = loadKubeConfig("run", values);
  const hosted = await hostFunction({
    name,
    mode: port === undefined ? { kafka: true } : { http: port },
    config,
    kubeConfig: kc,
  });
  let ready = false;
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : createServer((req, res) => {
          if (req.url === "/health/liveness") return void res.writeHead(200).end("ok");
          // Not ready until the consumer has joined, so a new replica does not count as one
          // that would see the next event.
          if (req.url === "/health/readiness")
            return void (ready ? res.writeHead(200).end("ok") : res.writeHead(503).end("joining"));
          if (req.url === "/metrics")
            return void hosted.metrics.registry
              .metrics()
              .then((m) =>
                res.writeHead(200, { "content-type": hosted.metrics.registry.contentType }).end(m),
              );
          res.writeHead(404).end();
        }).listen(metricsPort);
  await hosted.ready;
  ready = true;
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  metricsServer?.close();
  await hosted.stop();
  return EXIT.ok;
}
