// The pure rules of API endpoint discovery (infra/kube/api-endpoints.ts): what the
// FASTFENCE_KUBE_ENDPOINTS setting means, which URLs the `default/kubernetes` EndpointSlice
// gives, the order a request tries them in, and when the slice is read again. No I/O. It
// must never produce a URL that is not the kubeconfig's server, a configured one or an
// address of the slice (never a guessed host or port), nor a plain-HTTP URL.
import { InvalidInputError } from "./errors.ts";

/** The value of FASTFENCE_KUBE_ENDPOINTS that turns discovery on. */
export const DISCOVER_KEYWORD = "auto";
/** The Service whose EndpointSlice lists the API servers (lease endpoint reconciler). */
export const API_SLICE = { namespace: "default", name: "kubernetes" } as const;
/**
 * The name a discovered address's serving certificate is checked against (and sent as SNI)
 * when the kubeconfig gives no tls-server-name: the slice's addresses are the backends of
 * this Service, and every API server's serving cert for it carries the name (kubeadm's,
 * OpenShift's service-network cert, k3s's), where node IPs often are not.
 */
export const API_SERVICE_NAME = "kubernetes.default.svc";

export interface KubeEndpointsSetting {
  /** Follow the `default/kubernetes` EndpointSlice. */
  discover: boolean;
  /** Configured API server URLs, in the order given. */
  urls: string[];
}

/**
 * FASTFENCE_KUBE_ENDPOINTS: comma-separated `https://` URLs and/or the keyword `auto`.
 * Empty or unset: neither. A bad entry is an error naming it.
 */
export function parseKubeEndpointsSetting(value: string | undefined): KubeEndpointsSetting {
  const entries = (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const bad: string[] = [];
  const urls: string[] = [];
  let discover = false;
  for (const e of entries) {
    if (e === DISCOVER_KEYWORD) discover = true;
    else if (isHttpsUrl(e)) urls.push(e);
    else bad.push(e);
  }
  if (bad.length > 0)
    throw new InvalidInputError(
      "FF_INVALID_CONFIG",
      `FASTFENCE_KUBE_ENDPOINTS: not an https:// URL nor "${DISCOVER_KEYWORD}": ${bad.join(", ")}`,
      bad.map((b) => `FASTFENCE_KUBE_ENDPOINTS: ${b}`),
    );
  return { discover, urls: [...new Set(urls)] };
}

function isHttpsUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "https:" && u.hostname !== "" && u.pathname === "/" && !u.search && !u.hash;
  } catch {
    return false;
  }
}

/** The fields of a discovery.k8s.io/v1 EndpointSlice this module reads. */
export interface SliceLike {
  addressType?: string;
  endpoints?: readonly { addresses?: readonly string[]; conditions?: { ready?: boolean } }[];
  ports?: readonly { name?: string; port?: number; protocol?: string }[];
}

/**
 * The API server URLs of the `kubernetes` EndpointSlice: `https://<address>:<port>` for
 * every endpoint not marked unready, with the port named `https` (the only port when
 * unnamed). Sorted, no duplicates. Not IP (FQDN) or no usable port: none.
 */
export function urlsFromSlice(slice: SliceLike): string[] {
  const type = slice.addressType;
  if (type !== "IPv4" && type !== "IPv6") return [];
  const ports = (slice.ports ?? []).filter((p) => (p.protocol ?? "TCP") === "TCP" && p.port);
  const port = (ports.find((p) => p.name === "https") ?? (ports.length === 1 ? ports[0] : undefined))?.port;
  if (!port || !Number.isInteger(port) || port < 1 || port > 65535) return [];
  const urls = new Set<string>();
  for (const ep of slice.endpoints ?? []) {
    if (ep.conditions?.ready === false) continue;
    for (const a of ep.addresses ?? []) {
      if (!isIp(a, type)) continue;
      urls.add(type === "IPv6" ? `https://[${a}]:${port}` : `https://${a}:${port}`);
    }
  }
  return [...urls].sort();
}

