// Kubernetes API access for the functions and the event source, built for the fencing
// critical path (stall source 4 in the brief): every request has a short deadline, and
// several API server endpoints can be given so a request that times out or cannot
// connect is retried on the next endpoint instead of waiting on a dead node's API
// server. HTTP answers (404, 409, ...) are never retried here: a 409 is the optimistic
// concurrency control doing its job. Never logs request bodies or credentials.
import {
  ApiException,
  AuthenticationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  StorageV1Api,
  type Middleware,
  type RequestContext,
  type ResponseContext,
} from "@kubernetes/client-node";
import { FastfenceError } from "../../core/errors.ts";
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
}

export interface KubeApis {
  core: CoreV1Api;
  coordination: CoordinationV1Api;
  storage: StorageV1Api;
  custom: CustomObjectsApi;
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
  private readonly endpoints: { server: string; apis: KubeApis }[];
  private current = 0;

  constructor(kc: KubeConfig, cfg: KubeClientConfig = {}) {
    this.kubeConfig = kc;
    const timeout = cfg.requestTimeoutMs ?? 2000;
    const main = kc.getCurrentCluster();
    if (!main) throw new FastfenceError("FF_INVALID_CONFIG", "kubeconfig has no current cluster");
    const servers = [main.server, ...(cfg.extraEndpoints ?? []).filter((s) => s !== main.server)];
    this.endpoints = servers.map((server) => {
      const k = new KubeConfig();
      k.loadFromOptions({
        clusters: kc.clusters.map((c) => (c.name === main.name ? { ...c, server } : c)),
        users: kc.users,
        contexts: kc.contexts,
        currentContext: kc.currentContext,
      });
      const config = pooledConfiguration(k, server, [timeoutMiddleware(timeout)]);
      return {
        server,
        apis: {
          core: new CoreV1Api(config),
          coordination: new CoordinationV1Api(config),
          storage: new StorageV1Api(config),
          custom: new CustomObjectsApi(config),
          authentication: new AuthenticationV1Api(config),
        },
      };
    });
  }

  /** Loads the in-cluster config, or $KUBECONFIG / ~/.kube/config. */
  static fromEnvironment(cfg: KubeClientConfig = {}): Kube {
    const kc = new KubeConfig();
    kc.loadFromDefault();
    const extra = (process.env.FASTFENCE_KUBE_ENDPOINTS ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    return new Kube(kc, { extraEndpoints: extra, ...cfg });
  }

  /**
   * Runs one API call, failing over to the next endpoint when it cannot connect or
   * times out. HTTP error answers become KubeApiError (409 → FF_KUBE_CONFLICT).
   */
  async call<T>(what: string, fn: (apis: KubeApis) => Promise<T>): Promise<T> {
    let lastErr: unknown;
    for (let i = 0; i < this.endpoints.length; i++) {
      const idx = (this.current + i) % this.endpoints.length;
      const ep = this.endpoints[idx]!;
      try {
        const r = await fn(ep.apis);
        this.current = idx;
        return r;
      } catch (err) {
        if (err instanceof ApiException) throw new KubeApiError(err.code, what, parseBody(err.body), err);
        lastErr = err;
      }
    }
    const tried = this.endpoints.map((e) => e.server).join(", ");
    throw new FastfenceError("FF_KUBE_UNAVAILABLE", `${what}: no API server answered (${tried})`, {
      cause: lastErr,
      retriable: true,
    });
  }
}
