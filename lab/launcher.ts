// The simulated node's "hardware": PID 1 of the node's PID namespace (inside its network
// namespace), started by the node's BMC (ipmi_sim startcmd or the Redfish emulator's
// power-on hook). At each start it writes a fresh boot ID into the Node status (a new
// incarnation), then starts the node's processes: the kubelet-port listener, kwok for
// this node, a Kafka broker and one node agent (event source + one replica of every
// function). It never restarts a process that died (a crash stays a crash until the
// power is cycled); killing it (power-off) takes every process of the namespace with it.
// It only talks to the lab API endpoint on the host bridge.
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";

export interface LauncherConfig {
  node: string;
  ip: string;
  dir: string;
  listenerPort: number;
  api: { host: string; port: number; ca: string; cert: string; key: string; servername: string };
  processes: { name: string; argv: string[]; env?: Record<string, string> }[];
}

const cfg = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as LauncherConfig;
const children: ChildProcess[] = [];

function patchBootId(bootId: string): Promise<number> {
  const body = JSON.stringify({ status: { nodeInfo: { bootID: bootId } } });
  return new Promise((res) => {
    const req = request(
      {
        host: cfg.api.host,
        port: cfg.api.port,
        servername: cfg.api.servername,
        method: "PATCH",
        path: `/api/v1/nodes/${cfg.node}/status`,
        ca: readFileSync(cfg.api.ca),
        cert: readFileSync(cfg.api.cert),
        key: readFileSync(cfg.api.key),
        headers: { "content-type": "application/merge-patch+json", "content-length": Buffer.byteLength(body) },
        timeout: 2000,
      },
      (r) => {
        r.resume();
        res(r.statusCode ?? 0);
      },
    );
    req.on("error", () => res(0));
    req.on("timeout", () => req.destroy());
    req.end(body);
  });
}

function start(name: string, argv: string[], env: Record<string, string> = {}): void {
  const fd = openSync(join(cfg.dir, `${name}.log`), "a");
  const c = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", fd, fd], env: { ...process.env, ...env }, cwd: cfg.dir });
  closeSync(fd);
  c.once("error", () => undefined);
  children.push(c);
}

async function main(): Promise<void> {
  const bootId = randomUUID();
  for (let i = 0; i < 20; i++) {
    const code = await patchBootId(bootId);
    if (code >= 200 && code < 300) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  writeFileSync(join(cfg.dir, "boot.json"), JSON.stringify({ bootId, at: new Date().toISOString() }));
  // The kubelet port: accepts and closes. A tiny backlog so a frozen node stops
  // completing handshakes after a couple of probes (a hang is then visible to probes).
  start("kubelet-port", [
    process.execPath,
    "-e",
    `require("net").createServer((s)=>s.destroy()).listen({port:${cfg.listenerPort},host:"${cfg.ip}",backlog:1})`,
  ]);
  for (const p of cfg.processes) start(p.name, p.argv, p.env);
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
