// The event catalog: every event type fastfence knows, with its data schema, Kafka topic,
// partition key, and which stages emit and consume it; plus `parseEvent`, the one place
// an incoming event is validated (envelope, then data for its type). Invalid input throws
// InvalidInputError(FF_INVALID_EVENT) whose issues name each bad field; it never crashes
// and never returns a half-valid event. No I/O.
import { z } from "zod";
import { InvalidInputError } from "../core/errors.ts";
import type { FfEvent } from "./envelope.ts";
import {
  DeadLetterSchema,
  EnvelopeSchema,
  FenceFailedSchema,
  FenceObservedSchema,
  FenceRequestedSchema,
  IncidentBlockedSchema,
  NodeConditionSchema,
  NodeFencedSchema,
  NodeObservedSchema,
  NodeRecoveredSchema,
  NodeSuspectedSchema,
  WorkloadsReleasedSchema,
} from "./schemas.ts";

export const EVENT_TYPES = {
  nodeObserved: "io.fastfence.node.observed.v1",
  nodeCondition: "io.fastfence.node.condition.v1",
  nodeSuspected: "io.fastfence.node.suspected.v1",
  fenceRequested: "io.fastfence.fence.requested.v1",
  nodeFenced: "io.fastfence.node.fenced.v1",
  fenceFailed: "io.fastfence.fence.failed.v1",
  workloadsReleased: "io.fastfence.workloads.released.v1",
  nodeRecovered: "io.fastfence.node.recovered.v1",
  incidentBlocked: "io.fastfence.incident.blocked.v1",
  fenceObserved: "io.fastfence.fence.observed.v1",
} as const;
export type EventType = (typeof EVENT_TYPES)[keyof typeof EVENT_TYPES];

export const TOPICS = {
  observations: "fastfence.observations",
  suspicions: "fastfence.suspicions",
  fenceRequests: "fastfence.fence-requests",
  fenceResults: "fastfence.fence-results",
  releases: "fastfence.releases",
  recoveries: "fastfence.recoveries",
  deadLetter: "fastfence.dead-letter",
} as const;
export type Topic = (typeof TOPICS)[keyof typeof TOPICS];

/**
 * The Knative Kafka Broker's topic in the shipped deployment (knative/base/kafka/topics.yaml,
 * FASTFENCE_KAFKA_TOPIC in knative/base/runtime-config.yaml): every event type travels on it.
 */
export const BROKER_TOPIC = "fastfence.events";

export type Component = "event-source" | "detect" | "confirm" | "fence" | "remediate-workloads" | "recover";

export interface CatalogEntry<S extends z.ZodType = z.ZodType> {
  type: EventType;
  /** Schema of `data`. */
  schema: S;
  topic: Topic;
  /** Kafka message key: the CloudEvent `subject` (node name). */
  partitionKey: "subject";
  emittedBy: readonly Component[];
  consumedBy: readonly Component[];
  description: string;
  /** data field that must equal the envelope's subject. */
  subjectField: string;
  /**
   * Re-emitted while its cause lasts (every probe miss, every few misses): such events are
   * published with leader-only acks, so a dead follower broker never delays them; a lost
   * one is replaced by the next. One-shot events wait for every in-sync replica.
   */
  repeated?: boolean;
  /**
   * For events that several replicas emit from the same cause (every detect replica
   * turns the same observation into a suspicion): what makes two of them the same fact.
   * A consumer replica handles one event per fact (see factKey). Default: the event id.
   */
  sameFact?: (data: Record<string, unknown>) => string | undefined;
}

/** Kafka acks for an event type: leader-only for repeated events, all in-sync replicas otherwise. */
export function acksFor(type: string): "leader" | "all" {
  return isEventType(type) && CATALOG[type].repeated ? "leader" : "all";
}

function entry<S extends z.ZodType>(e: Omit<CatalogEntry<S>, "partitionKey">): CatalogEntry<S> {
  return { ...e, partitionKey: "subject" };
}

