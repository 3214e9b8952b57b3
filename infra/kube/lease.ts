// Per-node driver leases (coordination.k8s.io/v1 Lease): at most one instance issues
// power actions for a node at a time (S3). Acquire and renew are optimistic-concurrency
// writes guarded by resourceVersion; a 409 means someone else won and is reported as
// "not acquired", never retried blindly. It never takes over a lease that has not
// expired by its own renewTime + leaseDurationSeconds.
import type { V1Lease } from "@kubernetes/client-node";
import { FastfenceError } from "../../core/errors.ts";
import type { HeartbeatRead, LeaseInfo, ObserverInfo } from "../../core/decision.ts";
import { OBSERVER_KEY_ANNOTATION, OBSERVER_PREVIOUS_KEY_ANNOTATION } from "../../core/evidence-proof.ts";
import { KubeApiError, type Kube } from "./client.ts";

/** Heartbeat Lease names are this prefix and the node name (core/decision.ts heartbeatLeaseName). */
const HEARTBEAT_LEASE_PREFIX = "fastfence-alive-";

export interface LeaseConfig {
  namespace: string;
  /**
   * How long a holder owns the lease without renewing, seconds, when `acquire` is not told
   * (the event source's heartbeat Leases). The fencing Lease always is: the policy's
   * timeouts.leaseDurationMs, through the takeLease action.
   */
  durationSeconds?: number;
}

export interface AcquireOptions {
  /** Sets these annotations on the Lease (the event source publishes its observer key this way). */
  annotations?: (current: Readonly<Record<string, string>>) => Record<string, string>;
  /**
   * The Lease as the caller just read it (`lease: undefined` when it was absent): the read
   * is skipped and the write is guarded by that copy's resourceVersion, so a copy that is no
   * longer current loses (not acquired) instead of overwriting a newer holder.
   */
  known?: { lease: V1Lease | undefined };
  /** The Lease's duration, ms (rounded up to whole seconds). Default: LeaseConfig.durationSeconds. */
  durationMs?: number;
}

/**
 * A Date that serialises in Kubernetes' MicroTime format (RFC 3339 with exactly six
 * fractional digits). @kubernetes/client-node writes Dates with toISOString() (three
 * digits), which the API server rejects for Lease acquireTime/renewTime.
 */
export class MicroTime extends Date {
  override toISOString(): string {
    return super.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
  }
}

export type LeaseResult =
  { acquired: true; lease: V1Lease } | { acquired: false; holder: string; expiresAt: number };

export function fenceLeaseName(node: string): string {
  return `fastfence-fence-${node}`.slice(0, 253);
}

function expiry(l: V1Lease): number {
  const renew = l.spec?.renewTime ?? l.spec?.acquireTime;
  const t = renew ? new Date(renew as unknown as string).getTime() : 0;
  return t + (l.spec?.leaseDurationSeconds ?? 0) * 1000;
}

export class LeaseManager {
  private readonly kube: Kube;
  private readonly cfg: LeaseConfig;
  constructor(kube: Kube, cfg: LeaseConfig) {
    this.kube = kube;
    this.cfg = cfg;
  }

  /** Takes (or renews, when already ours) the lease `name` for `holder` at time `now` (AcquireOptions). */
  async acquire(name: string, holder: string, now: number, opts: AcquireOptions = {}): Promise<LeaseResult> {
    const { namespace } = this.cfg;
    const { annotations, known } = opts;
    const seconds =
      opts.durationMs !== undefined ? Math.ceil(opts.durationMs / 1000) : this.cfg.durationSeconds;
    if (!seconds || seconds < 1)
      throw new FastfenceError("FF_INTERNAL", `lease ${name}: no duration (want at least 1 s)`);
    const spec = {
      holderIdentity: holder,
      leaseDurationSeconds: seconds,
      acquireTime: new MicroTime(now),
      renewTime: new MicroTime(now),
    };
    const current = known ? known.lease : await readLease(this.kube, namespace, name);
    try {
      if (!current) {
        const metadata = { name, namespace, ...(annotations ? { annotations: annotations({}) } : {}) };
        const lease = await this.kube.write(`create lease ${name}`, (a) =>
          a.coordination.createNamespacedLease({ namespace, body: { metadata, spec } }),
        );
        return { acquired: true, lease };
      }
      const heldBy = current.spec?.holderIdentity ?? "";
      if (heldBy && heldBy !== holder && expiry(current) > now)
        return { acquired: false, holder: heldBy, expiresAt: expiry(current) };
      const previous = current.metadata?.annotations ?? {};
      const body: V1Lease = {
        ...current,
        ...(annotations
          ? { metadata: { ...current.metadata, annotations: { ...previous, ...annotations(previous) } } }
          : {}),
        spec: {
          ...current.spec,
          ...spec,
          acquireTime:
            heldBy === holder && current.spec?.acquireTime
              ? new MicroTime(current.spec.acquireTime)
              : spec.acquireTime,
          leaseTransitions: (current.spec?.leaseTransitions ?? 0) + (heldBy === holder ? 0 : 1),
        },
      };
      const lease = await this.kube.write(`update lease ${name}`, (a) =>
        a.coordination.replaceNamespacedLease({ name, namespace, body }),
      );
      return { acquired: true, lease };
    } catch (err) {
      if (err instanceof KubeApiError && (err.status === 409 || err.status === 422 || err.status === 404)) {
        const again = await this.kube
          .read(`read lease ${name}`, (a) => a.coordination.readNamespacedLease({ name, namespace }))
          .catch(() => undefined);
        return {
          acquired: false,
          holder: again?.spec?.holderIdentity ?? "unknown",
          expiresAt: again ? expiry(again) : now,
        };
      }
      throw err;
    }
  }

