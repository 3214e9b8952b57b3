// Asks the peers to vouch for this node (issue 18 item 4), when its own heartbeat renewal
// is no longer acknowledged: one `POST /vouch` per peer event source over the node network,
// each a request signed with this node's observer key (core/vouch.ts VouchRequest: this node,
// the peer asked, a fresh random nonce, its wall time), bounded by timeoutMs. An answer
// counts only if it is for this node and nonce, from the peer asked, and signed with a key
// that peer published on its heartbeat Lease (core/vouch.ts verifyVouch, keys as this
// replica last read them). Each counted vouch is dated by when its request was SENT, on this
// node's monotonic clock: the peer recorded it after that (the nonce is fresh), so no decider
// can have seen the record earlier than this node dates it (docs/design.md "Watchdog
// fencing"). It never pets.
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { verifyVouch, type VouchAnswer, type VouchRequest, type VouchRequestClaim } from "../core/vouch.ts";

export interface Peer {
  node: string;
  host: string;
  port: number;
}

export interface AskResult {
  node: string;
  /** Monotonic ms the request was sent, when the answer counted. */
  vouchedAt?: number;
  /** Why it did not count. */
  refused?: string;
}

function post(p: Peer, body: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      // A fresh connection per ask (no keep-alive): a peer that went away is seen at once.
      { host: p.host, port: p.port, method: "POST", path: "/vouch", timeout: timeoutMs, agent: false },
      (res) => {
        let b = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (b += b.length < 8192 ? c : ""));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: b }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.setHeader("content-type", "application/json");
    req.end(body);
  });
}

/** Asks every peer at once; resolves when all answered or timed out. */
export async function askPeers(o: {
  self: string;
  peers: readonly Peer[];
  /** The observer keys each peer published on its heartbeat Lease. */
  publishedKeys(node: string): readonly string[];
  /** Signs a request with this node's observer key (source/observer-key.ts). */
  sign(c: VouchRequestClaim): VouchRequest;
  /** Wall clock, epoch ms (the request's `at`). */
  now(): number;
  timeoutMs: number;
  mono(): number;
}): Promise<AskResult[]> {
  return Promise.all(
    o.peers.map(async (p): Promise<AskResult> => {
      const nonce = randomBytes(18).toString("base64url");
      const sentAt = o.mono();
      try {
        const req = o.sign({ vouchee: o.self, voucher: p.node, nonce, at: o.now() });
        const r = await post(p, JSON.stringify(req), o.timeoutMs);
        if (o.mono() - sentAt > o.timeoutMs) return { node: p.node, refused: "late" };
        if (r.status !== 200) return { node: p.node, refused: `HTTP ${r.status}` };
        const a = JSON.parse(r.body) as VouchAnswer;
        const v = verifyVouch(a, { vouchee: o.self, voucher: p.node, nonce }, o.publishedKeys(p.node));
        return v === "ok" ? { node: p.node, vouchedAt: sentAt } : { node: p.node, refused: v };
      } catch (err) {
        return { node: p.node, refused: err instanceof Error ? err.message : String(err) };
      }
    }),
  );
}
