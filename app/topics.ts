// The pipeline's Kafka topic layout for a number of brokers: what the lab, the harness and
// `fastfence run`'s callers create. Pure: it creates nothing itself.
import { TOPICS } from "../events/catalog.ts";
import type { TopicSpec } from "../infra/bus/bus.ts";

/** Topic layout for `brokers` brokers: `replicas` per partition (3 as topics.yaml), one per broker at
 *  most; min.insync.replicas 2 from two replicas on three brokers up, else 1. */
export function pipelineTopics(brokers: number, partitions = 3, replicas = 3): TopicSpec[] {
  const rf = Math.min(replicas, brokers);
  const minIsr = rf >= 2 && brokers >= 3 ? 2 : Math.max(1, rf - 1);
  return Object.values(TOPICS).map((topic) => ({
    topic,
    partitions,
    replicationFactor: rf,
    config: { "min.insync.replicas": String(minIsr) },
  }));
}