  /** Gives the lease up if we hold it (holder cleared), so the next driver need not wait. */
  async release(name: string, holder: string): Promise<void> {
    const { namespace } = this.cfg;
    try {
      const current = await this.kube.read(`read lease ${name}`, (a) =>
        a.coordination.readNamespacedLease({ name, namespace }),
      );
      if (current.spec?.holderIdentity !== holder) return;
      await this.kube.call(`release lease ${name}`, (a) =>
        a.coordination.replaceNamespacedLease({
          name,
          namespace,
          body: {
            ...current,
            spec: {
              ...current.spec,
              ...(current.spec?.acquireTime ? { acquireTime: new MicroTime(current.spec.acquireTime) } : {}),
              ...(current.spec?.renewTime ? { renewTime: new MicroTime(current.spec.renewTime) } : {}),
              holderIdentity: "",
              leaseDurationSeconds: 1,
            },
          },
        }),
      );
    } catch (err) {
      if (err instanceof KubeApiError && (err.status === 404 || err.status === 409)) return;
      throw err instanceof FastfenceError
        ? err
        : new FastfenceError("FF_KUBE_UNAVAILABLE", `release lease ${name}`, { cause: err });
    }
  }
}

/** Reads a lease as plain facts (holder, renew time, duration), or undefined if absent. */
/** The Lease `name`, or undefined when there is none. */
export async function readLease(kube: Kube, namespace: string, name: string): Promise<V1Lease | undefined> {
  try {
    return await kube.read(`read lease ${name}`, (a) =>
      a.coordination.readNamespacedLease({ name, namespace }),
    );
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 404) return undefined;
    throw err;
  }
}

/** What a decision needs of a Lease: holder, last renewal and duration. */
export function leaseInfoOf(l: V1Lease): LeaseInfo {
  const renew = l.spec?.renewTime ?? l.spec?.acquireTime;
  return {
    ...(l.spec?.holderIdentity ? { holder: l.spec.holderIdentity } : {}),
    ...(renew ? { renewTime: new Date(renew as unknown as string).toISOString() } : {}),
    durationMs: (l.spec?.leaseDurationSeconds ?? 0) * 1000,
  };
}

/** A heartbeat Lease as one read saw it: its resourceVersion and renewTime (View.heartbeat). */
export function heartbeatReadOf(l: V1Lease): HeartbeatRead {
  const renew = l.spec?.renewTime;
  return {
    resourceVersion: l.metadata?.resourceVersion ?? "",
    ...(renew ? { renewTime: new Date(renew as unknown as string).toISOString() } : {}),
  };
}

export async function readLeaseInfo(
  kube: Kube,
  namespace: string,
  name: string,
): Promise<LeaseInfo | undefined> {
  const l = await readLease(kube, namespace, name);
  return l && leaseInfoOf(l);
}

/**
 * Every observer node's published keys and heartbeat, from the heartbeat Leases
 * (fastfence-alive-<node>) in `namespace`: one list call. The Lease name says whose it is;
 * an admission policy lets only that node's identity write it.
 */
export async function readObserverInfos(
  kube: Kube,
  namespace: string,
): Promise<Record<string, ObserverInfo>> {
  const list = await kube.read(`list leases in ${namespace}`, (a) =>
    a.coordination.listNamespacedLease({ namespace }),
  );
  const out: Record<string, ObserverInfo> = {};
  for (const l of list.items) {
    const name = l.metadata?.name ?? "";
    if (!name.startsWith(HEARTBEAT_LEASE_PREFIX)) continue;
    const node = name.slice(HEARTBEAT_LEASE_PREFIX.length);
    const ann = l.metadata?.annotations ?? {};
    const keys = [ann[OBSERVER_KEY_ANNOTATION], ann[OBSERVER_PREVIOUS_KEY_ANNOTATION]].filter(
      (k): k is string => typeof k === "string" && k.length > 0,
    );
    const renew = l.spec?.renewTime ?? l.spec?.acquireTime;
    out[node] = {
      keys,
      ...(renew ? { renewTime: new Date(renew as unknown as string).toISOString() } : {}),
      durationMs: (l.spec?.leaseDurationSeconds ?? 0) * 1000,
    };
  }
  return out;
}
