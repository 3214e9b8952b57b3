// The pure parts of the HTTP runtime's sender authentication (infra/runtime/http-auth.ts):
// Authorization header parsing, reading a JWT's exp/aud without trusting them, how long a
// successful review is reused (never past exp, never over 60 s), the bounded review
// cache, the decision on an API server answer, the HTTP refusal, and the settings
// (infra/config.ts). The TokenReview itself is tested against a real kube-apiserver in
// test/integration/http-auth.test.ts.
import { describe, expect, test } from "vitest";
import { InvalidInputError } from "../../../core/errors.ts";
import { httpAllowedSubjects, httpAudience, loadRuntimeConfig } from "../../../infra/config.ts";
import {
  MAX_CACHE_MS,
  ReviewCache,
  cacheUntil,
  judgeReview,
  parseBearer,
  refusalResponse,
  screenToken,
  tokenKey,
  unverifiedClaims,
} from "../../../infra/runtime/http-auth.ts";

const jwt = (claims: object) =>
  [
    Buffer.from(JSON.stringify({ alg: "RS256" })).toString("base64url"),
    Buffer.from(JSON.stringify(claims)).toString("base64url"),
    "c2ln",
  ].join(".");

describe("parseBearer", () => {
  test.each([
    [undefined, "missing-token"],
    ["", "missing-token"],
    [[], "missing-token"],
    [["Bearer a", "Bearer b"], "malformed-token"],
    ["Basic dXNlcjpwdw==", "malformed-token"],
    ["Bearer", "malformed-token"],
    ["Bearer ", "malformed-token"],
    ["Bearer two tokens", "malformed-token"],
    ["Bearer tok\u00e9n", "malformed-token"],
    ["Bearer a=b", "malformed-token"],
    [`Bearer ${"a".repeat(16 * 1024 + 1)}`, "malformed-token"],
  ] as const)("%j is refused as %s", (header, reason) => {
    const r = parseBearer(header as string | string[] | undefined);
    expect(r).toMatchObject({ reason });
    expect("message" in r && r.message.length).toBeGreaterThan(0);
  });

  test.each([
    ["Bearer abc.def-_~+/.ghi==", "abc.def-_~+/.ghi=="],
    ["bearer abc", "abc"],
    ["BEARER  abc ", "abc"],
  ])("%j gives the token", (header, token) => {
    expect(parseBearer(header)).toEqual({ token });
  });
});

describe("unverifiedClaims", () => {
  test("reads exp and aud (string or list) of a JWT", () => {
    expect(unverifiedClaims(jwt({ exp: 1700000000, aud: ["a", "b", 3] }))).toEqual({
      exp: 1700000000,
      aud: ["a", "b"],
    });
    expect(unverifiedClaims(jwt({ aud: "a" }))).toEqual({ aud: ["a"] });
  });

  test.each([
    "opaque-token",
    "a.b",
    "a.!!!.c",
    jwt({ exp: "soon" }),
    `x.${Buffer.from("[1]").toString("base64url")}.y`,
  ])("gives nothing for %s", (token) => {
    const c = unverifiedClaims(token);
    expect(c.exp).toBeUndefined();
  });
});

describe("screenToken (refusals before any TokenReview)", () => {
  const aud = "serving.knative.dev/service/fastfence-system/detect";
  test("not a JWT with an audience → 401 unauthenticated", () => {
    for (const t of ["opaque", "a.b.c", jwt({ sub: "x" })])
      expect(screenToken(t, aud)).toMatchObject({ status: 401, reason: "unauthenticated" });
  });
  test("a JWT for other audiences → 401 wrong-audience", () =>
    expect(screenToken(jwt({ aud: ["https://kubernetes.default.svc"] }), aud)).toMatchObject({
      status: 401,
      reason: "wrong-audience",
    }));
  test("a JWT naming the audience goes on to the review (unverified claims never accept)", () =>
    expect(screenToken(jwt({ aud: ["x", aud] }), aud)).toBeUndefined());
});

describe("cacheUntil", () => {
  const now = 1_000_000;
  test("now + ttl without exp", () => expect(cacheUntil(now, 30_000)).toBe(now + 30_000));
  test("never longer than 60 s", () => expect(cacheUntil(now, 3_600_000)).toBe(now + MAX_CACHE_MS));
  test("never past the token's exp", () =>
    expect(cacheUntil(now, 30_000, (now + 5_000) / 1000)).toBe(now + 5_000));
  test("exp later than the ttl does not extend it", () =>
    expect(cacheUntil(now, 30_000, now / 1000 + 3600)).toBe(now + 30_000));
  test("an expired token or ttl 0 is not cached", () => {
    expect(cacheUntil(now, 30_000, now / 1000)).toBeUndefined();
    expect(cacheUntil(now, 30_000, now / 1000 - 1)).toBeUndefined();
    expect(cacheUntil(now, 0)).toBeUndefined();
  });
});

