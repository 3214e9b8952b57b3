// Loopback ports for harness servers: a free TCP port (never handed out twice by this
// process) and "is something listening there" from /proc/net/tcp. It must never open a
// connection off loopback.
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { EnvError } from "./base.ts";

const handedOut = new Set<number>();

/** A TCP port on 127.0.0.1 that was free a moment ago (never handed out twice by this process). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise<number>((res, rej) => {
      const srv = createServer();
      srv.once("error", rej);
      srv.listen(0, "127.0.0.1", () => {
        const addr = srv.address();
        const p = typeof addr === "object" && addr ? addr.port : 0;
        srv.close(() => res(p));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new EnvError("no free port found");
}

/** True if something accepts TCP connections on 127.0.0.1:port. */
export function isListening(port: number, host = "127.0.0.1"): boolean {
  // /proc/net/tcp: state 0A = LISTEN; local address is hex ip:port.
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const hexIp = host
    .split(".")
    .map((o) => Number(o).toString(16).toUpperCase().padStart(2, "0"))
    .reverse()
    .join("");
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] !== "0A" || !cols[1]) continue;
      const [ip, p] = cols[1].split(":");
      if (p !== hexPort) continue;
      // IPv4, any-address, or IPv4-mapped IPv6 (::ffff:a.b.c.d, as Java binds).
      if (ip === hexIp || /^0+$/.test(ip ?? "") || ip === `0000000000000000FFFF0000${hexIp}`) return true;
    }
  }
  return false;
}
