// When an ended incident gives way to a later failure of the same node incarnation. An
// incident's name is derived from its node and boot ID (core/incident.ts incidentName), so
// while it exists no other incident of that boot can; one closed as back (fence's last look
// found the node answering, nothing was powered off) must not keep a later death of that boot
// from being fenced. confirm replaces it (functions/confirm/decide.pure.ts). Pure; never
// replaces the record of a power-off, nor an incident whose node is still down.
import type { NodeFence, NodeFenceStatus } from "./incident.ts";

/**
 * Whether evidence observed at `atMs` (the observer's clock; detect's for API evidence) is of
 * a new failure of the boot whose incident `inc` was closed as back (`closedAsBack`): observed
 * later than the close (recover's clock) by more than `maxClockSkewMs`, so a late copy of a
 * suspicion of the failure that incident was about never replaces it. Not the streak's start:
 * a node dying just after the close keeps the streak begun then. confirm then replaces the
 * incident (same name, a new object; the old one's history stays in the event log and in its
 * Kubernetes Events); the new one must pass every check of confirm again, so a replacement in
 * error costs a record, never a power-off. Without it, a node found back (a long pause, a hung
 * NIC) could not be fenced again until it rebooted.
 */
export function supersededBy(inc: NodeFence | undefined, atMs: number, maxClockSkewMs: number): boolean {
  const st = inc?.status;
  if (!st || !closedAsBack(st)) return false;
  const closed = Date.parse(st.timestamps.closed ?? "");
  return Number.isFinite(closed) && Number.isFinite(atMs) && atMs > closed + maxClockSkewMs;
}

/**
 * Closed as back: its last round was abandoned by fence's last look (the node answered; the
 * attempts are fence's), with no power-off read back and nothing released. A later failure
 * of its boot replaces it. Not one closed as observed (no round) or on an operator's
 * release-slot after failed rounds: the node is still down, and replacing it would take the
 * slot again.
 */
export function closedAsBack(st: NodeFenceStatus): boolean {
  const last = st.attempts.at(-1);
  return st.phase === "Closed" && last?.result === "abandoned" && !st.timestamps.fencedOff && !st.released;
}