describe("ReviewCache", () => {
  const ok = { authenticated: true, username: "u", audiences: ["aud"] };

  test("an entry is served until its deadline, not at or after it", () => {
    const c = new ReviewCache(10);
    c.set("k", ok, 2000, 1000);
    expect(c.get("k", 1999)).toEqual(ok);
    expect(c.get("k", 2000)).toBeUndefined();
    expect(c.size).toBe(0);
  });

  test("is bounded: expired entries go first, then the oldest", () => {
    const c = new ReviewCache(3);
    c.set("a", ok, 5000, 0);
    c.set("b", ok, 1500, 0);
    c.set("c", ok, 5000, 0);
    c.set("d", ok, 5000, 2000); // b has expired: it is the one dropped
    expect(c.size).toBe(3);
    expect(c.get("a", 2000)).toEqual(ok);
    expect(c.get("d", 2000)).toEqual(ok);
    c.set("e", ok, 5000, 2000); // none expired: the oldest (a) goes
    expect(c.get("a", 2000)).toBeUndefined();
    expect(c.get("c", 2000)).toEqual(ok);
    expect(c.size).toBe(3);
  });

  test("keys are sha256 of the token, never the token", () => {
    const t = jwt({ sub: "x" });
    expect(tokenKey(t)).toMatch(/^[0-9a-f]{64}$/);
    expect(tokenKey(t)).not.toContain(t.slice(0, 10));
    expect(tokenKey(t)).not.toBe(tokenKey(`${t}x`));
  });
});

describe("judgeReview", () => {
  const aud = "serving.knative.dev/service/fastfence-system/detect";
  const sender =
    "system:serviceaccount:fastfence-system:detect-node-observed-oidc-eventing.knative.dev-trigger";

  test("not authenticated → 401", () =>
    expect(judgeReview({ authenticated: false, audiences: [] }, aud, [])).toMatchObject({
      ok: false,
      status: 401,
      reason: "unauthenticated",
    }));

  test("authenticated for another audience, or for the API server's (empty list) → 401 wrong-audience", () => {
    for (const audiences of [[], ["https://kubernetes.default.svc.cluster.local"]])
      expect(judgeReview({ authenticated: true, username: sender, audiences }, aud, [])).toMatchObject({
        ok: false,
        status: 401,
        reason: "wrong-audience",
      });
  });

  test("right audience, no allow list → accepted with the subject", () =>
    expect(judgeReview({ authenticated: true, username: sender, audiences: [aud] }, aud, [])).toEqual({
      ok: true,
      subject: sender,
    }));

  test("right audience, subject not on the allow list → 403", () =>
    expect(
      judgeReview({ authenticated: true, username: "system:serviceaccount:x:y", audiences: [aud] }, aud, [
        sender,
      ]),
    ).toMatchObject({
      ok: false,
      status: 403,
      reason: "subject-not-allowed",
      subject: "system:serviceaccount:x:y",
    }));

  test("right audience, subject on the allow list → accepted", () =>
    expect(
      judgeReview({ authenticated: true, username: sender, audiences: [aud] }, aud, [sender]),
    ).toMatchObject({
      ok: true,
    }));
});

describe("refusalResponse", () => {
  test("401 carries WWW-Authenticate, with invalid_token unless the token was missing", () => {
    const missing = refusalResponse({ ok: false, status: 401, reason: "missing-token", message: "m" });
    expect(missing.headers["www-authenticate"]).toBe('Bearer realm="fastfence"');
    expect(missing.body).toEqual({ error: "FF_UNAUTHENTICATED", reason: "missing-token", message: "m" });
    const bad = refusalResponse({ ok: false, status: 401, reason: "wrong-audience", message: "m" });
    expect(bad.headers["www-authenticate"]).toMatch(/error="invalid_token"/);
  });

  test("403 and 503 have their codes; 503 asks for a retry", () => {
    expect(
      refusalResponse({ ok: false, status: 403, reason: "subject-not-allowed", message: "m" }).body.error,
    ).toBe("FF_FORBIDDEN");
    const r = refusalResponse({ ok: false, status: 503, reason: "review-unavailable", message: "m" });
    expect(r.body.error).toBe("FF_AUTH_UNAVAILABLE");
    expect(r.headers["retry-after"]).toBe("1");
    expect(r.headers["www-authenticate"]).toBeUndefined();
  });
});

describe("settings", () => {
  test("defaults: tokenreview, Knative's audience format, any subject, 30 s cache", () => {
    const cfg = loadRuntimeConfig({ FASTFENCE_NAMESPACE: "ff" });
    expect(cfg.FASTFENCE_HTTP_AUTH).toBe("tokenreview");
    expect(httpAudience(cfg, "detect")).toBe("serving.knative.dev/service/ff/detect");
    expect(httpAllowedSubjects(cfg)).toEqual([]);
    expect(cfg.FASTFENCE_HTTP_AUTH_CACHE_SECONDS).toBe(30);
  });

  test("explicit audience and allow list", () => {
    const cfg = loadRuntimeConfig({
      FASTFENCE_HTTP_AUDIENCE: "x",
      FASTFENCE_HTTP_ALLOWED_SUBJECTS: " a , b,,",
    });
    expect(httpAudience(cfg, "detect")).toBe("x");
    expect(httpAllowedSubjects(cfg)).toEqual(["a", "b"]);
  });

  test.each([
    ["FASTFENCE_HTTP_AUTH", "off"],
    ["FASTFENCE_HTTP_AUTH_CACHE_SECONDS", "61"],
    ["FASTFENCE_HTTP_AUTH_TIMEOUT_MS", "0"],
  ])("%s=%s is an error naming the variable", (name, value) => {
    let err: unknown;
    try {
      loadRuntimeConfig({ [name]: value });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).issues.join()).toContain(name);
  });
});
