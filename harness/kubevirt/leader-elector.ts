// Runs leader-election.pure.ts against a real coordination.k8s.io Lease: reads it, makes
// the write the state machine asks for (create, or replace guarded by resourceVersion),
// sleeps the delay it gives, and calls `lead` with a signal that aborts when leadership
// is lost or the run is cancelled; on cancel, with releaseOnCancel, it releases the Lease.
// Harness only (the VM controller stand-in); it never writes any Lease but its own.
import type { CoordinationV1Api, V1Lease } from "@kubernetes/client-node";
import {
  attempt,
  checkConfig,
  initialState,
  nextDelayMs,
  release,
  renewExpired,
  stopLeading,
  written,
  type ElectionConfig,
  type ElectionState,
  type LeaseRead,
  type LeaseRecord,
  type LeaseWrite,
} from "./leader-election.pure.ts";

export interface ElectorOptions extends ElectionConfig {
  namespace: string;
  name: string;
  /** client-go's ReleaseOnCancel (default false, as virt-controller, which does not set it). */
  releaseOnCancel?: boolean;
  /** Logged transitions (default: none). */
  log?: (msg: string) => void;
  now?: () => number;
  random?: () => number;
}

const statusOf = (err: unknown) => (err as { code?: number }).code;

function recordOf(l: V1Lease): LeaseRecord {
  const s = l.spec ?? {};
  const ms = (d: Date | string | undefined) => (d === undefined ? undefined : new Date(d).getTime());
  const acquire = ms(s.acquireTime);
  const renew = ms(s.renewTime);
  return {
    holderIdentity: s.holderIdentity ?? "",
    leaseDurationSeconds: s.leaseDurationSeconds ?? 0,
    ...(acquire !== undefined ? { acquireTimeMs: acquire } : {}),
    ...(renew !== undefined ? { renewTimeMs: renew } : {}),
    leaseTransitions: s.leaseTransitions ?? 0,
  };
}

/** A Lease's MicroTime: RFC 3339 with six fractional digits (the API server refuses three). */
const microTime = (ms: number): Date => new Date(ms).toISOString().replace(/Z$/, "000Z") as unknown as Date;

const specOf = (r: LeaseRecord): V1Lease["spec"] => ({
  holderIdentity: r.holderIdentity,
  leaseDurationSeconds: r.leaseDurationSeconds,
  ...(r.acquireTimeMs !== undefined ? { acquireTime: microTime(r.acquireTimeMs) } : {}),
  ...(r.renewTimeMs !== undefined ? { renewTime: microTime(r.renewTimeMs) } : {}),
  leaseTransitions: r.leaseTransitions,
});

export class LeaderElector {
  private state: ElectionState = initialState();
  private readonly o: ElectorOptions;
  private readonly api: CoordinationV1Api;

  constructor(api: CoordinationV1Api, o: ElectorOptions) {
    checkConfig(o);
    this.api = api;
    this.o = o;
  }

  get leading(): boolean {
    return this.state.leading;
  }

  private now = () => (this.o.now ?? Date.now)();

  private async read(): Promise<LeaseRead> {
    try {
      const l = await this.api.readNamespacedLease({ name: this.o.name, namespace: this.o.namespace });
      return { kind: "present", record: recordOf(l), resourceVersion: l.metadata?.resourceVersion ?? "" };
    } catch (err) {
      if (statusOf(err) === 404) return { kind: "absent" };
      throw err;
    }
  }

  private async write(w: LeaseWrite): Promise<boolean> {
    const { name, namespace } = this.o;
    try {
      if (w.kind === "create")
        await this.api.createNamespacedLease({
          namespace,
          body: { metadata: { name }, spec: specOf(w.record) },
        });
      else
        await this.api.replaceNamespacedLease({
          name,
          namespace,
          body: { metadata: { name, namespace, resourceVersion: w.resourceVersion }, spec: specOf(w.record) },
        });
      return true;
    } catch (err) {
      if (statusOf(err) === 409) return false; // another candidate wrote first
      throw err;
    }
  }

  /** One attempt to acquire or renew; false on any API error (client-go logs and retries). */
  private async tryAcquireOrRenew(): Promise<void> {
    try {
      const r = attempt(this.state, this.o, this.now(), await this.read());
      this.state = r.state;
      if (r.write) this.state = written(this.state, r.write.record, await this.write(r.write), this.now());
    } catch (err) {
      this.o.log?.(`lease ${this.o.namespace}/${this.o.name}: ${(err as Error).message}`);
    }
  }

  /**
   * Campaign until `signal` aborts; while leading, `lead(leaderSignal)` runs (called again
   * after each new acquisition). On abort a leader releases the Lease.
   */
  async run(signal: AbortSignal, lead: (leaderSignal: AbortSignal) => Promise<void> | void): Promise<void> {
    let leader: AbortController | undefined;
    let leading: Promise<void> = Promise.resolve();
    while (!signal.aborted) {
      const wasLeading = this.state.leading;
      await this.tryAcquireOrRenew();
      if (this.state.leading && !wasLeading) {
        this.o.log?.(`${this.o.identity} became leader of ${this.o.namespace}/${this.o.name}`);
        leader = new AbortController();
        leading = Promise.resolve(lead(leader.signal)).catch((err: Error) =>
          this.o.log?.(`lead: ${err.message}`),
        );
      }
      if (renewExpired(this.state, this.o, this.now())) {
        this.o.log?.(`${this.o.identity} stopped leading: no renew within the renew deadline`);
        this.state = stopLeading(this.state);
        leader?.abort();
        await leading;
      }
      await sleep(nextDelayMs(this.state, this.o, (this.o.random ?? Math.random)()), signal);
    }
    leader?.abort();
    await leading;
    if (this.state.leading && this.o.releaseOnCancel) {
      try {
        const w = release(this.state, this.o, this.now(), await this.read());
        if (w && (await this.write(w)))
          this.o.log?.(`${this.o.identity} released ${this.o.namespace}/${this.o.name}`);
      } catch (err) {
        this.o.log?.(`release: ${(err as Error).message}`);
      }
    }
    this.state = stopLeading(this.state);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
