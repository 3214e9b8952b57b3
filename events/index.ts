// The public face of the event catalog: what the `@fastfence/events` package
// (packages/events) exports to code outside this repository, such as an extension
// function (examples/incident-webhook). Event types, topics and the catalog entries; the
// zod schema of the envelope and of every event's data with their inferred types;
// `parseEvent`, the validation fastfence's own stages run on every delivery, and the
// InvalidInputError it throws; `envelope` to build well-formed events (tests, emitters).
// Re-exports only: no logic of its own, no I/O, and nothing from infra/ or functions/.
export {
  CATALOG,
  DEAD_LETTER,
  EVENT_TYPES,
  TOPICS,
  catalogEntry,
  consumedBy,
  emittedBy,
  isEventType,
  parseEvent,
  type AnyFfEvent,
  type CatalogEntry,
  type Component,
  type DataOf,
  type EventType,
  type Topic,
  type TypedEvent,
} from "./catalog.ts";
export * from "./schemas.ts";
export {
  INCIDENT_EXTENSION,
  childTraceparent,
  envelope,
  type FfEvent,
  type OutgoingEvent,
} from "./envelope.ts";
export { FastfenceError, InvalidInputError, type ErrorCode } from "../core/errors.ts";
