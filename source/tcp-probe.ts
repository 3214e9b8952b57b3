// One active probe: a TCP connect to the node's kubelet port with a deadline. A refused
// or timed-out connect is a miss. Thin adapter; it never sends data on the connection.
import { connect } from "node:net";

export function tcpProbe(
  host: string,
  port: number,
  timeoutMs: number,
): Promise<{ ok: boolean; rttMs: number }> {
  const start = performance.now();
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let done = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ ok, rttMs: Math.round((performance.now() - start) * 10) / 10 });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.once("connect", () => finish(true));
    sock.once("error", () => finish(false));
  });
}
