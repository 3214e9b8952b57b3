// recover: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { CATALOG, consumedBy, emittedBy } from "../../events/catalog.ts";
import { decide, locate, type RecoverDecideInput } from "./decide.pure.ts";

export * from "./decide.pure.ts";

const consumes = consumedBy("recover");

export const stage: PureStage<RecoverDecideInput> = {
  name: "recover",
  description:
    "Ends incidents when the node returns with a new boot ID (removes the taint); powers fenced nodes back on if the policy says so.",
  subscriptions: [...new Set(consumes.map((t) => CATALOG[t].topic))].map((topic) => ({
    topic,
    types: consumes.filter((t) => CATALOG[t].topic === topic),
  })),
  emits: emittedBy("recover"),
  critical: false,
  locate,
  decide,
};
