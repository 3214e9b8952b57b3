// Sender authentication of the HTTP runtime (Knative deliveries): every POST must carry
// `Authorization: Bearer <token>` that the API server accepts for this function's
// audience (a TokenReview, authentication.k8s.io/v1, spec.audiences = [audience]) — what
// Knative Eventing's `authentication-oidc` sender identity sends — and, when an allow
// list is configured, whose subject is on it. Decides 401 (no, malformed or rejected
// token), 403 (authenticated subject not allowed) or 503 (the API server cannot say:
// Knative redelivers); it never lets a request through because the review failed. A
// token that cannot pass (not a JWT, or its `aud` lacks the audience) is refused without
// a review, so garbage costs the API server nothing.
// Successful reviews are cached by sha256(token) for a short TTL, never past the
// token's `exp`; refusals are not cached. It never logs, stores or returns the token.
import { createHash } from "node:crypto";
import type { Clock } from "../../core/clock.ts";
import { FastfenceError } from "../../core/errors.ts";
import type { Kube } from "../kube/client.ts";

export type RefusalReason =
  | "missing-token"
  | "malformed-token"
  | "unauthenticated"
  | "wrong-audience"
  | "subject-not-allowed"
  | "review-unavailable";

export type AuthDecision =
  | { ok: true; /** The authenticated username; undefined with FASTFENCE_HTTP_AUTH=none. */ subject?: string }
  | { ok: false; status: 401 | 403 | 503; reason: RefusalReason; message: string; subject?: string };

export interface HttpAuthenticator {
  readonly mode: "tokenreview" | "none";
  /** The audience tokens must be bound to (tokenreview mode). */
  readonly audience?: string;
  /** Decides on one request's Authorization header value(s). Never throws. */
  check(authorization: string | string[] | undefined): Promise<AuthDecision>;
}

/** What the API server said about one token (TokenReview status). */
export interface ReviewResult {
  authenticated: boolean;
  username?: string;
  /** status.audiences: empty on an authenticated review means the API server's own audience. */
  audiences: string[];
}

export interface TokenReviewer {
  /** Throws (a FastfenceError) when the API server gives no answer; never for a bad token. */
  review(token: string, audience: string): Promise<ReviewResult>;
}

/** Longest accepted token, characters. Service-account JWTs are ~1 KiB. */
const MAX_TOKEN = 16 * 1024;
/** RFC 6750 b64token. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** Longest reuse of a successful review (the setting is capped at 60 s as well). */
export const MAX_CACHE_MS = 60_000;

/** Parses the Authorization header: a single `Bearer <b64token>`, case-insensitive scheme. */
export function parseBearer(
  header: string | string[] | undefined,
): { token: string } | { reason: "missing-token" | "malformed-token"; message: string } {
  if (header === undefined || header === "" || (Array.isArray(header) && header.length === 0))
    return {
      reason: "missing-token",
      message: "no Authorization header; send `Authorization: Bearer <token>`",
    };
  if (Array.isArray(header))
    return { reason: "malformed-token", message: "more than one Authorization header" };
  const m = /^Bearer +(\S+) *$/i.exec(header);
  if (!m) return { reason: "malformed-token", message: "Authorization is not of the form `Bearer <token>`" };
  const token = m[1]!;
  if (token.length > MAX_TOKEN)
    return { reason: "malformed-token", message: `bearer token longer than ${MAX_TOKEN} characters` };
  if (!B64TOKEN.test(token))
    return { reason: "malformed-token", message: "bearer token has characters a token cannot have" };
  return { token };
}

/**
 * The claims of a JWT's payload, read WITHOUT verifying the signature: used only to bound
 * the cache lifetime (`exp`) and to refuse early (`aud`), never to accept a request.
 */
export function unverifiedClaims(token: string): { exp?: number; aud?: string[] } {
  const parts = token.split(".");
  if (parts.length !== 3) return {};
  try {
    const c = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as Record<string, unknown>;
    const out: { exp?: number; aud?: string[] } = {};
    if (typeof c.exp === "number" && Number.isFinite(c.exp)) out.exp = c.exp;
    if (typeof c.aud === "string") out.aud = [c.aud];
    else if (Array.isArray(c.aud)) out.aud = c.aud.filter((a): a is string => typeof a === "string");
    return out;
  } catch {
    return {};
  }
}

