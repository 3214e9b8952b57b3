// remediate-workloads: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide; onReleased after the delete actions). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { CATALOG, consumedBy, emittedBy } from "../../events/catalog.ts";
import { decide, locate } from "./decide.pure.ts";

export * from "./decide.pure.ts";

const consumes = consumedBy("remediate-workloads");

export const stage: PureStage = {
  name: "remediate-workloads",
  description:
    "After a confirmed power-off: out-of-service taint, force-deletes the node's pods, VolumeAttachments and VMIs.",
  subscriptions: [...new Set(consumes.map((t) => CATALOG[t].topic))].map((topic) => ({
    topic,
    types: consumes.filter((t) => CATALOG[t].topic === topic),
  })),
  emits: emittedBy("remediate-workloads"),
  critical: true,
  locate,
  decide,
};