export const CATALOG = {
  [EVENT_TYPES.nodeObserved]: entry({
    type: EVENT_TYPES.nodeObserved,
    schema: NodeObservedSchema,
    topic: TOPICS.observations,
    emittedBy: ["event-source"],
    consumedBy: ["detect"],
    description:
      "A probe observation (missed / restored) of one node by one observer replica, signed with the key its node publishes on its heartbeat Lease.",
    subjectField: "target",
    repeated: true,
  }),
  [EVENT_TYPES.nodeCondition]: entry({
    type: EVENT_TYPES.nodeCondition,
    schema: NodeConditionSchema,
    topic: TOPICS.observations,
    emittedBy: ["event-source"],
    consumedBy: ["detect", "recover"],
    description:
      "A node Ready-condition, kubelet-Lease or boot-ID change from the informers (a hint: detect re-reads the API).",
    subjectField: "node",
    repeated: true,
  }),
  [EVENT_TYPES.nodeSuspected]: entry({
    type: EVENT_TYPES.nodeSuspected,
    schema: NodeSuspectedSchema,
    topic: TOPICS.suspicions,
    emittedBy: ["detect"],
    consumedBy: ["confirm"],
    description: "One observer's evidence crossed the suspicion threshold.",
    subjectField: "node",
    repeated: true,
    sameFact: (d) => {
      const e = d.evidence as Record<string, unknown> | undefined;
      const parts = [d.incident, e?.observer, e?.kind, e?.at];
      return parts.every((p) => typeof p === "string") ? parts.join("|") : undefined;
    },
  }),
  [EVENT_TYPES.fenceRequested]: entry({
    type: EVENT_TYPES.fenceRequested,
    schema: FenceRequestedSchema,
    topic: TOPICS.fenceRequests,
    emittedBy: ["confirm"],
    consumedBy: ["fence"],
    description:
      "An incident was written Confirmed; fence must re-read it (the event alone authorises nothing).",
    subjectField: "node",
  }),
  [EVENT_TYPES.incidentBlocked]: entry({
    type: EVENT_TYPES.incidentBlocked,
    schema: IncidentBlockedSchema,
    topic: TOPICS.fenceRequests,
    emittedBy: ["confirm"],
    consumedBy: [],
    description:
      "Fencing refused by the storm guard, the etcd-quorum rule or missing levels, or held for planned work.",
    subjectField: "node",
  }),
  [EVENT_TYPES.nodeFenced]: entry({
    type: EVENT_TYPES.nodeFenced,
    schema: NodeFencedSchema,
    topic: TOPICS.fenceResults,
    emittedBy: ["fence"],
    consumedBy: ["remediate-workloads"],
    description: "Power-off read back as Off.",
    subjectField: "node",
  }),
  [EVENT_TYPES.fenceObserved]: entry({
    type: EVENT_TYPES.fenceObserved,
    schema: FenceObservedSchema,
    topic: TOPICS.fenceResults,
    emittedBy: ["fence"],
    consumedBy: [],
    description:
      "Observe mode: fence would have powered the node off (which level); no power command was sent and the incident is Closed.",
    subjectField: "node",
  }),
  [EVENT_TYPES.fenceFailed]: entry({
    type: EVENT_TYPES.fenceFailed,
    schema: FenceFailedSchema,
    topic: TOPICS.fenceResults,
    emittedBy: ["fence"],
    consumedBy: ["fence"],
    description: "A fencing round failed; fence retries it after retryNotBefore unless final.",
    subjectField: "node",
  }),
  [EVENT_TYPES.workloadsReleased]: entry({
    type: EVENT_TYPES.workloadsReleased,
    schema: WorkloadsReleasedSchema,
    topic: TOPICS.releases,
    emittedBy: ["remediate-workloads"],
    consumedBy: ["recover"],
    description:
      "Out-of-service taint set; pods, VolumeAttachments and VM launcher pods of the node deleted.",
    subjectField: "node",
  }),
  [EVENT_TYPES.nodeRecovered]: entry({
    type: EVENT_TYPES.nodeRecovered,
    schema: NodeRecoveredSchema,
    topic: TOPICS.recoveries,
    emittedBy: ["recover"],
    consumedBy: [],
    description: "The incident ended: node back with a new boot ID, or closed unfenced.",
    subjectField: "node",
  }),
} as const satisfies Record<EventType, CatalogEntry>;

/** The dead-letter topic's record (not a CloudEvent type of its own). */
export const DEAD_LETTER = { topic: TOPICS.deadLetter, schema: DeadLetterSchema } as const;

export type DataOf<T extends EventType> = z.infer<(typeof CATALOG)[T]["schema"]>;

/** A validated event of one type. */
export type TypedEvent<T extends EventType> = FfEvent<DataOf<T>> & { type: T };
/** Any validated fastfence event (discriminated on `type`). */
export type AnyFfEvent = { [T in EventType]: TypedEvent<T> }[EventType];

export function isEventType(type: string): type is EventType {
  return Object.hasOwn(CATALOG, type);
}

export function catalogEntry(type: EventType): CatalogEntry {
  return CATALOG[type];
}