/**
 * Until when (epoch ms) a successful review may be reused: now + ttl (at most
 * MAX_CACHE_MS), and never past the token's `exp` (seconds). undefined: do not cache.
 */
export function cacheUntil(nowMs: number, ttlMs: number, expSeconds?: number): number | undefined {
  if (ttlMs <= 0) return undefined;
  let until = nowMs + Math.min(ttlMs, MAX_CACHE_MS);
  if (expSeconds !== undefined) until = Math.min(until, expSeconds * 1000);
  return until > nowMs ? until : undefined;
}

/** The cache key of a token: its sha256, so the cache never holds a usable token. */
export function tokenKey(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** A bounded map of successful reviews with per-entry expiry. */
export class ReviewCache {
  private readonly entries = new Map<string, { until: number; result: ReviewResult }>();
  private readonly maxEntries: number;
  constructor(maxEntries: number) {
    this.maxEntries = Math.max(1, maxEntries);
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string, nowMs: number): ReviewResult | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.until <= nowMs) {
      this.entries.delete(key);
      return undefined;
    }
    return e.result;
  }

  set(key: string, result: ReviewResult, until: number, nowMs: number): void {
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries)
      for (const [k, e] of this.entries) if (e.until <= nowMs) this.entries.delete(k);
    // Still full: drop the oldest insertions (Map keeps insertion order).
    for (const k of this.entries.keys()) {
      if (this.entries.size < this.maxEntries) break;
      this.entries.delete(k);
    }
    this.entries.set(key, { until, result });
  }
}

/**
 * Refuses, without asking the API server, a token that cannot pass the review: one that is
 * not a JWT with an `aud` claim (every TokenRequest token is), or whose `aud` lacks this
 * audience (the API server would refuse it too). Only ever refuses; a token it lets
 * through is still reviewed. Keeps garbage from costing a TokenReview each.
 */
export function screenToken(
  token: string,
  audience: string,
): Extract<AuthDecision, { ok: false }> | undefined {
  const { aud } = unverifiedClaims(token);
  if (!aud)
    return {
      ok: false,
      status: 401,
      reason: "unauthenticated",
      message: "the bearer token is not a Kubernetes ServiceAccount token (a JWT with an audience)",
    };
  if (!aud.includes(audience))
    return {
      ok: false,
      status: 401,
      reason: "wrong-audience",
      message: `the token is not bound to audience "${audience}"`,
    };
  return undefined;
}

/** The decision on a review the API server answered: audience first, then the allow list. */
export function judgeReview(
  review: ReviewResult,
  audience: string,
  allowedSubjects: readonly string[],
): AuthDecision {
  if (!review.authenticated)
    return {
      ok: false,
      status: 401,
      reason: "unauthenticated",
      message: "the API server rejected the token",
    };
  if (!review.audiences.includes(audience))
    return {
      ok: false,
      status: 401,
      reason: "wrong-audience",
      message: `the token is not bound to audience "${audience}"`,
    };
  const subject = review.username ?? "";
  if (allowedSubjects.length && !allowedSubjects.includes(subject))
    return {
      ok: false,
      status: 403,
      reason: "subject-not-allowed",
      message: `subject "${subject}" may not deliver events to this function`,
      subject,
    };
  return { ok: true, subject };
}

/** FASTFENCE_HTTP_AUTH=none: every request passes (the runtime warns at start). */
export const noAuthentication: HttpAuthenticator = {
  mode: "none",
  check: () => Promise.resolve({ ok: true }),
};

