// confirm: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide), and the re-drive of an operator's request without an event (operator.pure.ts).
// The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { catalogStage } from "../stage-info.ts";
import { clusterNeeded, decide, locate, sameAs } from "./decide.pure.ts";
import { CONFIRM_RESYNC_PHASES, locateResync, resync, resyncWants } from "./operator.pure.ts";

export * from "./decide.pure.ts";
export * from "./operator.pure.ts";

export const stage: PureStage = {
  ...catalogStage(
    "confirm",
    "Corroborates suspicions (quorum of independent observers), applies the storm guard and etcd-quorum rule, writes the incident Confirmed and requests fencing.",
    true,
  ),
  locate,
  sameAs,
  clusterNeeded,
  decide,
  locateResync,
  resync,
  resyncPhases: CONFIRM_RESYNC_PHASES,
  resyncWants,
};
