// Per-target probe bookkeeping of one observer replica: turns raw probe results into
// observation events — one on every miss (with the streak's count and timings, and when
// this observer last saw the target's heartbeat Lease renewed) and one
// "restored" when a node answers again after misses; after a reboot (rearm), and after a
// time off the probe ring (a node fenced off comes back with a new boot), misses count
// only once the node has answered. Pure: takes results and times,
// returns the observations to publish; never probes, never reads the clock.
import { EVENT_TYPES } from "../events/catalog.ts";
import type { OutgoingEvent } from "../events/envelope.ts";
import type { NodeObserved } from "../events/schemas.ts";

export interface ProbeResult {
  target: string;
  /** The target's boot ID as this observer last saw it in the API (empty: none known). */
  targetBootId: string;
  ok: boolean;
  /** When the probe finished, epoch ms. */
  at: number;
  rttMs?: number;
  address?: string;
  port: number;
  /** When this observer last saw the target's heartbeat Lease renewed, epoch ms, own clock. */
  heartbeatSeenAt?: number;
  /** The latest the sighted renewal can have been written, epoch ms, own clock (HeartbeatSightings.renewedBy). */
  heartbeatRenewedBy?: number;
  /** Whether this observer's heartbeat watch was synced at `at` (absent: not known, counts as not synced). */
  heartbeatSynced?: boolean;
}

interface TargetState {
  /**
   * Misses count only once the target answered a probe in its current incarnation: after
   * a reboot (new boot ID) a node that is still starting up is not "missed".
   */
  armed: boolean;
  misses: number;
  firstMissAt?: number;
  lastOkAt?: number;
  lastRttMs?: number;
}

export class ProbeTracker {
  private readonly state = new Map<string, TargetState>();
  private readonly observer: { replica: string; node: string };
  constructor(observer: { replica: string; node: string }) {
    this.observer = observer;
  }

  /**
   * The target booted again (new boot ID): forget its miss streak and report no misses
   * until it has answered once, so a streak that began in the previous incarnation (while
   * it was off, or still starting) is never held against the new one.
   */
  rearm(target: string): void {
    this.state.set(target, { armed: false, misses: 0 });
  }

  /**
   * Targets no longer probed (the ring changed: a node fenced off leaves it until it is back)
   * lose their streak and stay unarmed: when one is probed again, its misses count only once
   * it has answered. A node fenced off reboots while off the ring, and its new boot can be in
   * the API before its probed port answers; forgetting it instead (a fresh target counts
   * from its first probe) held that start-up against the new boot (chaos seeds 282-284).
   * A target this replica never probed counts from its first probe, so a restarted observer
   * still sees a node that died before it started. A deleted node is kept unarmed too (one
   * re-registered under its name answers first); the map holds one entry per node name seen.
   */
  retain(targets: readonly string[]): void {
    for (const t of this.state.keys())
      if (!targets.includes(t)) this.state.set(t, { armed: false, misses: 0 });
  }

  onResult(r: ProbeResult): OutgoingEvent<NodeObserved> | undefined {
    const s = this.state.get(r.target) ?? { armed: true, misses: 0 };
    this.state.set(r.target, s);
    const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
    const base = {
      observer: this.observer,
      target: r.target,
      targetBootId: r.targetBootId,
      at: new Date(r.at).toISOString(),
      probe: { kind: "tcp" as const, port: r.port, ...(r.address ? { address: r.address } : {}) },
      ...(r.heartbeatSeenAt !== undefined ? { heartbeatSeenAt: iso(r.heartbeatSeenAt) } : {}),
      ...(r.heartbeatRenewedBy !== undefined ? { heartbeatRenewedBy: iso(r.heartbeatRenewedBy) } : {}),
      ...(r.heartbeatSynced !== undefined ? { heartbeatSynced: r.heartbeatSynced } : {}),
    };
    if (!s.armed) {
      if (!r.ok) return undefined;
      s.armed = true;
    }
    if (r.ok) {
      const hadMisses = s.misses > 0;
      const firstMissAt = s.firstMissAt;
      s.misses = 0;
      s.firstMissAt = undefined;
      s.lastOkAt = r.at;
      s.lastRttMs = r.rttMs;
      if (!hadMisses) return undefined;
      return {
        type: EVENT_TYPES.nodeObserved,
        subject: r.target,
        data: {
          ...base,
          result: "restored",
          consecutiveMisses: 0,
          ...(firstMissAt !== undefined ? { firstMissAt: iso(firstMissAt) } : {}),
          lastOkAt: iso(r.at),
          ...(r.rttMs !== undefined ? { rttMs: r.rttMs } : {}),
        } as NodeObserved,
      };
    }
    s.misses += 1;
    s.firstMissAt ??= r.at;
    return {
      type: EVENT_TYPES.nodeObserved,
      subject: r.target,
      data: {
        ...base,
        result: "missed",
        consecutiveMisses: s.misses,
        firstMissAt: iso(s.firstMissAt),
        ...(s.lastOkAt !== undefined ? { lastOkAt: iso(s.lastOkAt) } : {}),
      } as NodeObserved,
    };
  }
}
