// The vouch endpoint of one event-source replica (issue 18 item 4): over the node network
// (host networking), a peer whose own heartbeat renewal fails asks `POST /vouch` with a
// request signed with the key on its own heartbeat Lease (core/vouch.ts VouchRequest:
// vouchee, this voucher, a fresh nonce, its time); this replica checks it (signature against
// the vouchee's published keys, addressed here, in time, nonce not seen before), limits each
// vouchee to `ratePerSecond` records, records a vouch for it on its own heartbeat Lease (the
// counter of core/watchdog.ts VOUCH_ANNOTATION) through the API server, and answers, signed
// with its observer key, only once the API acknowledged that write (which is a renewal of its
// own heartbeat: only a heartbeating voucher answers). A refused request records nothing (401
// with the verdict, 409 a replay, 429 over the rate); a replica that cannot reach the API
// answers 503 and vouches for nobody; at most one record per vouchee is in flight. It never
// pets, never fences and never answers before the record is acknowledged.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { VouchAnswer, VouchClaim } from "../core/vouch.ts";
import { bumpVouch, verifyVouchRequest, VOUCH_REQUEST_MAX_AGE_MS } from "../core/vouch.ts";
import { VOUCH_ANNOTATION } from "../core/watchdog.ts";
import type { LeaseManager } from "../infra/kube/lease.ts";
import type { Logger } from "../infra/log.ts";

/**
 * The record step: a renewal of this node's own heartbeat Lease that also bumps the
 * vouchee's counter (and keeps the other annotations `keep` gives); the counter written
 * once the API acknowledged it, else undefined.
 */
export function vouchRecorder(o: {
  leases: Pick<LeaseManager, "acquire">;
  lease: string;
  holder: string;
  now(): number;
  keep(current: Readonly<Record<string, string>>): Record<string, string>;
}): (vouchee: string) => Promise<number | undefined> {
  return async (vouchee) => {
    let counter: number | undefined;
    const r = await o.leases.acquire(o.lease, o.holder, o.now(), {
      annotations: (cur) => {
        const b = bumpVouch(cur[VOUCH_ANNOTATION], vouchee);
        counter = b.counter;
        return { ...o.keep(cur), [VOUCH_ANNOTATION]: b.value };
      },
    });
    return r.acquired ? counter : undefined;
  };
}

export interface VouchServerOptions {
  /** This replica's node (the voucher). */
  node: string;
  port: number;
  host?: string;
  /** Nodes it may vouch for (the cluster's, itself excluded). */
  isPeer(node: string): boolean;
  /**
   * Records a vouch for `vouchee` on this node's heartbeat Lease through the API server;
   * resolves to the counter written, or undefined when the write was not acknowledged.
   */
  record(vouchee: string): Promise<number | undefined>;
  sign(c: VouchClaim): VouchAnswer;
  /** The observer keys a node published on its heartbeat Lease (as this replica last read them). */
  publishedKeys(node: string): readonly string[];
  /** This replica's wall clock, epoch ms (a request's `at` is checked against it). */
  now(): number;
  /** Records per vouchee per second at most (default 10); more is answered 429. */
  ratePerSecond?: number;
  log: Logger;
}

export interface VouchServer {
  port: number;
  close(): Promise<void>;
}

const NONCE = /^[A-Za-z0-9_-]{16,128}$/;

/** Nonces seen within the request window, per vouchee: a replay is refused. */
class NonceCache {
  private readonly seen = new Map<string, number>();
  private readonly windowMs: number;
  constructor(windowMs: number) {
    this.windowMs = windowMs;
  }
  /** False when `key` was seen within the window; remembers it otherwise. */
  fresh(key: string, now: number): boolean {
    for (const [k, t] of this.seen) if (now - t > this.windowMs) this.seen.delete(k);
    if (this.seen.has(key)) return false;
    this.seen.set(key, now);
    return true;
  }
}

/** A token bucket per vouchee: `rate` per second, bursts of `rate`. */
function rateLimiter(rate: number): (vouchee: string, now: number) => boolean {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return (vouchee, now) => {
    const b = buckets.get(vouchee) ?? { tokens: rate, at: now };
    b.tokens = Math.min(rate, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    buckets.set(vouchee, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  };
}

export async function startVouchServer(o: VouchServerOptions): Promise<VouchServer> {
  const inFlight = new Map<string, Promise<number | undefined>>();
  const nonces = new NonceCache(2 * VOUCH_REQUEST_MAX_AGE_MS);
  const allow = rateLimiter(o.ratePerSecond ?? 10);
  const server: Server = createServer((req, res) => {
    const reply = (code: number, body: unknown) =>
      void res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (req.method !== "POST" || req.url !== "/vouch") return reply(404, { error: "POST /vouch" });
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      raw += c;
      if (raw.length > 4096) req.destroy();
    });
    req.on("end", () => {
      let body: unknown;
      try {
        body = JSON.parse(raw) as unknown;
      } catch {
        return reply(400, { error: "body: expected a signed JSON vouch request" });
      }
      const { vouchee, nonce } = (body ?? {}) as { vouchee?: unknown; nonce?: unknown };
      if (typeof vouchee !== "string" || !o.isPeer(vouchee) || vouchee === o.node)
        return reply(400, { error: "vouchee: expected another node of the cluster" });
      if (typeof nonce !== "string" || !NONCE.test(nonce))
        return reply(400, { error: "nonce: expected 16-128 URL-safe characters" });
      const now = o.now();
      const { verdict } = verifyVouchRequest(body, { voucher: o.node, now }, o.publishedKeys);
      const refuse = (code: number, reason: string) => {
        o.log.info({ incident: "none", node: vouchee, voucher: o.node, reason }, "vouch request refused");
        reply(code, { error: "vouch request refused", reason });
      };
      if (verdict !== "ok") return refuse(401, verdict === "Malformed" ? "MissingSignature" : verdict);
      if (!nonces.fresh(`${vouchee}/${nonce}`, now)) return refuse(409, "Replayed");
      if (!allow(vouchee, now)) return refuse(429, "RateLimited");
      let p = inFlight.get(vouchee);
      if (!p) {
        p = o.record(vouchee).finally(() => inFlight.delete(vouchee));
        inFlight.set(vouchee, p);
      }
      p.then(
        (counter) => {
          if (counter === undefined) return reply(503, { error: "the API did not acknowledge the vouch" });
          reply(200, o.sign({ voucher: o.node, vouchee, nonce, counter }));
          o.log.debug({ incident: "none", node: vouchee, voucher: o.node, counter }, "vouched");
        },
        (err: unknown) => {
          o.log.debug({ incident: "none", node: vouchee, err }, "vouch not recorded");
          reply(503, { error: "the API did not acknowledge the vouch" });
        },
      );
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host ?? "0.0.0.0", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
