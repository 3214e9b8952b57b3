// `fastfence trace <node|incident>`: reads the pipeline's topics from the beginning
// (no consumer group, nothing committed) and prints the incident's chain with each
// stage's latency, as -o text|json|yaml. Read-only; undecodable records are counted and
// reported, not hidden.
import { TOPICS, parseEvent } from "../events/catalog.ts";
import { decodeKafka } from "../events/codec.ts";
import type { FfEvent } from "../events/envelope.ts";
import { KafkaJsBus } from "../infra/bus/kafkajs-bus.ts";
import { kafkaSecurityFrom } from "../infra/bus/kafka-security.ts";
import { loadRuntimeConfig } from "../infra/config.ts";
import { createLogger } from "../infra/log.ts";
import { defineCommand, outputHelp, parseCommand, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { render } from "./output.ts";
import { formatTrace, selectChain, traceRows } from "./trace-format.ts";

export const TRACE_ARGS = defineCommand({
  command: "trace",
  options: { brokers: { type: "string" }, topic: { type: "string", multiple: true } },
  positionals: 1,
  outputs: ["text", "json", "yaml"],
  legacyJson: true,
});

const USAGE = `Usage: fastfence trace <node|incident> [--brokers host:port,...] [--topic T]... [-o text|json|yaml]
  --brokers LIST          Kafka bootstrap servers (default $FASTFENCE_KAFKA_BROKERS)
  --topic T               read topic T (repeatable; default: the catalog topics, or $FASTFENCE_KAFKA_TOPIC
                          when set, e.g. the Knative broker's topic)
${outputHelp(TRACE_ARGS, "text is a timeline table; json and yaml a list of rows")}
  -h, --help              this help
  --json                  deprecated alias of -o json (removed in the next release)

Exit code 1 when no event about the node or incident was found.`;

export async function traceCommand(argv: string[]): Promise<number> {
  const args = parseCommand(TRACE_ARGS, argv);
  const { values, positionals } = args;
  if (args.help) return (console.log(USAGE), EXIT.ok);
  const key = positionals[0];
  if (!key) throw new UsageError("trace", "which node or incident? fastfence trace <node|incident>");
  const brokers = values.brokers ?? process.env.FASTFENCE_KAFKA_BROKERS;
  if (!brokers)
    throw new UsageError("trace", "no Kafka brokers: pass --brokers or set FASTFENCE_KAFKA_BROKERS");
  // TLS/SASL from the FASTFENCE_KAFKA_* settings (the audit principal's credentials);
  // warnings go to stderr so -o json stays clean.
  const log = createLogger("trace", { destination: process.stderr });
  const security = kafkaSecurityFrom(loadRuntimeConfig(process.env), log);
  const bus = new KafkaJsBus({ brokers, clientId: "fastfence-trace", security });
  try {
    const single = process.env.FASTFENCE_KAFKA_TOPIC;
    const topics = values.topic?.length
      ? values.topic
      : single
        ? [single]
        : Object.values(TOPICS).filter((t) => t !== TOPICS.deadLetter);
    const records = await bus.readAll(topics);
    const events: FfEvent[] = [];
    let bad = 0;
    for (const r of records) {
      try {
        events.push(parseEvent(decodeKafka(r)));
      } catch {
        bad++;
      }
    }
    const rows = traceRows(selectChain(events, key));
    console.log(render(args.output, rows, () => formatTrace(rows)));
    if (bad) console.error(`(${bad} undecodable records skipped; see topic ${TOPICS.deadLetter})`);
    return rows.length ? EXIT.ok : EXIT.failed;
  } finally {
    await bus.close();
  }
}
