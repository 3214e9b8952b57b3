// recover: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide), and the end of a final FenceFailed incident an operator released
// (resync.pure.ts). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { catalogStage } from "../stage-info.ts";
import { decide, locate } from "./decide.pure.ts";
import { RECOVER_RESYNC_PHASES, locateResync, resync, resyncWants } from "./resync.pure.ts";

export * from "./decide.pure.ts";
export * from "./resync.pure.ts";

export const stage: PureStage = {
  ...catalogStage(
    "recover",
    "Ends incidents when the node returns with a new boot ID (removes the taint); powers fenced nodes back on if the policy says so.",
    false,
  ),
  locate,
  decide,
  locateResync,
  resync,
  resyncPhases: RECOVER_RESYNC_PHASES,
  resyncWants,
};
