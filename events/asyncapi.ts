// Renders the event catalog as an AsyncAPI 3.0 document: one channel per Kafka topic, one
// message per event type (payload = the structured CloudEvent, JSON Schema generated
// from the zod schemas with z.toJSONSchema), and one send/receive operation per stage.
// `fastfence events catalog --format asyncapi` prints it. Pure: no I/O.
import { z } from "zod";
import { CATALOG, DEAD_LETTER, EVENT_TYPES, TOPICS, type Component, type EventType } from "./catalog.ts";
import { EnvelopeSchema } from "./schemas.ts";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function toSchema(schema: z.ZodType): Json {
  const js = z.toJSONSchema(schema, { target: "draft-7", unrepresentable: "any" }) as Record<string, Json>;
  delete js.$schema;
  return js;
}

function messageKey(type: EventType): string {
  const found = Object.entries(EVENT_TYPES).find(([, t]) => t === type);
  return found ? found[0] : type;
}

function channelKey(topic: string): string {
  const found = Object.entries(TOPICS).find(([, t]) => t === topic);
  return found ? found[0] : topic;
}

export function asyncApiDocument(version = "0.1.0"): Record<string, Json> {
  const channels: Record<string, Json> = {};
  const messages: Record<string, Json> = {};
  const operations: Record<string, Json> = {};

  for (const [key, topic] of Object.entries(TOPICS)) {
    channels[key] = {
      address: topic,
      messages: {},
      bindings: { kafka: { topic, bindingVersion: "0.5.0" } },
    };
  }

  for (const entry of Object.values(CATALOG)) {
    const mk = messageKey(entry.type);
    const ck = channelKey(entry.topic);
    const payload = EnvelopeSchema.extend({ type: z.literal(entry.type), data: entry.schema });
    messages[mk] = {
      name: entry.type,
      title: entry.type,
      summary: entry.description,
      contentType: "application/cloudevents+json",
      payload: toSchema(payload),
      bindings: {
        kafka: {
          key: {
            type: "string",
            description: `CloudEvent subject (node name), partition key: ${entry.partitionKey}`,
          },
          bindingVersion: "0.5.0",
        },
      },
      "x-emitted-by": [...entry.emittedBy],
      "x-consumed-by": [...entry.consumedBy],
    };
    const ch = channels[ck] as { messages: Record<string, Json> };
    ch.messages[mk] = { $ref: `#/components/messages/${mk}` };
    const msgRef = { $ref: `#/channels/${ck}/messages/${mk}` };
    const add = (component: Component, action: "send" | "receive") => {
      const opKey = `${component}.${action}.${mk}`;
      operations[opKey] = {
        action,
        channel: { $ref: `#/channels/${ck}` },
        messages: [msgRef],
        summary: `${component} ${action === "send" ? "emits" : "consumes"} ${entry.type}`,
      };
    };
    for (const c of entry.emittedBy) add(c, "send");
    for (const c of entry.consumedBy) add(c, "receive");
  }

  const dlKey = "deadLetter";
  messages[dlKey] = {
    name: "fastfence.dead-letter",
    title: "Dead-letter record",
    summary: DEAD_LETTER.schema.description ?? "dead-letter record",
    contentType: "application/json",
    payload: toSchema(DEAD_LETTER.schema),
  };
  (channels[channelKey(DEAD_LETTER.topic)] as { messages: Record<string, Json> }).messages[dlKey] = {
    $ref: `#/components/messages/${dlKey}`,
  };
  operations["any.send.deadLetter"] = {
    action: "send",
    channel: { $ref: `#/channels/${channelKey(DEAD_LETTER.topic)}` },
    messages: [{ $ref: `#/channels/${channelKey(DEAD_LETTER.topic)}/messages/${dlKey}` }],
    summary: "every consumer dead-letters what it cannot process (S5)",
  };

  return {
    asyncapi: "3.0.0",
    info: {
      title: "fastfence events",
      version,
      description:
        "CloudEvents 1.0 (structured JSON or Kafka binary mode) exchanged by the fastfence pipeline stages. " +
        "Every event carries subject = node name, source = /fastfence/<component>/<replica>, " +
        "the ffincident extension (incident correlation id) and a W3C traceparent.",
    },
    defaultContentType: "application/cloudevents+json",
    channels,
    operations,
    components: { messages },
  };
}
