// A stage's name and events as the event catalog declares them (events/catalog.ts): which
// topics it subscribes to, for which types, and what it may emit — so a stage folder never
// restates the catalog; and a decide that dispatches on the event type to one handler per
// type, ignoring the rest with UnhandledEventType. Pure; never I/O.
import { ignored, type DecideInput, type Decision } from "../core/decision.ts";
import type { FfEvent } from "../events/envelope.ts";
import {
  CATALOG,
  consumedBy,
  emittedBy,
  type AnyFfEvent,
  type Component,
  type DataOf,
  type EventType,
} from "../events/catalog.ts";
import type { StageInfo } from "./contract.ts";

export function catalogStage(
  name: Component,
  description: string,
  critical: boolean,
): StageInfo & { name: Component } {
  const consumes = consumedBy(name);
  return {
    name,
    description,
    subscriptions: [...new Set(consumes.map((t) => CATALOG[t].topic))].map((topic) => ({
      topic,
      types: consumes.filter((t) => CATALOG[t].topic === topic),
    })),
    emits: emittedBy(name),
    critical,
  };
}

/** One decision per event type a stage handles, given the event's typed data. */
export type HandlersByType = {
  [T in EventType]?: (data: DataOf<T>, input: DecideInput<FfEvent>) => Decision;
};

/** A decide that runs the handler of the event's type; any other type is ignored. */
export function decideByType(
  stage: Component,
  handlers: HandlersByType,
): (input: DecideInput<FfEvent>) => Decision {
  return (input) => {
    const ev = input.event as AnyFfEvent;
    const handler = handlers[ev.type] as ((d: unknown, i: DecideInput<FfEvent>) => Decision) | undefined;
    return handler
      ? handler(ev.data, input)
      : ignored("UnhandledEventType", `${stage} does not handle ${ev.type}`);
  };
}
