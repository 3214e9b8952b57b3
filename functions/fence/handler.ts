// fence: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide; onPowerOffResult after the powerOff action). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import type { FenceDecideInput } from "./decide.pure.ts";
import { CATALOG, consumedBy, emittedBy } from "../../events/catalog.ts";
import { decide, locate } from "./decide.pure.ts";

export * from "./decide.pure.ts";

const consumes = consumedBy("fence");

export const stage: PureStage<FenceDecideInput> = {
  name: "fence",
  description:
    "Powers off a Confirmed incident's node through its fencing levels under a per-node Lease and records the read-back (S1, S3, S6).",
  subscriptions: [...new Set(consumes.map((t) => CATALOG[t].topic))].map((topic) => ({
    topic,
    types: consumes.filter((t) => CATALOG[t].topic === topic),
  })),
  emits: emittedBy("fence"),
  critical: true,
  locate,
  decide,
};
