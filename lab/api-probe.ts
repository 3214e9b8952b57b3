// The API as a new client sees it during a bench trial: every `everyMs` a GET of the
// `default` Namespace on a fresh connection to the lab's API endpoint (the api-int load
// balancer, api-lb.ts), as the lab's admin, given up after `timeoutMs`; a trial's window then
// counts the requests that failed or timed out and the longest run of them. A new connection
// each time, so a balancer still sending new connections to a dead API server shows. Reads
// only; never writes to the API.
import { request, type RequestOptions } from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";

interface Sample {
  at: number;
  ok: boolean;
}

/** Requests and failures between two instants, and the longest run of failures (ms from its first request to its last). */
export interface ApiErrors {
  requests: number;
  failed: number;
  longestOutageMs: number;
}

export class ApiProbe {
  private readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;

  private readonly kc: KubeConfig;
  private readonly everyMs: number;
  private readonly timeoutMs: number;

  constructor(kc: KubeConfig, everyMs = 250, timeoutMs = 1000) {
    this.kc = kc;
    this.everyMs = everyMs;
    this.timeoutMs = timeoutMs;
  }

  start(): this {
    this.timer = setInterval(() => void this.probe(), this.everyMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async probe(): Promise<void> {
    const at = Date.now();
    const server = new URL(this.kc.getCurrentCluster()?.server ?? "https://127.0.0.1");
    const opts: RequestOptions = {
      host: server.hostname,
      port: server.port || "443",
      path: "/api/v1/namespaces/default",
      agent: false,
      timeout: this.timeoutMs,
    };
    await this.kc.applyToHTTPSOptions(opts);
    const ok = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => req.destroy(), this.timeoutMs);
      const req = request(opts, (r) => {
        r.resume();
        r.on("end", () => (clearTimeout(timer), resolve(r.statusCode === 200)));
        r.on("error", () => (clearTimeout(timer), resolve(false)));
      });
      req.on("error", () => (clearTimeout(timer), resolve(false)));
      req.end();
    });
    this.samples.push({ at, ok });
    // a bench runs for hours: keep the last 10 minutes
    while (this.samples.length > 0 && this.samples[0]!.at < at - 600_000) this.samples.shift();
  }

  /** The requests started in [t0, t1]. */
  between(t0: number, t1: number): ApiErrors {
    return apiErrorsOf(this.samples.filter((s) => s.at >= t0 && s.at <= t1));
  }
}

/** Pure: failures and the longest run of them, from samples in start order. */
export function apiErrorsOf(samples: readonly Sample[]): ApiErrors {
  const sorted = [...samples].sort((a, b) => a.at - b.at);
  let longest = 0;
  let runStart: number | undefined;
  let failed = 0;
  for (const s of sorted) {
    if (s.ok) {
      runStart = undefined;
      continue;
    }
    failed++;
    runStart ??= s.at;
    longest = Math.max(longest, s.at - runStart);
  }
  return { requests: sorted.length, failed, longestOutageMs: longest };
}
