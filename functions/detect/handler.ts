// detect: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { CATALOG, consumedBy, emittedBy } from "../../events/catalog.ts";
import { decide, locate, screen } from "./decide.pure.ts";

export * from "./decide.pure.ts";

const consumes = consumedBy("detect");

export const stage: PureStage = {
  name: "detect",
  description:
    "Turns probe observations and node-condition changes into suspicions when they cross the threshold.",
  subscriptions: [...new Set(consumes.map((t) => CATALOG[t].topic))].map((topic) => ({
    topic,
    types: consumes.filter((t) => CATALOG[t].topic === topic),
  })),
  emits: emittedBy("detect"),
  critical: true,
  locate,
  screen,
  decide,
};
