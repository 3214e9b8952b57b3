// What the stage executor needs from the power side (implemented by infra/fence/power.ts):
// power a node off or on through its fencing levels, open a BMC session ahead of time, and
// clear holds other tools keep on a fenced host. It only states the contract; it never
// touches a BMC itself.
import type { Action } from "../../core/decision.ts";
import type { Attempt } from "../../core/incident.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";

/** Runs power actions for fence and recover (infra/fence/power.ts). */
export interface PowerExecutor {
  powerOff(
    a: Extract<Action, { kind: "powerOff" }>,
    policy: FencingPolicySpec,
    signal: AbortSignal,
  ): Promise<Attempt[]>;
  /**
   * Gets the first level's BMC ready (credentials read, session open) without changing
   * power, so the power-off that follows is one round trip. Best effort: never throws.
   */
  prepare?(a: Extract<Action, { kind: "powerOff" }>, signal: AbortSignal): Promise<void>;
  powerOn(
    a: Extract<Action, { kind: "powerOn" }>,
    policy: FencingPolicySpec,
    signal: AbortSignal,
  ): Promise<void>;
  /**
   * Clears whatever keeps the incident's host powered off outside fastfence (metal3's
   * reboot.metal3.io hold); called before an incident's status turns terminal. Returns
   * what was released, for the log.
   */
  releaseHolds?(incident: string, policy: FencingPolicySpec): Promise<string[]>;
}
