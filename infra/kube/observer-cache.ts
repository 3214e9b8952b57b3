// A watch-fed copy of the Leases in the fastfence namespace, for View.observers (every
// observer node's published keys and heartbeat): detect and confirm read it on every
// decision, and one watch per replica costs the API server far less than one list per
// decision. It answers only while its watch is listed and live: some Lease event within
// `staleMs` of the read (every node renews its heartbeat Lease several times per Lease
// duration, so a silent watch is a stalled one). Otherwise it answers undefined and the
// caller lists from the API, as without the cache. A stalled copy can only make a
// heartbeat look older than it is (evidence refused, never accepted wrongly). Started
// on first use; restarts its watch after an error. It never writes.
import {
  makeInformer,
  type Informer,
  type KubeConfig,
  type ObjectCache,
  type V1Lease,
} from "@kubernetes/client-node";
import { CoordinationV1Api } from "@kubernetes/client-node";
import type { ObserverInfo } from "../../core/decision.ts";
import type { Clock } from "../../core/clock.ts";
import type { Logger } from "../log.ts";
import { observerInfosOf } from "./lease.ts";

export class ObserverCache {
  private readonly kc: KubeConfig;
  private readonly namespace: string;
  private readonly clock: Clock;
  private readonly log: Logger | undefined;
  private readonly restartMs: number;
  private informer: (Informer<V1Lease> & ObjectCache<V1Lease>) | undefined;
  private listed = false;
  private stopped = false;
  private lastEventAt: number | undefined;
  private restart: NodeJS.Timeout | undefined;

  constructor(kc: KubeConfig, namespace: string, opts: { clock: Clock; log?: Logger; restartMs?: number }) {
    this.kc = kc;
    this.namespace = namespace;
    this.clock = opts.clock;
    this.log = opts.log;
    this.restartMs = opts.restartMs ?? 500;
  }

  /**
   * The observer map as last watched, or undefined while the watch is not listed or no
   * Lease event arrived within `staleMs` of `now` (then read the API instead).
   */
  get(now: number, staleMs: number): Record<string, ObserverInfo> | undefined {
    if (!this.informer) this.start();
    if (!this.listed || this.lastEventAt === undefined || now - this.lastEventAt > staleMs) return undefined;
    return observerInfosOf(this.informer!.list(this.namespace));
  }

  private start(): void {
    const api = this.kc.makeApiClient(CoordinationV1Api);
    const ns = this.namespace;
    const inf = makeInformer<V1Lease>(this.kc, `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, () =>
      api.listNamespacedLease({ namespace: ns }),
    );
    this.informer = inf;
    const seen = () => (this.lastEventAt = this.clock.now());
    inf.on("add", seen);
    inf.on("update", seen);
    inf.on("delete", seen);
    inf.on("error", (err: unknown) => this.failed(err));
    this.run();
  }

  private failed(err: unknown): void {
    this.listed = false;
    if (this.stopped) return;
    this.log?.warn({ incident: "none", node: "none", err }, "observer Lease watch stopped; restarting");
    clearTimeout(this.restart);
    this.restart = setTimeout(() => this.run(), this.restartMs);
  }

  private run(): void {
    if (this.stopped || !this.informer) return;
    this.informer.start().then(
      () => {
        this.listed = true;
        this.lastEventAt = this.clock.now();
      },
      (err: unknown) => this.failed(err),
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.listed = false;
    clearTimeout(this.restart);
    await this.informer?.stop().catch(() => undefined);
  }
}
