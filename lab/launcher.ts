// The simulated node's "hardware": PID 1 of the node's PID namespace (inside its network
// namespace), started by the node's BMC (ipmi_sim's chassis_control or the Redfish emulator's
// power-on hook). At each start it writes a fresh boot ID into the Node status (a new
// incarnation), then starts the node's processes: the kubelet-port listener, kwok for
// this node, a Kafka broker and one node agent (event source + one replica of every
// function); with the compact plane, before all of them, its etcd member, API server,
// controller manager and scheduler (lab/compact-plane.ts), which it restarts as a kubelet
// restarts static pods while the node's kwok runs (startStatic; its back-off resets after a
// minute of running, the kubelet's after ten, so the bench's arranged restarts stay quick). It never restarts any other
// process that died, nor anything once kwok is dead (a crash stays a crash until the power
// is cycled); killing it (power-off) takes every process of the namespace with it.
// On each start it hands the node Lease to the new kwok (as a rebooted kubelet renews its own).
// It only talks to the lab API endpoint on the host bridge.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { connect } from "node:net";
import { join } from "node:path";

export interface LauncherConfig {
  node: string;
  ip: string;
  dir: string;
  listenerPort: number;
  api: { host: string; port: number; ca: string; cert: string; key: string; servername: string };
  processes: { name: string; argv: string[]; env?: Record<string, string> }[];
  /** Compact plane: etcd, kube-apiserver, controller manager, scheduler; started first. */
  controlPlane?: { name: string; argv: string[] }[];
  /** Set in the node's own UTS namespace (leader-election identities name the node). */
  hostname?: string;
  /** An API path to wait for (200) before the kubelet's work and the other processes. */
  gate?: string;
}

const cfg = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as LauncherConfig;
const children: ChildProcess[] = [];

function api(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json?: Record<string, unknown> }> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((res) => {
    const req = request(
      {
        host: cfg.api.host,
        port: cfg.api.port,
        servername: cfg.api.servername,
        method,
        path,
        ca: readFileSync(cfg.api.ca),
        cert: readFileSync(cfg.api.cert),
        key: readFileSync(cfg.api.key),
        headers:
          text === undefined
            ? {}
            : { "content-type": "application/merge-patch+json", "content-length": Buffer.byteLength(text) },
        timeout: 2000,
      },
      (r) => {
        let out = "";
        r.on("data", (d: Buffer) => (out += d.toString()));
        r.on("end", () => {
          let json: Record<string, unknown> | undefined;
          try {
            json = JSON.parse(out) as Record<string, unknown>;
          } catch {
            json = undefined;
          }
          res({ status: r.statusCode ?? 0, ...(json ? { json } : {}) });
        });
      },
    );
    req.on("error", () => res({ status: 0 }));
    req.on("timeout", () => req.destroy());
    req.end(text);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const leasePath = () => `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${cfg.node}`;

function canConnect(): Promise<boolean> {
  return new Promise((res) => {
    const c = connect({ host: cfg.ip, port: cfg.listenerPort });
    c.once("connect", () => {
      c.destroy();
      res(true);
    });
    c.once("error", () => res(false));
  });
}

function start(name: string, argv: string[], env: Record<string, string> = {}): ChildProcess {
  const fd = openSync(join(cfg.dir, `${name}.log`), "a");
  const c = spawn(argv[0]!, argv.slice(1), {
    stdio: ["ignore", fd, fd],
    env: { ...process.env, ...env },
    cwd: cfg.dir,
  });
  closeSync(fd);
  c.once("error", () => undefined);
  children.push(c);
  return c;
}

const running = (c: ChildProcess | undefined) =>
  c !== undefined && c.exitCode === null && c.signalCode === null;
let kubelet: ChildProcess | undefined;

/**
 * A control-plane process is a static pod: when it exits while the node's kubelet (kwok)
 * runs, or before the kubelet started, it is started again with the kubelet's back-off (1 s,
 * then 10 s doubling to 5 min), as a controller manager that lost its Lease is. A crash
 * kills the kubelet too, so a crashed node restarts nothing.
 */
/** A static pod that ran this long before it died starts again at once (the kubelet: 10 min). */
const BACKOFF_RESET_MS = 60_000;

function startStatic(name: string, argv: string[], restarts = 0): void {
  const c = start(name, argv);
  const started = Date.now();
  c.once("exit", () => {
    if (Date.now() - started >= BACKOFF_RESET_MS) restarts = 0;
    const delay = restarts === 0 ? 1000 : Math.min(300_000, 10_000 * 2 ** (restarts - 1));
    setTimeout(() => {
      if (kubelet === undefined || running(kubelet)) startStatic(name, argv, restarts + 1);
    }, delay);
  });
}

async function main(): Promise<void> {
  for (const f of ["agent.json", "boot.json"]) rmSync(join(cfg.dir, f), { force: true });
  if (cfg.hostname) spawnSync("hostname", [cfg.hostname], { stdio: "ignore" });
  // A control-plane node's static pods come first: the rest of the node needs the API.
  for (const p of cfg.controlPlane ?? []) startStatic(p.name, p.argv);
  // The kubelet port first: accepts and closes, with a normal listen backlog, so a frozen
  // node's kernel still completes handshakes as a real one does; the probe tells it from a
  // live one because nothing answers (source/tcp-probe.ts).
  start("kubelet-port", [
    process.execPath,
    "-e",
    `require("net").createServer((s)=>s.destroy()).listen({port:${cfg.listenerPort},host:"${cfg.ip}"})`,
  ]);
  // Like a kubelet, announce the new incarnation only once the kubelet port answers.
  for (let i = 0; i < 100 && !(await canConnect()); i++) await new Promise((r) => setTimeout(r, 50));
  // With the compact plane, wait until the API answers and the lab has seeded the cluster
  // (at the first power-on), however long that takes.
  if (cfg.gate) while ((await api("GET", cfg.gate)).status !== 200) await sleep(250);
  // A kubelet keeps its Lease holder identity across reboots and renews at once; kwok's
  // identity is per process, so hand the new kwok the Lease (else it waits for expiry).
  await api("DELETE", leasePath());
  for (const p of cfg.processes) {
    const c = start(p.name, p.argv, p.env);
    if (p.name === "kwok") kubelet = c;
  }
  for (let i = 0; i < 100; i++) {
    const l = await api("GET", leasePath());
    const spec = l.json?.spec as { holderIdentity?: string; renewTime?: string } | undefined;
    if (
      l.status === 200 &&
      spec?.holderIdentity &&
      spec.renewTime &&
      Date.now() - Date.parse(spec.renewTime) < 5000
    )
      break;
    await sleep(100);
  }
  // Then, like a kubelet, post the new incarnation (boot ID).
  const bootId = randomUUID();
  for (let i = 0; i < 20; i++) {
    const r = await api("PATCH", `/api/v1/nodes/${cfg.node}/status`, {
      status: { nodeInfo: { bootID: bootId } },
    });
    if (r.status >= 200 && r.status < 300) break;
    await sleep(250);
  }
  writeFileSync(join(cfg.dir, "boot.json"), JSON.stringify({ bootId, at: new Date().toISOString() }));
}

for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  process.on(sig, () => {
    for (const c of children) c.kill("SIGKILL");
    process.exit(0);
  });
}
main().catch((err: unknown) => {
  console.error(err);
});
// Stay up when every process of the node has died: a crashed node's power stays on until
// its BMC turns it off (left alone, Node would exit here once its children were gone, and
// the node would look powered off to ipmi_sim without any fencing).
setInterval(() => undefined, 1 << 30);
