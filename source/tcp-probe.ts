// One active probe of a node: a TCP connection to its probed port (the kubelet's) that must
// be answered by the process behind it, within one deadline for connect and answer. The
// connect alone proves only the node's kernel: a kernel whose userspace is frozen (memory
// livelock, a stopped kubelet) still completes handshakes into the listen queue, thousands
// of them. So the probe sends one HTTP request line and counts as answered any byte back, an
// orderly close or a reset from the peer after the connect: the kubelet's TLS server answers
// a plaintext request line with "400 Bad Request" at once (and, unlike an empty connection,
// logs nothing), any HTTP server or an SSH banner answers too. A timeout, a refusal or an
// unreachable host is a miss. Thin adapter: it never reads what the answer says.
import { connect } from "node:net";

/** What the probe writes after the connect: a request line any HTTP(S) server answers. */
export const PROBE_REQUEST = "GET / HTTP/1.0\r\n\r\n";

export interface ProbeResult {
  ok: boolean;
  rttMs: number;
  /** Why it missed: no connection within the deadline or refused, or connected but nothing answered. */
  missed?: "connect" | "answer";
}

export function tcpProbe(host: string, port: number, timeoutMs: number): Promise<ProbeResult> {
  const start = performance.now();
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    let done = false;
    let connected = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({
        ok,
        rttMs: Math.round((performance.now() - start) * 10) / 10,
        ...(ok ? {} : { missed: connected ? "answer" : "connect" }),
      });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.once("connect", () => {
      connected = true;
      sock.write(PROBE_REQUEST);
    });
    sock.once("data", () => finish(true));
    // The peer closed (FIN): a process did that, not a frozen one.
    sock.once("end", () => finish(true));
    // A reset after the connect is the peer process closing with our request unread; before
    // it, a refusal or an unreachable host.
    sock.once("error", () => finish(connected));
  });
}
