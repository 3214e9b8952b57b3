// What the fencing replica's own, continuous watch of the heartbeat Leases
// (fastfence-alive-<node>) has seen, on its OWN monotonic clock: per node, the last time its
// Lease changed (a renewal: only that node's identity may write it), the last time a peer
// recorded a new vouch for it (a changed counter in the peer's fastfence.io/vouches), its
// fastfence.io/watchdog report, and since when the watch has been synced and live. The
// watchdog level's verdict (functions/fence/watchdog-level.pure.ts) reads it. A watch that
// went quiet (no event of any Lease for `staleMs`, while every node renews several times a
// second) or broke counts as not synced, and its synced time starts again when it is live:
// a stalled watch can never make a node look quiet. Pure: fed informer events and times; it
// never talks to the API server and never reads a clock.
import { VOUCH_ANNOTATION, WATCHDOG_ANNOTATION } from "../../core/watchdog.ts";
import type { WatchSeen } from "../../functions/fence/watchdog-level.pure.ts";

const PREFIX = "fastfence-alive-";

interface NodeSeen {
  resourceVersion: string;
  report?: string;
  renewedAt?: number;
  vouchedAt?: number;
  /** The counters this node's Lease carries for the nodes it vouches for. */
  vouches: Record<string, unknown>;
}

export class WatchdogSightings {
  private readonly nodes = new Map<string, NodeSeen>();
  private readonly vouchedAt = new Map<string, number>();
  private listed = false;
  private syncedSince: number | undefined;
  private lastEventAt: number | undefined;
  private readonly staleMs: number;

  /** `staleMs`: a watch without any Lease event for this long is not live (default 3000). */
  constructor(staleMs = 3_000) {
    this.staleMs = staleMs;
  }

  /** The initial list is done (true) or the watch broke (false), at monotonic `now`. */
  setListed(listed: boolean, now: number): void {
    this.listed = listed;
    this.syncedSince = listed ? now : undefined;
    if (listed) this.lastEventAt = now;
  }

  /** A heartbeat Lease was listed or watched (add or update) at monotonic `now`. */
  onLease(
    name: string,
    resourceVersion: string,
    annotations: Record<string, string> | undefined,
    now: number,
  ): void {
    if (!name.startsWith(PREFIX)) return;
    // A gap in the events: the watch may have missed renewals, so its quiet time restarts.
    if (this.listed && this.lastEventAt !== undefined && now - this.lastEventAt > this.staleMs)
      this.syncedSince = now;
    this.lastEventAt = now;
    const node = name.slice(PREFIX.length);
    const prev = this.nodes.get(node);
    const vouches = parseVouches(annotations?.[VOUCH_ANNOTATION]);
    const seen: NodeSeen = {
      resourceVersion,
      vouches,
      ...(annotations?.[WATCHDOG_ANNOTATION] !== undefined
        ? { report: annotations[WATCHDOG_ANNOTATION] }
        : {}),
      ...(prev?.renewedAt !== undefined ? { renewedAt: prev.renewedAt } : {}),
    };
    // The initial list is no renewal (the synced time covers it); any change after it is,
    // and so is a Lease created while watching.
    if (this.listed && prev?.resourceVersion !== resourceVersion) seen.renewedAt = now;
    if (this.listed)
      for (const [target, counter] of Object.entries(vouches))
        if (!prev || JSON.stringify(prev.vouches[target]) !== JSON.stringify(counter))
          this.vouchedAt.set(target, now);
    this.nodes.set(node, seen);
  }

  /** A heartbeat Lease was deleted: its report goes with it (no report, no watchdog level). */
  onDelete(name: string): void {
    if (name.startsWith(PREFIX)) this.nodes.delete(name.slice(PREFIX.length));
  }

  /** What the watch has seen of `node`, for the verdict at monotonic `now`. */
  seen(node: string, now: number): WatchSeen {
    const live = this.listed && this.lastEventAt !== undefined && now - this.lastEventAt <= this.staleMs;
    const n = this.nodes.get(node);
    return {
      report: n?.report,
      watchSyncedSince: live ? this.syncedSince : undefined,
      lastRenewalSeenAt: n?.renewedAt,
      lastVouchSeenAt: this.vouchedAt.get(node),
    };
  }
}

/** The vouches annotation: an object node → counter; anything else is no vouch. */
function parseVouches(value: string | undefined): Record<string, unknown> {
  if (value === undefined) return {};
  try {
    const v: unknown = JSON.parse(value);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
