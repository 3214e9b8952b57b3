// A BMC's read-back of Off that the node itself proved false (issue 18, the look after the
// power-off): after the level read back Off, the node renewed its heartbeat with the
// incident's boot ID. The same for the watchdog level's proof (driver "watchdog"): after
// fence counted the node as reset by its watchdog, it renewed with that boot ID. The NodeFence records each such lie (status.bmcLied) and fence never
// trusts that level again for the incident. The CRD is generated from this schema. Pure:
// types and schemas only.
import { z } from "zod";

const Time = z.iso.datetime({ offset: true });

/** status.reason of an incident whose BMC read back Off while the node ran on. */
export const BMC_LIED_REASON = "BMCLied";
/**
 * status.reason of an incident released by the watchdog level (its armed watchdog surely
 * reset it) whose node then renewed its heartbeat with the incident's boot ID: the watchdog
 * did not reset it. Recorded as a lie of the watchdog level (driver "watchdog").
 */
export const WATCHDOG_DID_NOT_RESET_REASON = "WatchdogDidNotReset";
/** The reasons of the look after's alarm: the proof the release relied on was false. */
export const LIED_REASONS: readonly string[] = [BMC_LIED_REASON, WATCHDOG_DID_NOT_RESET_REASON];

export const BmcLieSchema = z.object({
  /** Index into the node's fencing levels (0 = first) of the level that read back Off. */
  level: z.int().min(0),
  driver: z.enum(["redfish", "ipmi", "fence-agent", "watchdog"]),
  /** Fencing round of the lying attempt. */
  round: z.int().min(1),
  /** When that level read back Off. */
  readBackAt: Time,
  /** The heartbeat renewal (node's clock) that proved it false. */
  renewTime: Time,
  /** When fence saw it (fence's clock). */
  seenAt: Time,
});
export type BmcLie = z.infer<typeof BmcLieSchema>;
