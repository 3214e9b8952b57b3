// confirm: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { CATALOG, consumedBy, emittedBy } from "../../events/catalog.ts";
import { clusterNeeded, decide, locate } from "./decide.pure.ts";

export * from "./decide.pure.ts";

const consumes = consumedBy("confirm");

export const stage: PureStage = {
  name: "confirm",
  description:
    "Corroborates suspicions (quorum of independent observers), applies the storm guard and etcd-quorum rule, writes the incident Confirmed and requests fencing.",
  subscriptions: [...new Set(consumes.map((t) => CATALOG[t].topic))].map((topic) => ({
    topic,
    types: consumes.filter((t) => CATALOG[t].topic === topic),
  })),
  emits: emittedBy("confirm"),
  critical: true,
  locate,
  clusterNeeded,
  decide,
};
