// Kubernetes API access for the functions and the event source, built for the fencing
// critical path (stall source 4 in the brief): every request has a short deadline, and
// several API server endpoints can be given so a request that times out or cannot
// connect is retried on the next endpoint instead of waiting on a dead node's API
// server. With discovery on (FASTFENCE_KUBE_ENDPOINTS=auto, api-endpoints.ts) the list
// follows the `default/kubernetes` EndpointSlice. HTTP answers (404, 409, ...) are never
// retried here: a 409 is the optimistic concurrency control doing its job. A 429 is the one
// exception: the server refused the request before running it (priority and fairness, or
// its storage still initializing after a restart), so the next server gets it. Reads and
// guarded writes (read(), write()) are hedged: the next copy goes out before the first's
// deadline. Never logs request bodies or credentials.
import {
  ApiException,
  AuthenticationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  StorageV1Api,
  type Middleware,
  type RequestContext,
  type ResponseContext,
} from "@kubernetes/client-node";
import { FastfenceError } from "../../core/errors.ts";
import {
  API_SERVICE_NAME,
  API_SLICE,
  candidateList,
  cycleOrder,
  parseKubeEndpointsSetting,
  readAttemptCount,
  suspectsAt,
  tryOrder,
} from "../../core/kube-endpoints.ts";
import type { RefreshPolicy } from "../../core/kube-endpoints.ts";
import { createLogger, type Logger } from "../log.ts";
import { ApiEndpointDiscovery } from "./api-endpoints.ts";
import { hedgedAttempts } from "./hedged.ts";
import { pooledConfiguration } from "./pooled-auth.ts";

export interface KubeClientConfig {
  /**
   * Deadline for one API request, ms. Default 2000. The API server answers in
   * milliseconds when healthy; a longer deadline only delays failover to another
   * endpoint when the one in use sits on the dead node.
   */
  requestTimeoutMs?: number;
  /**
   * Extra API server URLs (same CA and credentials as the kubeconfig), tried in turn
   * when one does not answer. Default: none (only the kubeconfig's server).
   */
  extraEndpoints?: readonly string[];
  /**
   * Also try the API servers the `default/kubernetes` EndpointSlice lists, read in the
   * background (api-endpoints.ts). Default false. Needs `get` on that slice.
   */
  discover?: boolean;
  /**
   * read() and write(): a request not answered within this long is also sent to the next
   * server, ms. Default half the request deadline, at most 500: a healthy API server answers
   * in milliseconds, and one behind a silent etcd member leaves only some requests unanswered.
   */
  readHedgeMs?: number;
  /**
   * read(): how long one read may take in all, ms; attempts go on every readHedgeMs,
   * cycling through the servers (the same one again too), while their deadline still ends
   * within it. Default twice the request deadline. Longer rides out more of a silent etcd
   * member's stalls before the caller sees FF_KUBE_UNAVAILABLE; shorter fails to the caller
   * sooner. (write() always ends within one request deadline: the timeout chain's count.)
   */
  readBudgetMs?: number;
  /** When the slice is read (default core/kube-endpoints.ts DEFAULT_REFRESH). */
  discoveryPolicy?: RefreshPolicy;
  /** For discovery's log lines. Default: a "kube" logger. */
  log?: Logger;
}

/** FASTFENCE_KUBE_ENDPOINTS as client options; a bad entry is an error naming it. */
export function kubeEndpointsOptions(
  value: string | undefined,
): Pick<KubeClientConfig, "extraEndpoints" | "discover"> {
  const s = parseKubeEndpointsSetting(value);
  return { extraEndpoints: s.urls, discover: s.discover };
}

export interface KubeApis {
  core: CoreV1Api;
  coordination: CoordinationV1Api;
  storage: StorageV1Api;
  custom: CustomObjectsApi;
  /** EndpointSlices: the API servers' own (discovery). */
  discovery: DiscoveryV1Api;
  /** Who the caller is (SelfSubjectReview); the CLI's operator actions name their requester. */
  authentication: AuthenticationV1Api;
}

/** An API answer with an HTTP status (404, 409, 422, ...). */
export class KubeApiError extends FastfenceError {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, what: string, body: unknown, cause: unknown) {
    const code =
      status === 409 ? "FF_KUBE_CONFLICT" : status === 404 ? "FF_KUBE_NOT_FOUND" : "FF_KUBE_UNAVAILABLE";
    const reason =
      typeof body === "object" && body && "message" in body
        ? String((body as { message: unknown }).message)
        : `HTTP ${status}`;
    super(code, `${what}: ${reason}`, { cause, retriable: status === 429 || status >= 500 });
    this.status = status;
    this.body = body;
  }
}

