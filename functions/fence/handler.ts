// fence: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide, which also takes the power-off result back), and the re-drive of a stalled
// incident without an event (resync.pure.ts). The stage executor that reads the
// view and executes the actions lives with the runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { catalogStage } from "../stage-info.ts";
import { decide, locate } from "./decide.pure.ts";
import { FENCE_RESYNC_PHASES, locateResync, resync, resyncWants } from "./resync.pure.ts";

export * from "./decide.pure.ts";
export * from "./resync.pure.ts";

export const stage: PureStage = {
  ...catalogStage(
    "fence",
    "Powers off a Confirmed incident's node through its fencing levels under a per-node Lease and records the read-back (S1, S3, S6).",
    true,
  ),
  locate,
  decide,
  locateResync,
  resync,
  resyncPhases: FENCE_RESYNC_PHASES,
  resyncWants,
};