export function createTokenReviewAuthenticator(opts: {
  audience: string;
  allowedSubjects: readonly string[];
  reviewer: TokenReviewer;
  clock: Clock;
  /** Reuse of a successful review, ms (capped at MAX_CACHE_MS; 0 = none). */
  cacheTtlMs: number;
  /** Most cached reviews. Default 1024. */
  maxEntries?: number;
}): HttpAuthenticator {
  const { audience, allowedSubjects, reviewer, clock } = opts;
  const cache = new ReviewCache(opts.maxEntries ?? 1024);
  // Concurrent requests with the same uncached token share one review.
  const inFlight = new Map<string, Promise<ReviewResult>>();

  async function review(key: string, token: string): Promise<ReviewResult> {
    let p = inFlight.get(key);
    if (!p) {
      p = reviewer.review(token, audience).finally(() => inFlight.delete(key));
      inFlight.set(key, p);
    }
    return p;
  }

  return {
    mode: "tokenreview",
    audience,
    async check(header) {
      const parsed = parseBearer(header);
      if ("reason" in parsed) return { ok: false, status: 401, ...parsed };
      const screened = screenToken(parsed.token, audience);
      if (screened) return screened;
      const key = tokenKey(parsed.token);
      const cached = cache.get(key, clock.now());
      if (cached) return judgeReview(cached, audience, allowedSubjects);
      let result: ReviewResult;
      try {
        result = await review(key, parsed.token);
      } catch (err) {
        const why = err instanceof FastfenceError ? err.message : "TokenReview failed";
        return {
          ok: false,
          status: 503,
          reason: "review-unavailable",
          message: `cannot verify the token now (${why}); retry`,
        };
      }
      const decision = judgeReview(result, audience, allowedSubjects);
      if (result.authenticated && result.audiences.includes(audience)) {
        const now = clock.now();
        const until = cacheUntil(now, opts.cacheTtlMs, unverifiedClaims(parsed.token).exp);
        if (until !== undefined) cache.set(key, result, until, now);
      }
      return decision;
    },
  };
}

/** The HTTP answer to a refusal: status, headers (WWW-Authenticate per RFC 6750) and JSON body. */
export function refusalResponse(d: Extract<AuthDecision, { ok: false }>): {
  status: number;
  headers: Record<string, string>;
  body: { error: string; reason: RefusalReason; message: string };
} {
  const headers: Record<string, string> = {};
  if (d.status === 401)
    headers["www-authenticate"] =
      d.reason === "missing-token"
        ? 'Bearer realm="fastfence"'
        : `Bearer realm="fastfence", error="invalid_token", error_description="${d.reason}"`;
  if (d.status === 503) headers["retry-after"] = "1";
  const error =
    d.status === 401 ? "FF_UNAUTHENTICATED" : d.status === 403 ? "FF_FORBIDDEN" : "FF_AUTH_UNAVAILABLE";
  return { status: d.status, headers, body: { error, reason: d.reason, message: d.message } };
}

interface TokenReviewObject {
  status?: { authenticated?: boolean; user?: { username?: string }; audiences?: string[] };
}

/**
 * TokenReviews through the Kube client (its endpoint failover and per-request deadline),
 * with an overall deadline of `timeoutMs`. Posted through the client's generic object
 * API: POST /apis/authentication.k8s.io/v1/tokenreviews. Needs `create` on
 * authentication.k8s.io/tokenreviews (knative/base/rbac/tokenreview.yaml).
 */
export function kubeTokenReviewer(kube: Kube, timeoutMs: number): TokenReviewer {
  return {
    async review(token, audience) {
      const body = {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        spec: { token, audiences: [audience] },
      };
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new FastfenceError("FF_KUBE_UNAVAILABLE", `TokenReview: no answer within ${timeoutMs} ms`, {
                retriable: true,
              }),
            ),
          timeoutMs,
        );
      });
      try {
        const r = (await Promise.race([
          kube.call("TokenReview", (apis) =>
            apis.custom.createClusterCustomObject({
              group: "authentication.k8s.io",
              version: "v1",
              plural: "tokenreviews",
              body,
            }),
          ),
          deadline,
        ])) as TokenReviewObject;
        const s = r.status ?? {};
        return {
          authenticated: s.authenticated === true,
          ...(s.user?.username ? { username: s.user.username } : {}),
          audiences: s.audiences ?? [],
        };
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