/**
 * The identity of the fact an (unvalidated) envelope reports: `type|sameFact(data)` for
 * types that define sameFact, else its id; undefined if it has neither. Copies of one
 * fact (hedged onto two partitions, or emitted by two replicas from the same cause)
 * share it. Only for skipping repeated work — never a validation. With `now`, an envelope
 * dated after it gets no key: a future-dated copy of a handled fact is decided in full
 * (and refused, FutureTimestamp), never skipped as a duplicate.
 */
export function factKey(raw: Record<string, unknown>, now?: number): string | undefined {
  const { type, data, id } = raw;
  if (now !== undefined && typeof raw.time === "string" && Date.parse(raw.time) > now) return undefined;
  if (typeof type === "string" && isEventType(type)) {
    const same = (CATALOG[type] as CatalogEntry).sameFact;
    const key =
      same && typeof data === "object" && data !== null && !Array.isArray(data)
        ? same(data as Record<string, unknown>)
        : undefined;
    if (key !== undefined) return `${type}|${key}`;
  }
  return typeof id === "string" ? id : undefined;
}

/** Event types a component consumes / emits, from the catalog. */
export function consumedBy(component: Component): EventType[] {
  return Object.values(CATALOG)
    .filter((e) => (e.consumedBy as readonly Component[]).includes(component))
    .map((e) => e.type);
}
export function emittedBy(component: Component): EventType[] {
  return Object.values(CATALOG)
    .filter((e) => (e.emittedBy as readonly Component[]).includes(component))
    .map((e) => e.type);
}

function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  const parts = [prefix, ...path.map((p) => (typeof p === "number" ? `[${p}]` : String(p)))].filter(Boolean);
  return parts.join(".").replace(/\.\[/g, "[") || "(root)";
}

function issuesOf(err: z.ZodError, prefix: string): string[] {
  return err.issues.map((i) => `${formatPath(prefix, i.path)}: ${i.message}`);
}

function decodeRaw(raw: unknown): unknown {
  if (raw instanceof Uint8Array) raw = new TextDecoder().decode(raw);
  if (typeof raw === "string") {
    try {
      return JSON.parse(raw);
    } catch {
      throw new InvalidInputError("FF_INVALID_EVENT", "invalid event", ["(root): not valid JSON"]);
    }
  }
  return raw;
}

/**
 * Validates a structured CloudEvent (object, JSON string or bytes) against the envelope
 * schema and the data schema of its type. Throws InvalidInputError(FF_INVALID_EVENT) with
 * one issue per bad field, e.g. "data.observer.node: must be a DNS-1123 subdomain".
 * A `data` given as a JSON string (binary mode decoders) is parsed first.
 */
export function parseEvent(raw: unknown): AnyFfEvent {
  const input = decodeRaw(raw);
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new InvalidInputError("FF_INVALID_EVENT", "invalid event", [
      "(root): expected a CloudEvent object",
    ]);
  }
  const env = EnvelopeSchema.safeParse(input);
  const issues: string[] = env.success ? [] : issuesOf(env.error, "");
  const type = (input as { type?: unknown }).type;
  if (typeof type === "string" && !isEventType(type) && !issues.some((i) => i.startsWith("type:"))) {
    issues.push(`type: unknown event type "${type}"`);
  }
  let data: unknown = (input as { data?: unknown }).data;
  if (typeof data === "string") {
    try {
      data = JSON.parse(data);
    } catch {
      issues.push("data: not valid JSON");
      data = undefined;
    }
  }
  let parsedData: unknown;
  if (typeof type === "string" && isEventType(type) && data !== undefined) {
    const entryFor = CATALOG[type];
    const d = entryFor.schema.safeParse(data);
    if (d.success) {
      parsedData = d.data;
      const subject = (input as { subject?: unknown }).subject;
      const value = (d.data as Record<string, unknown>)[entryFor.subjectField];
      if (typeof subject === "string" && value !== subject) {
        issues.push(
          `data.${entryFor.subjectField}: must equal subject "${subject}" (got "${String(value)}")`,
        );
      }
    } else issues.push(...issuesOf(d.error, "data"));
  } else if (data === undefined && !issues.some((i) => i.startsWith("data"))) {
    issues.push("data: required");
  }
  if (issues.length > 0 || !env.success) {
    throw new InvalidInputError(
      "FF_INVALID_EVENT",
      `invalid event${typeof type === "string" ? ` ${type}` : ""}`,
      issues,
    );
  }
  const { data: _ignored, ...attrs } = env.data;
  return { ...attrs, data: parsedData } as AnyFfEvent;
}
