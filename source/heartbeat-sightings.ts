// What this observer saw of the nodes' heartbeat Leases (fastfence-alive-<node>), on its
// OWN clock: when each Lease last changed (a new resourceVersion), and whether its watch
// is synced and live. Every miss observation carries the target's sighting time, signed,
// so confirm's heartbeat veto compares two times of one clock (this observer's) and never
// the suspect's clock. A first sighting (the initial list, a relist) is not a renewal:
// only a change of an already known Lease is.
//
// A sighting can be of a renewal the node wrote before it died, still on its way through
// the API server (the in-flight renewal). To tell, each renewal also gets `renewedBy`: the
// latest time, on this observer's clock, at which it can have been written. It is the
// Lease's renewTime (the node's clock) plus the smallest (seen - renewTime) of the node's
// recent renewals, which is the clock offset plus the smallest delivery delay, so it is
// never earlier than the real write. The node's own clock is trusted only to make its own
// renewals look older (only that node may write its Lease), never another node's. A
// renewal whose estimate lies more than `inFlightCapMs` before its sighting (a slow
// delivery, or the node's clock stepped back) gets no estimate: it counts as written when
// seen, as before. Pure: fed informer events and times; it never talks to the API server
// and never reads the clock.
import { heartbeatLeaseName } from "../core/decision.ts";

interface Seen {
  resourceVersion: string;
  /** The Lease's renewTime, epoch ms on the node's clock. */
  renewTime?: number;
  /** Epoch ms on this observer's clock; absent until a change was seen. */
  changedAt?: number;
  /** Observer's clock: the latest the last change's renewal can have been written (see the header). */
  renewedBy?: number;
  /** (seen - renewTime) of the recent renewals, newest last. */
  lags: number[];
}

/** How many recent renewals the smallest delivery lag is taken over (about 4 s at 250 ms). */
const LAG_SAMPLES = 16;

export class HeartbeatSightings {
  private readonly leases = new Map<string, Seen>();
  private listed = false;
  private lastEventAt: number | undefined;
  private staleMs: number;
  private inFlightCapMs: number;
  /**
   * `staleMs`: a watch with no event for this long counts as not synced (own Lease renews
   * far more often). `inFlightCapMs`: the most a renewal may be dated before its sighting
   * (renewedBy); 0 turns the estimate off.
   */
  constructor(staleMs: number, inFlightCapMs = 0) {
    this.staleMs = staleMs;
    this.inFlightCapMs = inFlightCapMs;
  }

  /** The policy's heartbeat interval changed: the same two bounds, for what is seen from now on. */
  setTiming(staleMs: number, inFlightCapMs: number): void {
    this.staleMs = staleMs;
    this.inFlightCapMs = inFlightCapMs;
  }

  /** A Lease was listed or watched (add or update) at `now`; `renewTime` is its spec.renewTime (epoch ms). */
  onLease(name: string, resourceVersion: string, now: number, renewTime?: number): void {
    this.lastEventAt = now;
    const prev = this.leases.get(name);
    const renew = renewTime !== undefined && Number.isFinite(renewTime) ? renewTime : undefined;
    if (!prev) {
      this.leases.set(name, {
        resourceVersion,
        ...(renew !== undefined ? { renewTime: renew } : {}),
        lags: [],
      });
      return;
    }
    if (prev.resourceVersion === resourceVersion) return;
    const next: Seen = { resourceVersion, changedAt: now, lags: prev.lags };
    // Only a renewal (renewTime moved forward) is dated; any other change counts as seen now.
    if (renew !== undefined && (prev.renewTime === undefined || renew > prev.renewTime)) {
      next.renewTime = renew;
      next.lags = [...prev.lags, now - renew].slice(-LAG_SAMPLES);
      const renewedBy = renew + Math.min(...next.lags);
      if (now - renewedBy <= this.inFlightCapMs) next.renewedBy = renewedBy;
    } else if (prev.renewTime !== undefined) next.renewTime = prev.renewTime;
    this.leases.set(name, next);
  }

  onDelete(name: string): void {
    this.leases.delete(name);
  }

  /** The informer listed (true) or stopped with an error (false). */
  setListed(listed: boolean, now: number): void {
    this.listed = listed;
    if (listed) this.lastEventAt = now;
  }

  /** Whether the watch is listed and delivered something within staleMs of `now`. */
  synced(now: number): boolean {
    return this.listed && this.lastEventAt !== undefined && now - this.lastEventAt <= this.staleMs;
  }

  /** When this observer last saw `node`'s heartbeat Lease renewed, epoch ms (own clock). */
  seenAt(node: string): number | undefined {
    return this.leases.get(heartbeatLeaseName(node))?.changedAt;
  }

  /** The latest that renewal can have been written, epoch ms (own clock); undefined: not dated. */
  renewedBy(node: string): number | undefined {
    return this.leases.get(heartbeatLeaseName(node))?.renewedBy;
  }
}
