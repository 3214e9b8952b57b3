// Starts the lab Redfish emulator (harness/emulators/redfish) over HTTPS with a fresh
// self-signed certificate for 127.0.0.1 (its PEM doubles as the CA bundle), wired to a
// simulated node (a process group) that ForceOff kills and On starts.
// Returns the URL, credentials, CA, the emulator (fault switches) and stop().
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { LabRedfishServer } from "../emulators/redfish/server.ts";
import { SimNode } from "./bmc-node.ts";
import { RUN_DIR } from "./bmc-spawn.ts";
import { timedStart } from "./start-times.ts";

export interface LabRedfish {
  url: string;
  port: number;
  username: string;
  password: string;
  ca: string;
  systemPath: string;
  server: LabRedfishServer;
  node: SimNode;
  stop(): Promise<void>;
}

export function selfSignedCert(dir: string): { cert: string; key: string } {
  const key = path.join(dir, "key.pem");
  const cert = path.join(dir, "cert.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "2",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
    ],
    { stdio: "ignore" },
  );
  return { cert: readFileSync(cert, "utf8"), key: readFileSync(key, "utf8") };
}

async function startLabRedfishNow(
  opts: { tls?: boolean; sessions?: boolean; username?: string; password?: string; name?: string } = {},
): Promise<LabRedfish> {
  mkdirSync(RUN_DIR, { recursive: true });
  const dir = mkdtempSync(path.join(RUN_DIR, "bmc-lab-"));
  const tls = opts.tls === false ? undefined : selfSignedCert(dir);
  const username = opts.username ?? "fence";
  const password = opts.password ?? `pw-${Math.random().toString(36).slice(2)}-S3cr3t`;
  const node = new SimNode(opts.name ?? "lab1");
  node.start();
  const server = new LabRedfishServer({
    username,
    password,
    tls,
    sessions: opts.sessions,
    initialPower: "On",
    hooks: node.hooks(),
  });
  await server.start();
  return {
    url: server.url,
    port: server.port,
    username,
    password,
    ca: tls?.cert ?? "",
    systemPath: server.systemPath,
    server,
    node,
    stop: async () => {
      await server.stop();
      await node.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Start the lab Redfish emulator; timed (start-times.ts). */
export function startLabRedfish(opts: Parameters<typeof startLabRedfishNow>[0] = {}): Promise<LabRedfish> {
  return timedStart("bmc-redfish-lab", opts.tls === false ? "http" : "https", () => startLabRedfishNow(opts));
}
