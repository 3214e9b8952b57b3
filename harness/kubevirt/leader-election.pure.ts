// The VM controller stand-in's leader election, as a pure state machine with client-go's
// semantics (tools/leaderelection, read in its source): a candidate judges the Lease valid
// from when IT last saw the record change (observedTime) plus the record's
// leaseDurationSeconds — never from renewTime, so clocks need not agree; an empty
// holderIdentity is taken at once; candidates retry every retryPeriod stretched by a jitter
// of up to 1.2 × retryPeriod more; a leader that cannot renew within renewDeadline stops
// leading; a leader that stops on purpose releases (holder cleared, duration 1 s).
// Harness only, never the product. No I/O: leader-elector.ts reads and writes the Lease.

/** The Lease's spec as the election reads and writes it (times as ms since the epoch). */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTimeMs?: number;
  renewTimeMs?: number;
  leaseTransitions: number;
}

export interface ElectionConfig {
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** KubeVirt virt-controller's defaults (pkg/virt-controller/leaderelectionconfig/config.go). */
export const VIRT_CONTROLLER_DEFAULTS = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

/** client-go's JitterFactor: a candidate waits retryPeriod × (1 + r × 1.2), r in [0, 1). */
export const JITTER_FACTOR = 1.2;

export interface ElectionState {
  /** The record last seen and when it was first seen as it is (client-go's observedTime). */
  observed?: { record: LeaseRecord; atMs: number };
  leading: boolean;
  /** When the leader last wrote its record (the renew deadline counts from it). */
  renewedAtMs?: number;
}

export const initialState = (): ElectionState => ({ leading: false });

/** What a Lease read returned. */
export type LeaseRead =
  { kind: "absent" } | { kind: "present"; record: LeaseRecord; resourceVersion: string };

/** A write to make: create the Lease, or update it guarded by the read's resourceVersion. */
export type LeaseWrite =
  { kind: "create"; record: LeaseRecord } | { kind: "update"; record: LeaseRecord; resourceVersion: string };

export class ElectionConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ElectionConfigError";
  }
}

/** client-go's own checks (NewLeaderElector): renewDeadline < leaseDuration, retry × 1.2 < renewDeadline. */
export function checkConfig(c: ElectionConfig): void {
  if (!c.identity) throw new ElectionConfigError("leader election: identity is empty");
  if (!(c.retryPeriodMs > 0)) throw new ElectionConfigError("leader election: retryPeriod must be > 0");
  if (!(c.leaseDurationMs > c.renewDeadlineMs))
    throw new ElectionConfigError("leader election: leaseDuration must be greater than renewDeadline");
  if (!(c.renewDeadlineMs > JITTER_FACTOR * c.retryPeriodMs))
    throw new ElectionConfigError("leader election: renewDeadline must be greater than retryPeriod × 1.2");
}

const sameRecord = (a: LeaseRecord, b: LeaseRecord) =>
  a.holderIdentity === b.holderIdentity &&
  a.leaseDurationSeconds === b.leaseDurationSeconds &&
  a.acquireTimeMs === b.acquireTimeMs &&
  a.renewTimeMs === b.renewTimeMs &&
  a.leaseTransitions === b.leaseTransitions;

/** The record as last observed; observedTime moves only when the record changed. */
export function observe(s: ElectionState, record: LeaseRecord, nowMs: number): ElectionState {
  if (s.observed && sameRecord(s.observed.record, record)) return s;
  return { ...s, observed: { record, atMs: nowMs } };
}

/** client-go's isLeaseValid: observedTime + the observed record's duration is after now. */
export function leaseValid(s: ElectionState, nowMs: number): boolean {
  if (!s.observed) return false;
  return s.observed.atMs + s.observed.record.leaseDurationSeconds * 1000 > nowMs;
}

/** client-go's IsLeader: the observed record names this identity. */
export const isHolder = (s: ElectionState, c: ElectionConfig) =>
  s.observed?.record.holderIdentity === c.identity;

/**
 * One tryAcquireOrRenew on a fresh read: the write to make, or none (held by another
 * candidate whose Lease this one still judges valid). The state returned has observed the read.
 */
export function attempt(
  s0: ElectionState,
  c: ElectionConfig,
  nowMs: number,
  read: LeaseRead,
): { state: ElectionState; write?: LeaseWrite } {
  const mine: LeaseRecord = {
    holderIdentity: c.identity,
    leaseDurationSeconds: Math.floor(c.leaseDurationMs / 1000),
    acquireTimeMs: nowMs,
    renewTimeMs: nowMs,
    leaseTransitions: 0,
  };
  if (read.kind === "absent") return { state: s0, write: { kind: "create", record: mine } };
  const s = observe(s0, read.record, nowMs);
  const old = read.record;
  const holder = isHolder(s, c);
  if (old.holderIdentity !== "" && leaseValid(s, nowMs) && !holder) return { state: s };
  const record: LeaseRecord = holder
    ? {
        ...mine,
        ...(old.acquireTimeMs !== undefined ? { acquireTimeMs: old.acquireTimeMs } : {}),
        leaseTransitions: old.leaseTransitions,
      }
    : { ...mine, leaseTransitions: old.leaseTransitions + 1 };
  return { state: s, write: { kind: "update", record, resourceVersion: read.resourceVersion } };
}

/** After the write of `attempt`: accepted, this replica leads and has observed its own record. */
export function written(s: ElectionState, record: LeaseRecord, ok: boolean, nowMs: number): ElectionState {
  if (!ok) return s;
  return { observed: { record, atMs: nowMs }, leading: true, renewedAtMs: nowMs };
}

/**
 * Whether a leader must stop leading now: client-go's renew loop starts a round retryPeriod
 * after the last successful renew and gives up when the round has not renewed within
 * renewDeadline.
 */
export function renewExpired(s: ElectionState, c: ElectionConfig, nowMs: number): boolean {
  if (!s.leading || s.renewedAtMs === undefined) return false;
  return nowMs >= s.renewedAtMs + c.retryPeriodMs + c.renewDeadlineMs;
}

/** Stop leading (renew deadline passed, or cancelled): the observed record stays. */
export const stopLeading = (s: ElectionState): ElectionState => ({
  ...(s.observed ? { observed: s.observed } : {}),
  leading: false,
});

/** How long to wait before the next attempt: a leader every retryPeriod, a candidate jittered. */
export function nextDelayMs(s: ElectionState, c: ElectionConfig, random: number): number {
  if (s.leading) return c.retryPeriodMs;
  const r = Math.min(Math.max(random, 0), 1);
  return c.retryPeriodMs * (1 + r * JITTER_FACTOR);
}

/**
 * client-go's release (ReleaseOnCancel): only while this identity holds the record it read,
 * a guarded update that clears the holder and sets leaseDurationSeconds 1, keeping the
 * transitions count; no write otherwise.
 */
export function release(
  s: ElectionState,
  c: ElectionConfig,
  nowMs: number,
  read: LeaseRead,
): LeaseWrite | undefined {
  if (read.kind === "absent" || !isHolder(s, c) || read.record.holderIdentity !== c.identity)
    return undefined;
  return {
    kind: "update",
    resourceVersion: read.resourceVersion,
    record: {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTimeMs: nowMs,
      renewTimeMs: nowMs,
      leaseTransitions: read.record.leaseTransitions,
    },
  };
}
