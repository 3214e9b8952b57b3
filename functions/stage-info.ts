// A stage's name and events as the event catalog declares them (events/catalog.ts): which
// topics it subscribes to, for which types, and what it may emit — so a stage folder never
// restates the catalog. Pure; never I/O.
import { CATALOG, consumedBy, emittedBy, type Component } from "../events/catalog.ts";
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
