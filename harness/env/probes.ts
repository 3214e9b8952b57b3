// Readiness probes for harness servers: an HTTP or HTTPS GET that answers 200, and a TCP
// connect. Each resolves false on any failure (within about a second) and never throws.
// Must never probe anything but the address it is given (loopback or a lab namespace).
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { connect } from "node:net";

export function httpOk(url: string): Promise<boolean> {
  return new Promise((res) => {
    const req = httpGet(url, { timeout: 1000 }, (r) => {
      r.resume();
      res(r.statusCode === 200);
    });
    req.on("error", () => res(false));
    req.on("timeout", () => req.destroy());
  });
}

export function httpsOk(
  url: string,
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer; insecure?: boolean; servername?: string },
): Promise<boolean> {
  return new Promise((res) => {
    const req = httpsGet(
      url,
      {
        timeout: 1000,
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        rejectUnauthorized: !tls.insecure,
        ...(tls.servername !== undefined && { servername: tls.servername }),
      },
      (r) => {
        r.resume();
        res(r.statusCode === 200);
      },
    );
    req.on("error", () => res(false));
    req.on("timeout", () => req.destroy());
  });
}

/** True if a TCP connection to host:port opens within 500 ms. */
export function canConnect(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((res) => {
    const s = connect({ host, port, timeout: 500 });
    s.once("connect", () => {
      s.destroy();
      res(true);
    });
    s.once("error", () => res(false));
    s.once("timeout", () => {
      s.destroy();
      res(false);
    });
  });
}
