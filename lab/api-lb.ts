// The lab's API endpoint on the bridge (10.77.0.1:6443), which the lab controller and the
// nodes use: a TCP relay to the API servers. With one backend (the host control plane) it
// is a plain relay. With several (the compact plane) it is an analogue of OpenShift's
// api-int load balancer (haproxy on the control-plane nodes): round robin over the backends
// that pass an HTTPS GET /readyz check every `intervalMs` (`fall` failures mark one down,
// `rise` successes up), a connect timeout and `retries` connection retries to the same
// backend, and connections already open stay on their backend. It listens only on the lab
// bridge and connects only to the lab's API servers.
import { request } from "node:https";
import { createServer, connect, type Socket } from "node:net";
import { HOST_IP } from "./state.ts";
import { API_PORT } from "./types.ts";

export interface Backend {
  host: string;
  port: number;
  /** Node name (compact plane) or "host". */
  name: string;
}

/** Health checking and retries; OpenShift's on-prem haproxy values in API_LB_OPENSHIFT. */
export interface LbChecks {
  intervalMs: number;
  fall: number;
  rise: number;
  /** Per check request. */
  checkTimeoutMs: number;
  connectTimeoutMs: number;
  retries: number;
}

/** machine-config-operator's on-prem haproxy template (docs/lab.md): inter 5s fall 3 rise 1, timeout connect 10s, retries 3. */
export const API_LB_OPENSHIFT: LbChecks = {
  intervalMs: 5000,
  fall: 3,
  rise: 1,
  checkTimeoutMs: 5000,
  connectTimeoutMs: 10_000,
  retries: 3,
};

export interface BackendState extends Backend {
  up: boolean;
  fails: number;
  oks: number;
  connections: number;
}

export interface ApiLb {
  backends(): BackendState[];
  stop(): Promise<void>;
}

/** GET https://host:port/readyz (anonymous, certificate not checked: haproxy's `verify none`). */
function readyz(b: Backend, timeoutMs: number): Promise<boolean> {
  return new Promise((res) => {
    const req = request(
      {
        host: b.host,
        port: b.port,
        path: "/readyz",
        rejectUnauthorized: false,
        timeout: timeoutMs,
        agent: false,
      },
      (r) => {
        r.resume();
        res(r.statusCode === 200);
      },
    );
    req.on("error", () => res(false));
    req.on("timeout", () => req.destroy());
    req.end();
  });
}

/** Start the endpoint; `checks` unset = a plain relay to the first backend. */
export function startApiLb(list: Backend[], checks?: LbChecks): Promise<ApiLb> {
  const state: BackendState[] = list.map((b) => ({ ...b, up: true, fails: 0, oks: 0, connections: 0 }));
  const socks = new Set<Socket>();
  let next = 0;
  let stopped = false;
  const timers = new Map<BackendState, NodeJS.Timeout>();

  const check = async (b: BackendState) => {
    if (stopped || !checks) return;
    const ok = await readyz(b, checks.checkTimeoutMs);
    if (ok) {
      b.fails = 0;
      b.oks++;
      if (!b.up && b.oks >= checks.rise) b.up = true;
    } else {
      b.oks = 0;
      b.fails++;
      if (b.up && b.fails >= checks.fall) b.up = false;
    }
    if (!stopped) timers.set(b, setTimeout(() => void check(b), checks.intervalMs).unref());
  };
  if (checks) for (const b of state) void check(b);

  const pick = (): BackendState => {
    const live = state.filter((b) => b.up);
    const from = live.length ? live : state; // none up: haproxy would refuse; try anyway
    return from[next++ % from.length]!;
  };

  const relay = (c: Socket) => {
    const b = pick();
    let tries = 0;
    let cur: Socket | undefined;
    const attempt = () => {
      if (c.destroyed) return;
      const u = (cur = connect({ host: b.host, port: b.port }));
      let connected = false;
      const timer = checks
        ? setTimeout(() => u.destroy(new Error("connect timeout")), checks.connectTimeoutMs)
        : undefined;
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        c.destroy();
        u.destroy();
        socks.delete(c);
        socks.delete(u);
        if (connected) b.connections--;
      };
      u.once("connect", () => {
        clearTimeout(timer);
        connected = true;
        b.connections++;
        socks.add(u);
        u.setNoDelay(true);
        c.pipe(u).pipe(c);
        u.on("close", end);
        c.on("close", end);
      });
      u.on("error", () => {
        clearTimeout(timer);
        if (connected || stopped || c.destroyed) return end();
        if (checks && tries++ < checks.retries) setTimeout(attempt, 1000).unref();
        else end();
      });
    };
    socks.add(c);
    c.setNoDelay(true);
    c.on("error", () => c.destroy());
    c.once("close", () => {
      socks.delete(c);
      cur?.destroy();
    });
    attempt();
  };

  const server = createServer(relay);
  return new Promise((res, rej) => {
    server.once("error", rej);
    server.listen(API_PORT, HOST_IP, () =>
      res({
        backends: () => state.map((b) => ({ ...b })),
        stop: () =>
          new Promise<void>((r) => {
            stopped = true;
            for (const t of timers.values()) clearTimeout(t);
            for (const s of socks) s.destroy();
            server.close(() => r());
          }),
      }),
    );
  });
}
