// One power-off try at one fencing level as the NodeFence records it (status.attempts) and
// fence.failed carries it: the power states a BMC reads back, the attempt's results, and the
// last look that may have stopped it before its off command (issue 18). The CRD is generated
// from these schemas. Pure: types and schemas only.
import { z } from "zod";

const Time = z.iso.datetime({ offset: true });

export const POWER_STATES = ["On", "Off", "PoweringOn", "PoweringOff", "Unknown"] as const;
export type PowerState = (typeof POWER_STATES)[number];

export const ATTEMPT_RESULTS = [
  "off-confirmed",
  "still-on",
  "unreachable",
  "auth-failed",
  "timeout",
  "error",
  "abandoned",
  "watchdog-expired",
] as const;
export type AttemptResult = (typeof ATTEMPT_RESULTS)[number];

/** Why a last look before the off command abandoned a round (functions/fence/last-look.pure.ts). */
export const LAST_LOOK_REASONS = ["NodeResponding", "NodeRebooted"] as const;
export type LastLookReason = (typeof LAST_LOOK_REASONS)[number];

/**
 * What the fencing replica saw in its own last look just before an off command it then did
 * not send (attempt result "abandoned"): its own TCP probe, the node's heartbeat Lease and the
 * Node as read then.
 */
export const LastLookSchema = z.object({
  reason: z.enum(LAST_LOOK_REASONS),
  /** The fencing replica's own TCP probe of the node's probe address ("none": no address known). */
  probe: z.enum(["answered", "missed", "none"]),
  /** The heartbeat Lease: renewed since the round started or after the suspicion, silent, or not read in time. */
  heartbeat: z.enum(["renewed", "silent", "unread"]),
  /** The Node's Ready condition and boot ID as read in the look (absent: not read in time). */
  ready: z.enum(["True", "False", "Unknown"]).optional(),
  bootId: z.string().optional(),
  /** The node is back: same boot ID, heartbeating and Ready (the incident is closed). */
  back: z.boolean(),
});
export type LastLook = z.infer<typeof LastLookSchema>;

/** The drivers an attempt can record: a BMC protocol, or the watchdog level (no BMC). */
export const ATTEMPT_DRIVERS = ["redfish", "ipmi", "fence-agent", "watchdog"] as const;

/**
 * Result "watchdog-expired": S1's second proof (functions/fence/watchdog-level.pure.ts). The
 * node's own report (armed, its timeout, its boot) and how long the fencing replica watched
 * it quiet, on its own monotonic clock, against what that must exceed.
 */
export const WatchdogProofSchema = z.object({
  /** The node's watchdog timeout, as its agent reported it on its heartbeat Lease, ms. */
  timeoutMs: z.int().min(0),
  /** The agents' pet grace after their last acknowledged heartbeat renewal, ms. */
  renewGraceMs: z.int().min(0),
  /** The level's safety margin (clock-rate drift, the reset's own latency), ms. */
  marginMs: z.int().min(0),
  /** How long the fencing replica had watched, synced, without a renewal or a vouch, ms. */
  quietMs: z.int().min(0),
  /** The boot the armed report was of (the incident's). */
  bootId: z.string().min(1),
});
export type WatchdogProof = z.infer<typeof WatchdogProofSchema>;

/** One power-off try at one level, with what was read back afterwards (S1). */
export const AttemptSchema = z.object({
  round: z.int().min(1),
  /** Index into the node's fencing levels (0 = first). */
  level: z.int().min(0),
  driver: z.enum(ATTEMPT_DRIVERS),
  /** Who drove it (lease holder identity). */
  by: z.string().min(1),
  startedAt: Time,
  /** When the off command was acknowledged by the BMC (absent if it never was). */
  commandAt: Time.optional(),
  finishedAt: Time,
  result: z.enum(ATTEMPT_RESULTS),
  /** Power state read back from the BMC after the command. */
  readBackState: z.enum(POWER_STATES).optional(),
  readBackAt: Time.optional(),
  /** FastfenceError code on failure. */
  errorCode: z.string().optional(),
  message: z.string().optional(),
  /** Result "abandoned": the last look that stopped the round before the off command. */
  lastLook: LastLookSchema.optional(),
  /** Result "watchdog-expired": the watchdog proof (driver "watchdog"). */
  watchdog: WatchdogProofSchema.optional(),
});
export type Attempt = z.infer<typeof AttemptSchema>;
