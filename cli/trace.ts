// `fastfence trace <node|incident>`: reads the pipeline's topics from the beginning
// (no consumer group, nothing committed) and prints the incident's chain with each
// stage's latency. Read-only; undecodable records are counted and reported, not hidden.
import { parseArgs } from "node:util";
import { FastfenceError } from "../core/errors.ts";
import { TOPICS, parseEvent } from "../events/catalog.ts";
import { decodeKafka } from "../events/codec.ts";
import type { FfEvent } from "../events/envelope.ts";
import { KafkaJsBus } from "../infra/bus/kafkajs-bus.ts";
import { formatTrace, selectChain, traceRows } from "./trace-format.ts";

const USAGE = `Usage: fastfence trace <node|incident> [--brokers host:port,...] [--json]
  --brokers   Kafka bootstrap servers (default $FASTFENCE_KAFKA_BROKERS)
  --topic T   read topic T (repeatable; default: the catalog topics, or $FASTFENCE_KAFKA_TOPIC
              when set, e.g. the Knative broker's topic)
  --json      print rows as JSON instead of a table`;

export async function traceCommand(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      brokers: { type: "string" },
      topic: { type: "string", multiple: true },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return (console.log(USAGE), 0);
  const key = positionals[0];
  if (!key) return (console.error(USAGE), 2);
  const brokers = values.brokers ?? process.env.FASTFENCE_KAFKA_BROKERS;
  if (!brokers)
    throw new FastfenceError(
      "FF_INVALID_CONFIG",
      "no Kafka brokers: pass --brokers or set FASTFENCE_KAFKA_BROKERS",
    );
  const bus = new KafkaJsBus({ brokers, clientId: "fastfence-trace" });
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
    console.log(values.json ? JSON.stringify(rows, null, 2) : formatTrace(rows));
    if (bad) console.error(`(${bad} undecodable records skipped; see topic ${TOPICS.deadLetter})`);
    return rows.length ? 0 : 1;
  } finally {
    await bus.close();
  }
}
