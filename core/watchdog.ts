// Watchdog fencing, the rules (issue 18; docs/design.md "Watchdog fencing"): when a node's
// agent may pet its watchdog, what it reports, and when another replica may take a node
// whose BMC levels all failed as surely reset by its own watchdog — S1's second proof,
// beside a read-back Off. Both sides count time on their own monotonic clock only; no
// wall-clock time of another machine is ever compared with this one's.
//
// The agent pets only while it can prove its node is on the healthy side: its own heartbeat
// renewal was acknowledged by the API server within `renewGraceMs`, or
// vouchQuorum(clusterSize) distinct peers (a strict majority with itself, never fewer than
// two: core/vouch.ts) have each *recorded through the API* a vouch for it within that grace. A node cut off from the API and from that majority stops petting
// and its watchdog resets it `timeoutMs` later. The deciding replica, in turn, counts the
// node as reset only after it has itself watched, continuously, for longer than
// renewGraceMs + timeoutMs + marginMs without seeing the node renew or any peer record a
// vouch for it, and only for a node whose agent reported its watchdog armed (a report only
// that node can write: its heartbeat Lease). Pure: no I/O, never reads a clock.

import { vouchQuorum } from "./vouch.ts";

/** The heartbeat Lease annotation carrying the agent's watchdog report (JSON, WatchdogReport). */
export const WATCHDOG_ANNOTATION = "fastfence.io/watchdog";
/**
 * On a peer's heartbeat Lease: the nodes it vouches for, a JSON object node → a counter the
 * peer bumps on every vouch it records. Deciders note each change on their own clock; the
 * value itself carries no time, so no other machine's clock is trusted.
 */
export const VOUCH_ANNOTATION = "fastfence.io/vouches";

/** What a node's agent says of its watchdog, on its own heartbeat Lease. */
export interface WatchdogReport {
  /** Whether the device is open and armed (petting may still stop: that is the point). */
  armed: boolean;
  /** The device's timeout, ms: after the last pet, the node resets within this. */
  timeoutMs: number;
  /** The boot the report belongs to: a report of an earlier boot proves nothing. */
  bootId: string;
  /** Why it is not armed (device missing, permission), for the condition and the metric. */
  reason?: string;
  /** The agent's pet grace after its last acknowledged renewal, ms, when it states it. */
  renewGraceMs?: number;
  /**
   * false: the FencingPolicy gives this node no watchdog level, so its agent does not arm
   * (source/watchdog-settings.ts watchdogArming): not armed by choice, not a fault. Absent
   * (older agents) or true: the policy asks for it.
   */
  requested?: boolean;
}

/**
 * The agents' default pet grace (FASTFENCE_WATCHDOG_RENEW_GRACE_MS), ms. An armed report that
 * states no grace (an agent from before reports stated it) counts with this, so fence never
 * assumes a shorter grace than such an agent may use with its default.
 */
export const AGENT_DEFAULT_RENEW_GRACE_MS = 5_000;

/**
 * The grace fence counts for a node: the longest any source states — the policy's, the
 * report's — and, for a report that states none, the agents' default too.
 */
export function effectiveRenewGraceMs(policyGraceMs: number, report: ParsedReport): number {
  if (!report.ok) return policyGraceMs;
  return Math.max(policyGraceMs, report.report.renewGraceMs ?? AGENT_DEFAULT_RENEW_GRACE_MS);
}

/** Bounds a report must meet to count: a timeout shorter than a pet round or absurdly long is refused. */
export const WATCHDOG_TIMEOUT_MS = { min: 1_000, max: 600_000 } as const;

export type ParsedReport = { ok: true; report: WatchdogReport } | { ok: false; reason: string };

/** Parses the annotation; a clear reason for anything that is not a well-formed report. */
export function parseWatchdogReport(value: string | undefined): ParsedReport {
  if (value === undefined) return { ok: false, reason: "no watchdog report on the heartbeat Lease" };
  let v: unknown;
  try {
    v = JSON.parse(value);
  } catch {
    return { ok: false, reason: `${WATCHDOG_ANNOTATION} is not JSON` };
  }
  if (typeof v !== "object" || v === null)
    return { ok: false, reason: `${WATCHDOG_ANNOTATION} is not an object` };
  const r = v as Record<string, unknown>;
  if (typeof r.armed !== "boolean") return { ok: false, reason: "armed: expected true or false" };
  if (typeof r.bootId !== "string" || r.bootId === "")
    return { ok: false, reason: "bootId: expected the node's boot ID" };
  const t = r.timeoutMs;
  if (
    typeof t !== "number" ||
    !Number.isInteger(t) ||
    t < WATCHDOG_TIMEOUT_MS.min ||
    t > WATCHDOG_TIMEOUT_MS.max
  )
    return {
      ok: false,
      reason: `timeoutMs: expected an integer from ${WATCHDOG_TIMEOUT_MS.min} to ${WATCHDOG_TIMEOUT_MS.max}`,
    };
  return {
    ok: true,
    report: {
      armed: r.armed,
      timeoutMs: t,
      bootId: r.bootId,
      ...(typeof r.reason === "string" ? { reason: r.reason.slice(0, 300) } : {}),
      ...(typeof r.renewGraceMs === "number" && Number.isInteger(r.renewGraceMs) && r.renewGraceMs >= 0
        ? { renewGraceMs: Math.min(r.renewGraceMs, WATCHDOG_TIMEOUT_MS.max) }
        : {}),
      ...(r.requested === false ? { requested: false } : {}),
    },
  };
}

