// API endpoint discovery for the Kubernetes client (client.ts `Kube`, with
// FASTFENCE_KUBE_ENDPOINTS=auto): reads the `default/kubernetes` EndpointSlice by name in
// the background, every DEFAULT_REFRESH.intervalMs and early after a failover, and hands
// the API server URLs it lists (core/kube-endpoints.ts urlsFromSlice) to the client's
// failover list. It never blocks or retries a request (a request uses the last list it
// has), never adds a URL the slice does not list, and a failed read keeps the last list
// and is logged once per failing spell, not per request or per read. (The client checks a
// discovered address's certificate as kubernetes.default.svc, core/kube-endpoints.ts.)
import {
  DEFAULT_REFRESH,
  earlyRefreshDue,
  nextRefreshDelay,
  refreshLogEvent,
} from "../../core/kube-endpoints.ts";
import { urlsFromSlice, type RefreshPolicy, type SliceLike } from "../../core/kube-endpoints.ts";
import type { Logger } from "../log.ts";

export interface ApiEndpointDiscoveryOptions {
  /** One read of the slice (the client's own failover request, bounded by its timeout). */
  read: () => Promise<SliceLike>;
  /** Called with the slice's URLs after each successful read that changed them. */
  onChange: (urls: readonly string[]) => void;
  log: Logger;
  policy?: RefreshPolicy;
  now?: () => number;
}

export class ApiEndpointDiscovery {
  private readonly o: ApiEndpointDiscoveryOptions;
  private readonly policy: RefreshPolicy;
  private readonly now: () => number;
  private urls: readonly string[] = [];
  private failures = 0;
  private inFlight = false;
  private lastStartAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private firstRead: Promise<void> | undefined;

  constructor(o: ApiEndpointDiscoveryOptions) {
    this.o = o;
    this.policy = o.policy ?? DEFAULT_REFRESH;
    this.now = o.now ?? Date.now;
  }

  /** The URLs of the last successful read (none before it). */
  get discovered(): readonly string[] {
    return this.urls;
  }

  /** Starts reading (the first read at once). Idempotent. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.firstRead = this.refresh();
  }

  /** Resolves once the first read ended (either way); for tests and start-up logs. */
  async ready(): Promise<void> {
    await this.firstRead;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** A request had to fail over: read the slice soon (rate-limited; never waits for it). */
  requestEarly(): void {
    if (this.stopped || !earlyRefreshDue(this.policy, this.lastStartAt, this.now(), this.inFlight)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    void this.refresh();
  }

  private async refresh(): Promise<void> {
    if (this.inFlight || this.stopped) return;
    this.inFlight = true;
    this.lastStartAt = this.now();
    let failed = false;
    try {
      const urls = urlsFromSlice(await this.o.read());
      if (urls.join(",") !== this.urls.join(",")) {
        this.o.log.info(
          { incident: "none", endpoints: urls, before: this.urls },
          "kube: API servers discovered",
        );
        this.urls = urls;
        this.o.onChange(urls);
      }
    } catch (err) {
      failed = true;
      this.logFailure(err);
    } finally {
      this.inFlight = false;
    }
    const wasFailing = this.failures > 0;
    if (refreshLogEvent(wasFailing, failed) === "recovered")
      this.o.log.info(
        { incident: "none", failures: this.failures },
        "kube: API endpoint discovery works again",
      );
    this.failures = failed ? this.failures + 1 : 0;
    this.schedule();
  }

  private logFailure(err: unknown): void {
    if (refreshLogEvent(this.failures > 0, true) !== "failing") return;
    const e = err as { code?: unknown; message?: unknown };
    this.o.log.warn(
      { incident: "none", code: e.code, error: String(e.message ?? err), keeping: this.urls },
      "kube: cannot read the kubernetes EndpointSlice; keeping the last API server list (logged once until it works)",
    );
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.refresh(), nextRefreshDelay(this.policy, this.failures));
    this.timer.unref();
  }
}
