// What `fastfence fence` makes of an incident it finds: an existing one (add the request,
// leave it be, or refuse because it ended) and, with --wait, each poll of it (a progress
// line per phase change, and whether the wait is over and how). Pure: no I/O, no clock
// (elapsed time is passed in); it never decides anything about fencing itself, which is
// confirm's and fence's.
import {
  isFinalFenceFailed,
  isTerminal,
  statusOf,
  type NodeFence,
  type NodeFenceStatus,
  type Phase,
} from "../core/incident.ts";
import { closedAsBack } from "../core/superseded.ts";

/** What to do about an incident that already exists for the node's incarnation. */
export type ExistingVerdict =
  /** Not confirmed and nobody asked yet: add spec.operatorRequest (merge patch). */
  | { action: "patch" }
  /** Nothing to write: already asked for, being fenced, or fenced. */
  | { action: "none"; state: "already-requested" | "already-fencing" | "already-fenced"; message: string }
  /** The incident ended: nothing more is done for this incarnation. */
  | { action: "ended"; message: string };

const FENCING: readonly Phase[] = ["Confirmed", "Fencing", "FenceFailed"];
const FENCED: readonly Phase[] = ["FencedOff", "Released"];

const why = (st: NodeFenceStatus) =>
  `${st.reason ? ` (${st.reason}${st.message ? `: ${st.message}` : ""})` : st.message ? ` (${st.message})` : ""}`;

/** The verdict for an existing incident. Pure. */
export function existingVerdict(inc: NodeFence): ExistingVerdict {
  const name = inc.metadata.name;
  const node = inc.spec.nodeName;
  const st = statusOf(inc);
  const req = inc.spec.operatorRequest;
  const w = inc.spec.operatorWithdrawal;
  const asked = req
    ? `requested by ${req.by} at ${req.at}: ${req.reason}${w ? ` (withdrawn by ${w.by} at ${w.at}: ${w.reason})` : ""}`
    : undefined;
  if (isTerminal(st.phase))
    return {
      action: "ended",
      message:
        `incident ${name} for this incarnation of ${node} (boot ${inc.spec.bootId}) has ended: ${st.phase}${why(st)}. ` +
        (closedAsBack(st)
          ? `It ended with the node back, nothing powered off: a new failure of this boot, seen by the observers, replaces it. `
          : `fastfence does nothing more for it; the node has a new incarnation or was recovered. `) +
        `A new request needs a new incident: once the node reboots (new boot ID), or after deleting this one ` +
        `(kubectl -n ${inc.metadata.namespace ?? "NAMESPACE"} delete nodefence ${name}; it is the record of what happened)`,
    };
  if (FENCED.includes(st.phase))
    return {
      action: "none",
      state: "already-fenced",
      message: `${node} is already fenced: incident ${name} is ${st.phase}${st.powerOffConfirmedAt ? ` (power-off read back at ${st.powerOffConfirmedAt})` : ""}`,
    };
  if (FENCING.includes(st.phase))
    return {
      action: "none",
      state: "already-fencing",
      message: `${node} is already being fenced: incident ${name} is ${st.phase}${why(st)}, ${asked ?? "confirmed from the observers' evidence"}`,
    };
  if (req)
    return {
      action: "none",
      state: "already-requested",
      message: `fencing of ${node} was already ${asked}; incident ${name} is ${inc.status ? st.phase : "not taken up yet"}${why(st)}`,
    };
  return { action: "patch" };
}

/** Whether a wait is over, and how. */
export type WaitVerdict =
  | { done: false }
  | {
      done: true;
      ok: boolean;
      outcome: "released" | "blocked" | "failed" | "ended" | "deleted";
      message: string;
    };

/** The verdict on one poll of the incident (`undefined`: it is gone). Pure. */
export function waitVerdict(inc: NodeFence | undefined, name: string, maxRounds: number): WaitVerdict {
  if (!inc)
    return {
      done: true,
      ok: false,
      outcome: "deleted",
      message: `incident ${name} was deleted while waiting`,
    };
  const st = statusOf(inc);
  const node = inc.spec.nodeName;
  if (st.phase === "Released")
    return {
      done: true,
      ok: true,
      outcome: "released",
      message: `${node} is fenced (power-off read back at ${st.powerOffConfirmedAt ?? "?"}) and its workloads are released`,
    };
  if (isTerminal(st.phase)) {
    if (st.timestamps.fencedOff)
      return {
        done: true,
        ok: true,
        outcome: "released",
        message: `${node} was fenced (power-off read back at ${st.powerOffConfirmedAt ?? st.timestamps.fencedOff}); the incident has since ended: ${st.phase}${why(st)}`,
      };
    return {
      done: true,
      ok: false,
      outcome: "ended",
      message: `incident ${name} ended without fencing: ${st.phase}${why(st)}`,
    };
  }
  if (st.phase === "Blocked")
    return {
      done: true,
      ok: false,
      outcome: "blocked",
      message:
        `fencing of ${node} is blocked${why(st)}. The request stands: confirm takes it up again on each ` +
        `reconcile pass and confirms it once the hold ends`,
    };
  if (st.phase === "FenceFailed" && isFinalFenceFailed(st, maxRounds))
    return {
      done: true,
      ok: false,
      outcome: "failed",
      message:
        `fencing of ${node} failed: every round failed${why(st)}. The node was never read back Off: its workloads stay. ` +
        `Power it off by hand, then "fastfence release-slot ${name} --reason TEXT"`,
    };
  return { done: false };
}

/** What identifies a step worth a progress line: the phase, its reason, the round. Pure. */
export function stepKey(inc: NodeFence | undefined): string {
  if (!inc) return "(deleted)";
  const st = statusOf(inc);
  return `${inc.status ? st.phase : "-"}/${st.reason ?? ""}/${st.round}`;
}

/** One progress line: elapsed time, the incident, its phase, reason and message. Pure. */
export function progressLine(
  inc: NodeFence | undefined,
  name: string,
  elapsedMs: number,
  maxRounds: number,
): string {
  const t = `+${(elapsedMs / 1000).toFixed(1)}s ${name}:`;
  if (!inc) return `${t} deleted`;
  if (!inc.status)
    return `${t} Suspected (not taken up yet: confirm looks for requests every reconcile.intervalMs)`;
  const st = statusOf(inc);
  const retry =
    st.phase === "FenceFailed" && !isFinalFenceFailed(st, maxRounds)
      ? `; round ${st.round} of ${maxRounds} failed, next not before ${st.retryNotBefore ?? "now"}`
      : st.phase === "Fencing" && st.round > 0
        ? `; round ${st.round}`
        : "";
  return `${t} ${st.phase}${why(st)}${retry}`;
}
