// detect: the stage's pure half, as the runtimes see it — subscriptions and emitted types
// (from the event catalog), what to read for an event (locate) and the decision
// (decide). The adapter that reads the view and executes the actions lives with the
// runtimes; this module must never perform I/O.
import type { PureStage } from "../contract.ts";
import { catalogStage } from "../stage-info.ts";
import { decide, locate, screen } from "./decide.pure.ts";

export * from "./decide.pure.ts";

export const stage: PureStage = {
  ...catalogStage(
    "detect",
    "Turns probe observations and node-condition changes into suspicions when they cross the threshold.",
    true,
  ),
  locate,
  screen,
  decide,
};