function parseBody(body: unknown): unknown {
  if (typeof body !== "string") return body;
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

/** A 429: the server refused the request unrun (APF, storage (re)initializing); another may take it. */
const refusedUnrun = (err: unknown): err is ApiException<unknown> =>
  err instanceof ApiException && err.code === 429;

function timeoutMiddleware(ms: number): Middleware {
  return {
    pre: async (ctx: RequestContext) => {
      ctx.setSignal(AbortSignal.timeout(ms));
      return ctx;
    },
    post: async (ctx: ResponseContext) => ctx,
  };
}

export class Kube {
  readonly kubeConfig: KubeConfig;
  private readonly main: string;
  private readonly configured: readonly string[];
  private readonly timeout: number;
  private readonly hedgeMs: number;
  private readonly readAttempts: number;
  private readonly writeAttempts: number;
  private candidates: readonly string[];
  private readonly apis = new Map<string, KubeApis>();
  private lastGood: string | undefined;
  private answered: string | undefined;
  /** When each endpoint last failed to connect or answer (cleared when it answers). */
  private readonly failedAt = new Map<string, number>();
  private readonly discovery: ApiEndpointDiscovery | undefined;

  constructor(kc: KubeConfig, cfg: KubeClientConfig = {}) {
    this.kubeConfig = kc;
    this.timeout = cfg.requestTimeoutMs ?? 2000;
    this.hedgeMs = cfg.readHedgeMs ?? Math.min(500, this.timeout / 2);
    this.readAttempts = readAttemptCount(this.timeout, this.hedgeMs, cfg.readBudgetMs ?? 2 * this.timeout);
    this.writeAttempts = Math.max(1, Math.ceil(this.timeout / this.hedgeMs));
    const main = kc.getCurrentCluster();
    if (!main) throw new FastfenceError("FF_INVALID_CONFIG", "kubeconfig has no current cluster");
    this.main = main.server;
    this.configured = cfg.extraEndpoints ?? [];
    this.candidates = candidateList(this.main, this.configured, []);
    if (cfg.discover) {
      this.discovery = new ApiEndpointDiscovery({
        read: () =>
          this.read("read the kubernetes EndpointSlice", (a) =>
            a.discovery.readNamespacedEndpointSlice({ name: API_SLICE.name, namespace: API_SLICE.namespace }),
          ),
        onChange: (urls) => this.follow(urls),
        log: cfg.log ?? createLogger("kube"),
        ...(cfg.discoveryPolicy && { policy: cfg.discoveryPolicy }),
      });
      this.discovery.start();
    }
  }

  /** The API server URLs a request may try now, in list order. */
  get servers(): readonly string[] {
    return this.candidates;
  }

  /** The server the last successful request went to. */
  get lastServer(): string | undefined {
    return this.lastGood;
  }

  /** The server that gave the last answer, an HTTP error included. */
  get lastAnswered(): string | undefined {
    return this.answered;
  }

  /**
   * Tries `server` after the others for the next SUSPECT_MS, as after a failure to connect:
   * for a server that answers from state behind the others' (an admission param cache
   * that has not seen a write the others have).
   */
  demote(server: string | undefined): void {
    if (server === undefined || !this.candidates.includes(server)) return;
    this.failedAt.set(server, Date.now());
    if (this.lastGood === server) this.lastGood = undefined;
  }

  /** Resolves once discovery's first read ended (at once without discovery). */
  async discoveryReady(): Promise<void> {
    await this.discovery?.ready();
  }

  /** Stops discovery's background reads (its timer never holds the process open anyway). */
  close(): void {
    this.discovery?.stop();
  }

  private follow(discovered: readonly string[]): void {
    this.candidates = candidateList(this.main, this.configured, discovered);
    for (const server of this.apis.keys())
      if (!this.candidates.includes(server)) {
        this.apis.delete(server);
        this.failedAt.delete(server);
      }
  }

  /**
   * Where a long-running request (a watch) should go now: the first server a request would
   * try (the one that answered last, suspects last).
   */
  preferredServer(): string {
    return tryOrder(this.candidates, this.lastGood, suspectsAt(this.failedAt, Date.now()))[0] ?? this.main;
  }

  /** The kubeconfig's credentials aimed at `server` (a discovered one checked as the Service's name). */
  kubeConfigAt(server: string): KubeConfig {
    const kc = this.kubeConfig;
    const cluster = kc.getCurrentCluster()!;
    if (server === this.main) return kc;
    const discovered = !this.configured.includes(server);
    const tlsServerName = discovered ? (cluster.tlsServerName ?? API_SERVICE_NAME) : cluster.tlsServerName;
    const k = new KubeConfig();
    k.loadFromOptions({
      clusters: kc.clusters.map((c) =>
        c.name === cluster.name ? { ...c, server, ...(tlsServerName !== undefined && { tlsServerName }) } : c,
      ),
      users: kc.users,
      contexts: kc.contexts,
      currentContext: kc.currentContext,
    });
    return k;
  }

  /** The API clients of one server, with the request deadline; no failover (call() fails over). */
  apisAt(server: string): KubeApis {
    let apis = this.apis.get(server);
    if (apis) return apis;
    const config = pooledConfiguration(this.kubeConfigAt(server), server, [timeoutMiddleware(this.timeout)]);
    apis = {
      core: new CoreV1Api(config),
      coordination: new CoordinationV1Api(config),
      storage: new StorageV1Api(config),
      custom: new CustomObjectsApi(config),
      discovery: new DiscoveryV1Api(config),
      authentication: new AuthenticationV1Api(config),
    };
    this.apis.set(server, apis);
    return apis;
  }

  /** Loads the in-cluster config, or $KUBECONFIG / ~/.kube/config. */
  static fromEnvironment(cfg: KubeClientConfig = {}): Kube {
    const kc = new KubeConfig();
    kc.loadFromDefault();
    return new Kube(kc, { ...kubeEndpointsOptions(process.env.FASTFENCE_KUBE_ENDPOINTS), ...cfg });
  }

  /**
   * Runs one API call, failing over to the next endpoint when it cannot connect or
   * times out. HTTP error answers become KubeApiError (409 → FF_KUBE_CONFLICT).
   */
  async call<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    let lastErr: unknown;
    const order = tryOrder(this.candidates, this.lastGood, suspectsAt(this.failedAt, Date.now()));
    for (const [i, server] of order.entries()) {
      try {
        const r = await fn(this.apisAt(server));
        this.answered = server;
        this.lastGood = server;
        this.failedAt.delete(server);
        if (i > 0) this.discovery?.requestEarly();
        return r;
      } catch (err) {
        if (err instanceof ApiException) this.answered = server;
        if (err instanceof ApiException && !refusedUnrun(err))
          throw new KubeApiError(err.code, what, parseBody(err.body), err);
        this.failedAt.set(server, Date.now());
        lastErr = err;
      }
    }
    this.discovery?.requestEarly();
    if (refusedUnrun(lastErr)) throw new KubeApiError(429, what, parseBody(lastErr.body), lastErr);
    throw new FastfenceError("FF_KUBE_UNAVAILABLE", `${what}: no API server answered (${order.join(", ")})`, {
      cause: lastErr,
      retriable: true,
    });
  }

  /**
   * Runs one read (GET, LIST: idempotent), hedged across the endpoints (hedged.ts): the next
   * one also gets it when the first has not answered within readHedgeMs, cycling through
   * them again within readBudgetMs. Errors as call(). Never for a write.
   */
  async read<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    return this.hedged(what, fn, { attempts: this.readAttempts, held: () => false });
  }

  /**
   * Runs one guarded write: a create (a second copy finds the name taken) or an update or
   * delete carrying the resourceVersion it was decided on (a second copy finds it changed), so
   * at most one copy applies. Copies go out every readHedgeMs, cycling through the servers,
   * and all of it ends within one request deadline, as call()'s first attempt would (the
   * timeout chain counts a write as one deadline). A 409 or 404 waits for the copies still
   * in flight (hedged.ts `held`): a copy that lost to its own twin is not reported over the
   * twin's success. Never for an unguarded write (a patch without a resourceVersion): a late
   * copy could undo a newer change.
   */
  async write<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    return this.hedged(what, fn, {
      attempts: this.writeAttempts,
      budgetMs: this.timeout,
      held: (err) => err instanceof ApiException && (err.code === 409 || err.code === 404),
    });
  }

  private async hedged<T>(
    what: string,
    fn: (apis: KubeApis) => Promise<T>,
    o: { attempts: number; held: (err: unknown) => boolean; budgetMs?: number },
  ): Promise<T> {
    const order = tryOrder(this.candidates, this.lastGood, suspectsAt(this.failedAt, Date.now()));
    const r = await hedgedAttempts(cycleOrder(order, o.attempts), (server) => fn(this.apisAt(server)), {
      hedgeAfterMs: this.hedgeMs,
      isAnswer: (err) => err instanceof ApiException && !refusedUnrun(err),
      held: o.held,
      ...(o.budgetMs !== undefined && { budgetMs: o.budgetMs }),
    });
    const at = Date.now();
    for (const server of r.failed) this.failedAt.set(server, at);
    if (r.kind === "none" || r.server !== order[0]) this.discovery?.requestEarly();
    if (r.kind === "none" && refusedUnrun(r.error))
      throw new KubeApiError(429, what, parseBody(r.error.body), r.error);
    if (r.kind === "none")
      throw new FastfenceError(
        "FF_KUBE_UNAVAILABLE",
        `${what}: no API server answered (${order.join(", ")})`,
        {
          cause: r.error,
          retriable: true,
        },
      );
    this.answered = r.server;
    if (r.kind === "answer") {
      const err = r.error as ApiException<unknown>;
      throw new KubeApiError(err.code, what, parseBody(err.body), err);
    }
    this.lastGood = r.server;
    this.failedAt.delete(r.server);
    return r.value;
  }
}
