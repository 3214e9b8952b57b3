// remediate-workloads: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide; onReleased after the delete actions), and the re-drive of an overdue release
// without an event (resync.pure.ts). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { catalogStage } from "../stage-info.ts";
import { decide, locate } from "./decide.pure.ts";
import { RELEASE_RESYNC_PHASES, locateResync, resync } from "./resync.pure.ts";

export * from "./decide.pure.ts";
export * from "./resync.pure.ts";

export const stage: PureStage = {
  ...catalogStage(
    "remediate-workloads",
    "After a confirmed power-off: out-of-service taint, force-deletes the node's pods, VolumeAttachments and VM launcher pods.",
    true,
  ),
  locate,
  decide,
  locateResync,
  resync,
  resyncPhases: RELEASE_RESYNC_PHASES,
};
