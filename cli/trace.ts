// `fastfence trace <node|incident>`: reads the pipeline's topics from a time (--since,
// default the last 24 h; no consumer group, nothing committed) and prints the incident's
// chain with each stage's latency, as -o text|json|yaml. Without --topic it reads every
// topic fastfence events can be on in either deployment: the catalog's per-stage topics
// (Kafka runner) and the Knative Kafka Broker's topics (knative-broker-*), whichever
// exist, and merges in fastfence's Kubernetes Events about the node and its incidents
// (phase changes, holds, operator commands; --no-api leaves them out). Progress goes to
// stderr during long reads. Read-only; undecodable records are
// counted and reported, not hidden.
import { BROKER_TOPIC, TOPICS, parseEvent } from "../events/catalog.ts";
import { decodeKafka } from "../events/codec.ts";
import { isKeepalive } from "../events/keepalive.ts";
import type { FfEvent } from "../events/envelope.ts";
import { createKafkaBus, type KafkaBus } from "../infra/bus/kafka-bus.ts";
import { kafkaSecurityFrom } from "../infra/bus/kafka-security.ts";
import { loadRuntimeConfig } from "../infra/config.ts";
import { createLogger } from "../infra/log.ts";
import { outputHelp, parseCommand, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import type { Kube } from "../infra/kube/client.ts";
import { connectKube, fastfenceNamespace, type KubeTargetFlags } from "./kube-target.ts";
import { render } from "./output.ts";
import { kubeTargetHelp, TRACE_ARGS } from "./specs.ts";
import { formatTrace, mergeRows, selectChain, traceRows } from "../events/trace-format.ts";
import { kubeEventRows } from "./trace-kube.ts";

export { TRACE_ARGS };

const USAGE = `Usage: fastfence trace <node|incident> [--brokers host:port,...] [--topic T]... [-o text|json|yaml]
  --brokers LIST          Kafka bootstrap servers (default $FASTFENCE_KAFKA_BROKERS)
  --topic T               read topic T (repeatable; default: every catalog topic, the shipped Broker
                          topic fastfence.events, any Knative Broker topic knative-broker-* and
                          $FASTFENCE_KAFKA_TOPIC, those that exist)
  --since WHEN            read records from this time on: a duration back from now (90s, 30m, 6h, 7d),
                          an RFC 3339 time, or "all" for the whole topics (default 24h)
  --no-api                leave out fastfence's Kubernetes Events (phase changes, holds, fence, pause,
                          resume, release-slot), read through the kubeconfig by default
${kubeTargetHelp(`where the NodeFences and their Events live
                          (default $FASTFENCE_NAMESPACE or fastfence-system, not the context's)`)}
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
  const sinceMs = parseSince(values.since ?? "24h", Date.now());
  const namespace = fastfenceNamespace("trace", values.namespace);
  const api = values["no-api"] ? undefined : kubeForEvents(values);
  // TLS/SASL from the FASTFENCE_KAFKA_* settings (the audit principal's credentials);
  // warnings go to stderr so -o json stays clean.
  const log = createLogger("trace", { destination: process.stderr });
  const runtime = loadRuntimeConfig(process.env);
  const security = kafkaSecurityFrom(runtime, log);
  const bus = createKafkaBus(
    { brokers, clientId: "fastfence-trace", security },
    runtime.FASTFENCE_KAFKA_CLIENT,
  );
  try {
    const topics = values.topic?.length ? values.topic : await defaultTopics(bus);
    if (!topics.length) {
      console.error("fastfence trace: no fastfence topic exists on these brokers (pass --topic)");
      return EXIT.failed;
    }
    const records = await bus.readAll(topics, {
      ...(sinceMs !== undefined ? { sinceMs } : {}),
      timeoutMs: 120_000,
      onProgress: (p) =>
        console.error(
          `reading ${topics.length} topics: ${p.records} records, ${p.partitionsLeft} of ${p.partitions} partitions left`,
        ),
    });
    const events: FfEvent[] = [];
    let bad = 0;
    for (const r of records) {
      if (isKeepalive(r)) continue; // transport records, not events
      try {
        events.push(parseEvent(decodeKafka(r)));
      } catch {
        bad++;
      }
    }
    const chain = selectChain(events, key);
    let rows = traceRows(chain);
    if (api) {
      const names = new Set([
        key,
        ...chain.map((e) => e.subject),
        ...chain.flatMap((e) => e.ffincident ?? []),
      ]);
      try {
        if (api instanceof UsageError) throw api;
        const extra = await kubeEventRows(api, {
          names: [...names],
          namespace,
          ...(sinceMs !== undefined ? { sinceMs } : {}),
        });
        rows = mergeRows(rows, extra);
      } catch (err) {
        console.error(`(Kubernetes Events left out: ${(err as Error).message}; --no-api to skip)`);
      }
    }
    console.log(render(args.output, rows, () => formatTrace(rows)));
    if (bad) console.error(`(${bad} undecodable records skipped; see topic ${TOPICS.deadLetter})`);
    return rows.length ? EXIT.ok : EXIT.failed;
  } finally {
    await bus.close();
  }
}

/**
 * The client for the Kubernetes Events. A cluster named with --kubeconfig or --context that
 * cannot be loaded is a usage error before anything is read; without them a kubeconfig
 * problem only leaves the Events out (the error is returned and reported with the trace).
 */
function kubeForEvents(flags: KubeTargetFlags): Kube | UsageError {
  try {
    return connectKube("trace", flags, { requestTimeoutMs: 10_000 });
  } catch (err) {
    if (flags.kubeconfig !== undefined || flags.context !== undefined || !(err instanceof UsageError))
      throw err;
    return err;
  }
}

/** The topics fastfence events can be on, in either deployment mode, that exist. */
async function defaultTopics(bus: KafkaBus): Promise<string[]> {
  const catalog = new Set<string>(Object.values(TOPICS).filter((t) => t !== TOPICS.deadLetter));
  catalog.add(BROKER_TOPIC);
  const single = process.env.FASTFENCE_KAFKA_TOPIC;
  if (single) catalog.add(single);
  return bus.topics((t) => catalog.has(t) || t.startsWith(KNATIVE_BROKER_TOPIC_PREFIX));
}

/** Topics of Knative Kafka Brokers: knative-broker-<namespace>-<broker>. */
export const KNATIVE_BROKER_TOPIC_PREFIX = "knative-broker-";

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** --since: a duration back from `now`, an RFC 3339 time, or "all" (undefined: from the beginning). */
export function parseSince(v: string, now: number): number | undefined {
  if (v === "all") return undefined;
  const d = /^(\d+)([smhd])$/.exec(v);
  if (d) return now - Number(d[1]) * UNIT_MS[d[2]!]!;
  const t = /^\d{4}-\d{2}-\d{2}T/.test(v) ? Date.parse(v) : Number.NaN;
  if (Number.isFinite(t)) return t;
  throw new UsageError(
    "trace",
    `--since "${v}": give a duration (90s, 30m, 6h, 7d), an RFC 3339 time or "all"`,
  );
}
