// Which Kafka clients the bus contract tests run on (bus-kafka, bus-kafka-freeze,
// kafka-runtime-dlq, kafka-runtime-flood): the default client (FASTFENCE_KAFKA_CLIENT's
// default, kafkajs) in `make test`, the others in `make test-kafka-clients`, which .ci/run
// runs after it in the same job — each client's contract runs once per CI run without
// doubling `make test`. FASTFENCE_TEST_KAFKA_CLIENTS=all|<client>[,<client>] chooses. It
// starts nothing; a bad value is an error naming it.
import { KAFKA_CLIENTS, kafkaClientFrom, type KafkaClient } from "../../infra/bus/kafka-bus.ts";
import { EnvError } from "./base.ts";

export function testedKafkaClients(env: Record<string, string | undefined> = process.env): KafkaClient[] {
  const raw = env.FASTFENCE_TEST_KAFKA_CLIENTS?.trim();
  if (!raw) return [kafkaClientFrom(undefined)];
  if (raw === "all") return [...KAFKA_CLIENTS];
  const out: KafkaClient[] = [];
  for (const c of raw.split(",").map((s) => s.trim())) {
    if (!(KAFKA_CLIENTS as readonly string[]).includes(c))
      throw new EnvError(
        `FASTFENCE_TEST_KAFKA_CLIENTS: unknown client "${c}" (all, or a list of ${KAFKA_CLIENTS.join(", ")})`,
      );
    out.push(c as KafkaClient);
  }
  return out;
}

/** The clients `make test` leaves to `make test-kafka-clients`. */
export const otherKafkaClients = (): KafkaClient[] =>
  KAFKA_CLIENTS.filter((c) => c !== kafkaClientFrom(undefined));