function isIp(a: string, type: "IPv4" | "IPv6"): boolean {
  if (type === "IPv4")
    return /^(\d{1,3})(\.\d{1,3}){3}$/.test(a) && a.split(".").every((o) => Number(o) <= 255);
  return /^[0-9a-fA-F:.]+$/.test(a) && a.includes(":");
}

/**
 * The candidate list: the kubeconfig's server first (in a pod, the `kubernetes` Service
 * address), then the configured URLs, then the discovered ones; each once.
 */
export function candidateList(
  main: string,
  configured: readonly string[],
  discovered: readonly string[],
): string[] {
  return [...new Set([main, ...configured, ...discovered])];
}

/**
 * How long an endpoint that failed to connect or answer goes to the back of the order, ms:
 * longer than a dead API server stays in the slice (lease TTL 15 s + reconcile 10 s).
 */
export const SUSPECT_MS = 30_000;

/**
 * The order one request tries the candidates in: the one that answered last, then the
 * others in list order after it (wrapping); those in `suspects` (failed to connect or answer
 * lately and not answered since) last, in the same order. A last-good URL no longer listed:
 * list order.
 */
export function tryOrder(
  candidates: readonly string[],
  lastGood: string | undefined,
  suspects: ReadonlySet<string> = new Set(),
): string[] {
  const i = lastGood === undefined ? -1 : candidates.indexOf(lastGood);
  const rotated = i <= 0 ? [...candidates] : [...candidates.slice(i), ...candidates.slice(0, i)];
  return [...rotated.filter((c) => !suspects.has(c)), ...rotated.filter((c) => suspects.has(c))];
}

/**
 * The attempts of one request: `order` repeated until there are `count` (at least one pass).
 * An API server behind a silent etcd member leaves only the requests its etcd client sends
 * to that member unanswered, so sending to the same server again is worth a try.
 */
export function cycleOrder(order: readonly string[], count: number): string[] {
  if (order.length === 0) return [];
  const n = Math.max(order.length, Math.floor(count));
  return Array.from({ length: n }, (_, i) => order[i % order.length]!);
}

/**
 * How many attempts a hedged read launches (one every `hedgeMs`, core of Kube.read) so that
 * the last one's deadline (`timeoutMs`) ends within `budgetMs` of the first: at least one.
 */
export function readAttemptCount(timeoutMs: number, hedgeMs: number, budgetMs: number): number {
  if (hedgeMs <= 0) return 1;
  return Math.max(1, Math.floor((budgetMs - timeoutMs) / hedgeMs) + 1);
}

/** The endpoints that failed within SUSPECT_MS of `now` (failure times by URL). */
export function suspectsAt(
  failedAt: ReadonlyMap<string, number>,
  now: number,
  windowMs = SUSPECT_MS,
): Set<string> {
  return new Set([...failedAt].filter(([, t]) => now - t < windowMs).map(([u]) => u));
}

export interface RefreshPolicy {
  /** Between two successful reads of the slice, ms. */
  intervalMs: number;
  /** First retry after a failed read, ms; doubles per failure up to intervalMs. */
  retryMs: number;
  /** A request that had to fail over asks for an early read, at most this often, ms. */
  minSpacingMs: number;
}

export const DEFAULT_REFRESH: RefreshPolicy = { intervalMs: 10_000, retryMs: 1000, minSpacingMs: 1000 };

/** When the next read starts after one that ended now: `failures` in a row (0: it worked). */
export function nextRefreshDelay(p: RefreshPolicy, failures: number): number {
  if (failures <= 0) return p.intervalMs;
  return Math.min(p.intervalMs, p.retryMs * 2 ** Math.min(failures - 1, 20));
}

/** Whether a failover's request for an early read starts one now. */
export function earlyRefreshDue(
  p: RefreshPolicy,
  lastStartAt: number | undefined,
  now: number,
  inFlight: boolean,
): boolean {
  return !inFlight && (lastStartAt === undefined || now - lastStartAt >= p.minSpacingMs);
}

/** What a read's outcome is worth a log line: only the change between working and failing. */
export function refreshLogEvent(wasFailing: boolean, failed: boolean): "failing" | "recovered" | undefined {
  if (failed && !wasFailing) return "failing";
  if (!failed && wasFailing) return "recovered";
  return undefined;
}
