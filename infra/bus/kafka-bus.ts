// Builds the process's Kafka bus on the client FASTFENCE_KAFKA_CLIENT names: "kafkajs"
// (default; the client the customer's design names, kafkajs-bus.ts) or "platformatic"
// (@platformatic/kafka, maintained, platformatic-bus.ts). Both implement the same Bus
// contract with the same settings; docs/design.md has the measured comparison. This
// module only chooses; it must never connect by itself.
import type { KafkaBus, KafkaBusConfig, KafkaClient } from "./kafka-config.ts";
import { kafkaClientFrom } from "./kafka-config.ts";
import { KafkaJsBus } from "./kafkajs-bus.ts";
import { PlatformaticBus } from "./platformatic-bus.ts";

export type { KafkaBus, KafkaBusConfig, KafkaClient } from "./kafka-config.ts";
export { KAFKA_CLIENTS, kafkaClientFrom } from "./kafka-config.ts";

/**
 * A bus on `client`, or on the one FASTFENCE_KAFKA_CLIENT names in the environment when
 * not given (an invalid value throws FF_INVALID_CONFIG).
 */
export function createKafkaBus(cfg: KafkaBusConfig, client?: KafkaClient): KafkaBus {
  const c = client ?? kafkaClientFrom(process.env.FASTFENCE_KAFKA_CLIENT);
  return c === "platformatic" ? new PlatformaticBus(cfg) : new KafkaJsBus(cfg);
}
