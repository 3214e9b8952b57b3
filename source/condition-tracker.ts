// Turns what the informers see (Node objects, kubelet Leases) into node.condition
// events: a Ready change, a boot-ID change (a new incarnation: the node rebooted), and
// a kubelet Lease that stopped being renewed. Pure: fed snapshots and `now`, returns the
// events to publish; never talks to the API server.
import { EVENT_TYPES } from "../events/catalog.ts";
import type { OutgoingEvent } from "../events/envelope.ts";
import type { NodeCondition } from "../events/schemas.ts";

export interface NodeSnapshot {
  name: string;
  bootId: string;
  ready: "True" | "False" | "Unknown";
  readyReason?: string;
  readyTransitionAt?: number;
}

interface Known {
  node?: NodeSnapshot;
  leaseRenewAt?: number;
  leaseStaleReported?: boolean;
}

export class ConditionTracker {
  private readonly known = new Map<string, Known>();
  private readonly observer: { replica: string; node: string };
  private leaseStaleMs: number;
  constructor(observer: { replica: string; node: string }, leaseStaleMs: number) {
    this.observer = observer;
    this.leaseStaleMs = leaseStaleMs;
  }

  /** The policy's suspicion.leaseStaleMs changed: the next tick judges staleness by it. */
  setLeaseStaleMs(ms: number): void {
    this.leaseStaleMs = ms;
  }

  private event(
    n: NodeSnapshot,
    change: NodeCondition["change"],
    now: number,
    leaseRenewAt?: number,
  ): OutgoingEvent<NodeCondition> {
    return {
      type: EVENT_TYPES.nodeCondition,
      subject: n.name,
      data: {
        observer: this.observer,
        node: n.name,
        bootId: n.bootId,
        change,
        ready: n.ready,
        ...(n.readyReason ? { readyReason: n.readyReason } : {}),
        ...(n.readyTransitionAt ? { readyTransitionAt: new Date(n.readyTransitionAt).toISOString() } : {}),
        ...(leaseRenewAt ? { leaseRenewAt: new Date(leaseRenewAt).toISOString() } : {}),
        at: new Date(now).toISOString(),
      },
    };
  }

  /** A Node was added or updated. The first sighting of a node emits nothing unless it is not Ready. */
  onNode(n: NodeSnapshot, now: number): OutgoingEvent<NodeCondition>[] {
    if (!n.bootId) return [];
    const k = this.known.get(n.name) ?? {};
    this.known.set(n.name, k);
    const prev = k.node;
    k.node = n;
    const out: OutgoingEvent<NodeCondition>[] = [];
    if (!prev) {
      if (n.ready !== "True") out.push(this.event(n, "ready", now, k.leaseRenewAt));
      return out;
    }
    if (prev.bootId !== n.bootId) {
      k.leaseStaleReported = false;
      out.push(this.event(n, "bootId", now, k.leaseRenewAt));
    } else if (prev.ready !== n.ready) out.push(this.event(n, "ready", now, k.leaseRenewAt));
    return out;
  }

  onNodeDeleted(name: string): void {
    this.known.delete(name);
  }

  /** A kubelet Lease (kube-node-lease/<node>) was renewed. */
  onLease(node: string, renewAt: number): void {
    const k = this.known.get(node) ?? {};
    this.known.set(node, k);
    k.leaseRenewAt = renewAt;
    k.leaseStaleReported = false;
  }

  /** Periodic check: a Lease not renewed for leaseStaleMs is reported once per staleness. */
  tick(now: number): OutgoingEvent<NodeCondition>[] {
    const out: OutgoingEvent<NodeCondition>[] = [];
    for (const k of this.known.values()) {
      if (!k.node || k.leaseRenewAt === undefined || k.leaseStaleReported) continue;
      if (now - k.leaseRenewAt >= this.leaseStaleMs) {
        k.leaseStaleReported = true;
        out.push(this.event(k.node, "lease", now, k.leaseRenewAt));
      }
    }
    return out;
  }
}
