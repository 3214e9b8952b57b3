// Kubernetes API clients that reuse their connections. @kubernetes/client-node 2.0.1's
// KubeConfig authentication builds a new undici Agent for every request, so every API
// call pays a new TCP connection and TLS handshake (client certificate included) on both
// sides — measured: 50 GETs, 50 handshakes. On a small node that is busy fencing, those
// handshakes are most of the CPU an API call costs the caller and the API server. This
// wraps the KubeConfig: its authentication still runs per request (headers, refreshed
// tokens), but the request goes through one Agent (keep-alive pool) kept for the
// client's life. It never changes what is sent or to which server.
import {
  ServerConfiguration,
  createConfiguration,
  type Configuration,
  type KubeConfig,
  type Middleware,
  type RequestContext,
  type SecurityAuthentication,
} from "@kubernetes/client-node";
import { FastfenceError } from "../../core/errors.ts";

type Dispatcher = NonNullable<ReturnType<RequestContext["getDispatcher"]>>;

/** KubeConfig authentication with one connection pool instead of one per request. */
export class PooledKubeAuth implements SecurityAuthentication {
  private readonly kc: KubeConfig;
  private pool: Dispatcher | undefined;

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
    if (this.pool === undefined) this.pool = fresh;
    else if (fresh !== this.pool) void fresh.close().catch(() => undefined); // never used
    ctx.setDispatcher(this.pool);
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
