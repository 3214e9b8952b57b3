// What this observer saw of the nodes' heartbeat Leases (fastfence-alive-<node>), on its
// OWN clock: when each Lease last changed (a new resourceVersion), and whether its watch
// is synced and live. Every miss observation carries the target's sighting time, signed,
// so confirm's heartbeat veto compares two times of one clock (this observer's) and never
// the suspect's clock. A first sighting (the initial list, a relist) is not a renewal:
// only a change of an already known Lease is. Pure: fed informer events and times; it
// never talks to the API server and never reads the clock.
import { heartbeatLeaseName } from "../core/decision.ts";

interface Seen {
  resourceVersion: string;
  /** Epoch ms on this observer's clock; absent until a change was seen. */
  changedAt?: number;
}

export class HeartbeatSightings {
  private readonly leases = new Map<string, Seen>();
  private listed = false;
  private lastEventAt: number | undefined;
  private readonly staleMs: number;
  /** `staleMs`: a watch with no event for this long counts as not synced (own Lease renews far more often). */
  constructor(staleMs: number) {
    this.staleMs = staleMs;
  }

  /** A Lease was listed or watched (add or update) at `now`. */
  onLease(name: string, resourceVersion: string, now: number): void {
    this.lastEventAt = now;
    const prev = this.leases.get(name);
    if (!prev) this.leases.set(name, { resourceVersion });
    else if (prev.resourceVersion !== resourceVersion)
      this.leases.set(name, { resourceVersion, changedAt: now });
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
}
