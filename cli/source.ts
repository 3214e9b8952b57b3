// `fastfence source`: runs one event-source (observer) replica until SIGINT/SIGTERM.
// Needs FASTFENCE_NODE_NAME (the node it runs on) and FASTFENCE_KAFKA_BROKERS.
import { KubeConfig } from "@kubernetes/client-node";
import { parseArgs } from "node:util";
import { systemClock } from "../core/clock.ts";
import { FastfenceError } from "../core/errors.ts";
import { loadRuntimeConfig } from "../infra/config.ts";
import { KafkaJsBus } from "../infra/bus/kafkajs-bus.ts";
import { Kube } from "../infra/kube/client.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { createLogger } from "../infra/log.ts";
import { startEventSource } from "../source/event-source.ts";

export async function sourceCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { brokers: { type: "string" }, node: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    console.log(
      "Usage: fastfence source [--node NAME] [--brokers host:port,...]  (or FASTFENCE_NODE_NAME, FASTFENCE_KAFKA_BROKERS)",
    );
    return 0;
  }
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
  const src = await startEventSource({
    kubeConfig: kc,
    bus,
    clock: systemClock,
    log,
    config: {
      replica: config.FASTFENCE_REPLICA,
      node: config.FASTFENCE_NODE_NAME,
      probe: policy.probe,
      leaseStaleMs: policy.suspicion.leaseStaleMs,
    },
  });
  await src.ready;
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await src.stop();
  await bus.close();
  return 0;
}
