// Kubernetes API clients that reuse their connections. @kubernetes/client-node 2.0.1's
// KubeConfig authentication builds a new undici Agent for every request, so every API
// call pays a new TCP connection and TLS handshake (client certificate included) on both
// sides. On a small node that is busy fencing, those handshakes are most of the CPU an API
// call costs the caller and the API server. This wraps the KubeConfig: its authentication
// still runs per request (headers, refreshed tokens), but the request goes through one
// keep-alive pool kept for the client's life, whose idle connections stay open for
// IDLE_KEEPALIVE_MS (undici's default, 4 s, closed them between a stage's periodic reads,
// so the first requests of an incident paid the handshakes). It never changes what is sent
// or to which server.
import {
  ServerConfiguration,
  createConfiguration,
  type Configuration,
  type KubeConfig,
  type Middleware,
  type RequestContext,
  type SecurityAuthentication,
} from "@kubernetes/client-node";
import type { AgentOptions } from "node:https";
import { Agent } from "undici";
import { FastfenceError } from "../../core/errors.ts";

type Dispatcher = NonNullable<ReturnType<RequestContext["getDispatcher"]>>;

/**
 * How long an idle pooled connection stays open. Below kube-apiserver's own idle timeout
 * (90 s), so the server does not close a connection a request is being sent on; long enough
 * that a component's periodic reads (a few seconds apart) keep its connections warm for the
 * requests of an incident. Trade-off: each client holds its connections that long.
 */
export const IDLE_KEEPALIVE_MS = 60_000;

/** KubeConfig authentication with one connection pool instead of one per request. */
export class PooledKubeAuth implements SecurityAuthentication {
  private readonly kc: KubeConfig;
  private pool: Promise<Dispatcher> | undefined;

  constructor(kc: KubeConfig) {
    this.kc = kc;
  }

  getName(): string {
    return "kubeconfig authentication (pooled connections)";
  }

  async applySecurityAuthentication(ctx: RequestContext): Promise<void> {
    await this.kc.applySecurityAuthentication(ctx);
    const fresh = ctx.getDispatcher();
    if (!fresh) return; // plain HTTP without TLS options: the global dispatcher pools already
    // One pool however many first requests run at once (each would otherwise build its own);
    // a failed build is tried again by the next request.
    this.pool ??= this.longLivedPool(fresh).catch((err: unknown) => {
      this.pool = undefined;
      throw err;
    });
    const pool = await this.pool;
    if (fresh !== pool) void fresh.close().catch(() => undefined); // never used
    ctx.setDispatcher(pool);
  }

  /**
   * The pool: an Agent with the TLS options the KubeConfig gives (its own choice of CA,
   * client certificate and server name) that keeps idle connections IDLE_KEEPALIVE_MS; through
   * a proxy, the library's dispatcher as it is (`fresh`).
   */
  private async longLivedPool(fresh: Dispatcher): Promise<Dispatcher> {
    const tls: AgentOptions = {};
    await this.kc.applyToHTTPSOptions(tls);
    const opts = this.kc.createDispatcherOptions(this.kc.getCurrentCluster(), tls);
    if (opts.type !== "agent") return fresh;
    return new Agent({
      connect: opts.connect,
      keepAliveTimeout: IDLE_KEEPALIVE_MS,
      keepAliveMaxTimeout: IDLE_KEEPALIVE_MS,
    }) as unknown as Dispatcher;
  }
}

/** The API configuration for one server with pooled connections. */
export function pooledConfiguration(
  kc: KubeConfig,
  server: string,
  promiseMiddleware: Middleware[] = [],
): Configuration {
  return createConfiguration({
    baseServer: new ServerConfiguration(server, {}),
    authMethods: { default: new PooledKubeAuth(kc) },
    promiseMiddleware,
  });
}

/** Like KubeConfig.makeApiClient, with connections reused across requests. */
export function makePooledApiClient<T>(kc: KubeConfig, api: new (config: Configuration) => T): T {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new FastfenceError("FF_INVALID_CONFIG", "kubeconfig has no current cluster");
  return new api(pooledConfiguration(kc, cluster.server));
}