export function formatWatchdogReport(r: WatchdogReport): string {
  return JSON.stringify(r);
}

/** The agent's view when it decides whether to pet, all times on its own monotonic clock, ms. */
export interface PetInput {
  now: number;
  /** When the API server last acknowledged this node's own heartbeat renewal. */
  lastRenewedAt: number | undefined;
  /** When each peer last answered that it had recorded a vouch for this node through the API. */
  vouchedAt: ReadonlyMap<string, number>;
  /** Nodes in the cluster, this one included (the majority is counted over them). */
  clusterSize: number;
  renewGraceMs: number;
  /** The agent is stopping on purpose (rolling update): it disarms instead of letting it fire. */
  stopping: boolean;
}

export type PetReason = "HeartbeatRenewed" | "VouchedByMajority" | "Disarming" | "Isolated";

export interface PetDecision {
  pet: boolean;
  /** Disarm (the magic close): only on a graceful stop, never because the node is isolated. */
  disarm: boolean;
  reason: PetReason;
  message: string;
}

/** Whether to pet now. A node that cannot prove it is on the healthy side stops petting. */
export function petDecision(i: PetInput): PetDecision {
  if (i.stopping)
    return { pet: false, disarm: true, reason: "Disarming", message: "agent stopping: watchdog disarmed" };
  if (i.lastRenewedAt !== undefined && i.now - i.lastRenewedAt <= i.renewGraceMs)
    return {
      pet: true,
      disarm: false,
      reason: "HeartbeatRenewed",
      message: `heartbeat renewed ${i.now - i.lastRenewedAt} ms ago (grace ${i.renewGraceMs} ms)`,
    };
  const fresh = [...i.vouchedAt.values()].filter((t) => i.now - t <= i.renewGraceMs).length;
  // A strict majority counting this node, and never fewer than two peers: one dishonest peer
  // of three is not enough (core/vouch.ts vouchQuorum).
  const need = vouchQuorum(i.clusterSize);
  if (fresh >= need)
    return {
      pet: true,
      disarm: false,
      reason: "VouchedByMajority",
      message: `heartbeat not renewed, but ${fresh} peers recorded a vouch (with this node ${fresh + 1} of ${i.clusterSize})`,
    };
  return {
    pet: false,
    disarm: false,
    reason: "Isolated",
    message: `heartbeat not renewed for ${i.lastRenewedAt === undefined ? "ever" : `${i.now - i.lastRenewedAt} ms`} and ${fresh} peers vouch (need ${need}): not petting`,
  };
}

/** What the deciding replica has watched, on its own monotonic clock, ms. */
export interface QuietInput {
  now: number;
  /** The node's report as read from its heartbeat Lease (parsed), if any. */
  report: ParsedReport;
  /** The incident's boot: the report must be of this boot. */
  bootId: string;
  /** Since when this replica's watch of the heartbeat Leases has been continuously synced. */
  watchSyncedSince: number | undefined;
  /** The last time this replica saw the node's heartbeat Lease renewed. */
  lastRenewalSeenAt: number | undefined;
  /** The last time this replica saw any peer record a vouch for the node. */
  lastVouchSeenAt: number | undefined;
  renewGraceMs: number;
  /** Added for clock-rate drift and scheduling of the reset itself. */
  marginMs: number;
}

export type QuietVerdict =
  | { reset: true; message: string }
  | { reset: false; code: "NoWatchdog" | "NotQuietLongEnough"; message: string; retryInMs?: number };

/** Whether the node has surely been reset by its watchdog, as this replica has watched it. */
export function watchdogVerdict(i: QuietInput): QuietVerdict {
  if (!i.report.ok) return { reset: false, code: "NoWatchdog", message: i.report.reason };
  const r = i.report.report;
  if (!r.armed)
    return {
      reset: false,
      code: "NoWatchdog",
      message: `watchdog not armed${r.reason ? `: ${r.reason}` : ""}`,
    };
  if (r.bootId !== i.bootId)
    return {
      reset: false,
      code: "NoWatchdog",
      message: `watchdog report of boot ${r.bootId}, incident of boot ${i.bootId}`,
    };
  if (i.watchSyncedSince === undefined)
    return { reset: false, code: "NotQuietLongEnough", message: "heartbeat watch not synced" };
  const quietSince = Math.max(
    i.watchSyncedSince,
    i.lastRenewalSeenAt ?? -Infinity,
    i.lastVouchSeenAt ?? -Infinity,
  );
  const need = i.renewGraceMs + r.timeoutMs + i.marginMs;
  const quiet = i.now - quietSince;
  if (quiet < need)
    return {
      reset: false,
      code: "NotQuietLongEnough",
      message: `quiet for ${quiet} ms of ${need} ms (grace ${i.renewGraceMs} + watchdog ${r.timeoutMs} + margin ${i.marginMs})`,
      retryInMs: need - quiet,
    };
  return {
    reset: true,
    message: `no renewal or vouch seen for ${quiet} ms ≥ grace ${i.renewGraceMs} + watchdog ${r.timeoutMs} + margin ${i.marginMs} ms: reset by its watchdog`,
  };
}

/** What fence's powerOff action carries for a node entry's watchdog level (core/policy-watchdog.ts). */
export interface WatchdogPlan {
  /** The level's index: after the BMC levels. */
  level: number;
  /** The incident's boot: the node's report must be of it. */
  bootId: string;
  renewGraceMs: number;
  marginMs: number;
}
