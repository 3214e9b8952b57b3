// Several kube-apiservers over one etcd, as on a compact cluster, for the client failover
// tests: one etcd (or a cluster of three members, every API server listing all three, as
// OpenShift's do), then API servers sharing its PKI (one serving cert carrying every
// address) and service-account keys, each bound to its own address on one shared port and
// advertising it with the lease endpoint reconciler, so the `default/kubernetes`
// EndpointSlice lists the live ones as in a real cluster. The API server refuses loopback
// addresses in that slice, so the servers run in a network namespace of their own, reached
// from here over a veth pair (10.78.N.0/24, the first N free from this process's pid; etcd
// listens on the host end). Must never listen outside that pair or outlive the process that
// started it.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { BIN, EnvError } from "./base.ts";
import { kubeconfigYaml, makePki, writeUserKubeconfig, type Pki } from "./pki.ts";
import { freePort } from "./ports.ts";
import { httpOk, httpsOk } from "./probes.ts";
import { ManagedProcess } from "./process.ts";
import { spawnSync } from "node:child_process";
import { deleteNetns, makeNetns, makeTempDir, removeTempDir } from "./registry.ts";
import { EnvScope } from "./scope.ts";

/** The addresses API servers may take: .2 … .9 of the veth subnet (at most 8 servers). */
const SERVER_HOSTS = ["2", "3", "4", "5", "6", "7", "8", "9"];
/** The port every API server listens on, in its namespace. */
const API_PORT = 6443;

/**
 * A 10.78.N.0/24 no interface here holds yet, N from this process's pid first: a subnet
 * another run still holds (a namespace left by a killed run, its servers perhaps alive)
 * would take this one's traffic to its own servers.
 */
function freeSubnet(): string {
  const r = spawnSync("ip", ["-o", "-4", "addr", "show"], { encoding: "utf8" });
  if (r.status !== 0) throw new EnvError(`ip -o -4 addr show failed: ${r.stderr}`);
  const taken = new Set([...r.stdout.matchAll(/inet 10\.78\.(\d+)\./g)].map((m) => Number(m[1])));
  for (let i = 0; i < 250; i++) {
    const n = (process.pid + i) % 250;
    if (!taken.has(n)) return `10.78.${n}`;
  }
  throw new EnvError("no free 10.78.N.0/24 subnet for the API servers' namespace (250 taken)");
}

function runIp(args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new EnvError(`ip ${args.join(" ")} failed: ${r.stderr}`);
}

/** A namespace holding every API server address, linked to this one by a veth pair. */
function makeApiNetns(scope: EnvScope): { ns: string; hostEnd: string; serverIps: string[] } {
  const subnet = freeSubnet();
  const hostEnd = `${subnet}.1`;
  const serverIps = SERVER_HOSTS.map((h) => `${subnet}.${h}`);
  const ns = makeNetns("apis");
  scope.add({ stop: async () => deleteNetns(ns) }); // deleting it deletes the pair
  const host = `ffa${process.pid % 100_000}h`;
  runIp(["link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns]);
  runIp(["addr", "add", `${hostEnd}/24`, "dev", host]);
  runIp(["link", "set", host, "up"]);
  for (const a of serverIps) runIp(["-n", ns, "addr", "add", `${a}/24`, "dev", "eth0"]);
  runIp(["-n", ns, "link", "set", "eth0", "up"]);
  return { ns, hostEnd, serverIps };
}

export interface ApiServer {
  ip: string;
  /** https://10.78.N.M:6443 */
  url: string;
  proc: ManagedProcess;
}

export interface EtcdMember {
  url: string;
  proc: ManagedProcess;
}

export interface ApiServers {
  /** The first member's client URL. */
  etcdUrl: string;
  /** Every etcd member, in the order the API servers list them. */
  etcd: EtcdMember[];
  port: number;
  dir: string;
  servers: ApiServer[];
  /**
   * An admin client for `server` (the kubeconfig's server is that URL), checking its
   * certificate against `tlsServerName` when given.
   */
  kubeConfigFor(server: string, tlsServerName?: string): KubeConfig;
  /** This end of the veth pair: the servers reach it (etcd listens there; so may a webhook). */
  hostAddress: string;
  /** The CA every server trusts for clients and serves under (to issue a webhook's cert). */
  ca: { caCert: string; caKey: string };
  /** A client for `server` as `user` in `groups` (a client cert of the shared CA). */
  kubeConfigAs(server: string, user: string, groups?: string[]): Promise<KubeConfig>;
  /** Starts one more API server on the next free address; resolves once it is ready. */
  add(): Promise<ApiServer>;
  stop(): Promise<void>;
}

/** The name every API server's serving cert carries (pki.ts), for clients that check by name. */
export const SERVICE_NAME = "kubernetes.default.svc";

/**
 * etcd plus `count` API servers (count ≤ 8), each ready (/readyz) before this resolves.
 * `certIps`: which addresses the shared serving cert carries ("every", default, or "first":
 * only the first server's, so the others verify only by SERVICE_NAME). `etcdMembers`: 1
 * (default) or 3; with 3, a member stopped (SIGSTOP) leaves the API servers' etcd
 * connections to it open and unanswered, as a dead node's member does on a compact cluster.
 * `priorityAndFairness`: which servers enforce API Priority and Fairness ("none", default,
 * or "first"), so a FlowSchema can make one server refuse a user with 429 and not the others.
 */
export async function startApiServers(
  count: number,
  o: {
    readyTimeoutMs?: number;
    certIps?: "every" | "first";
    etcdMembers?: 1 | 3;
    priorityAndFairness?: "none" | "first";
  } = {},
): Promise<ApiServers> {
  if (count < 1 || count > SERVER_HOSTS.length)
    throw new EnvError(`startApiServers: count must be 1 … ${SERVER_HOSTS.length} (is ${count})`);
  const timeout = o.readyTimeoutMs ?? 60_000;
  const dir = makeTempDir("apiservers");
  const scope = new EnvScope();
  scope.add({ stop: async () => removeTempDir(dir) });
  try {
    const { ns, hostEnd, serverIps } = makeApiNetns(scope);
    const port = API_PORT;
    const etcd = await spawnEtcd(dir, hostEnd, o.etcdMembers ?? 1);
    for (const m of etcd) scope.add({ stop: () => m.proc.stop() });
    const etcdUrl = etcd[0]!.url;
    const pki = await makePki(dir, o.certIps === "first" ? serverIps.slice(0, 1) : serverIps);
    for (const m of etcd) await m.proc.waitReady(() => httpOk(`${m.url}/health`), timeout);
    const tls = {
      ca: readFileSync(pki.caCert),
      cert: readFileSync(pki.adminCert),
      key: readFileSync(pki.adminKey),
      servername: SERVICE_NAME,
    };
    const servers: ApiServer[] = [];
    const start = async (): Promise<ApiServer> => {
      const addr = serverIps[servers.length];
      if (!addr)
        throw new EnvError(`no loopback address left for another API server (${servers.length} running)`);
      const s = {
        ip: addr,
        url: `https://${addr}:${port}`,
        proc: spawnApiServer(
          ns,
          dir,
          pki,
          etcd.map((m) => m.url),
          addr,
          port,
          o.priorityAndFairness === "first" && servers.length === 0,
        ),
      };
      servers.push(s);
      scope.add({ stop: () => s.proc.stop() });
      await s.proc.waitReady(() => httpsOk(`${s.url}/readyz`, tls), timeout);
      return s;
    };
    for (let i = 0; i < count; i++) await start();
    const kubeConfigFor = (server: string, tlsServerName?: string): KubeConfig => {
      const path = join(dir, `admin-${new URL(server).hostname}-${tlsServerName ?? "ip"}.kubeconfig`);
      const yaml = kubeconfigYaml(server, pki.caCert, pki.adminCert, pki.adminKey, "admin", {
        ...(tlsServerName !== undefined && { tlsServerName }),
      });
      writeFileSync(path, yaml, { mode: 0o600 });
      const kc = new KubeConfig();
      kc.loadFromFile(path);
      return kc;
    };
    const kubeConfigAs = async (server: string, user: string, groups: string[] = []) => {
      const kc = new KubeConfig();
      kc.loadFromFile(
        await writeUserKubeconfig({ dir, server, caCert: pki.caCert, caKey: pki.caKey }, user, groups),
      );
      return kc;
    };
    const ca = { caCert: pki.caCert, caKey: pki.caKey };
    return {
      etcdUrl,
      etcd,
      port,
      dir,
      servers,
      hostAddress: hostEnd,
      ca,
      kubeConfigFor,
      kubeConfigAs,
      add: start,
      stop: () => scope.stopAll(),
    };
  } catch (err) {
    await scope.stopAll().catch(() => undefined);
    if (err instanceof EnvError) throw err;
    throw new EnvError("API servers failed to start", { cause: err });
  }
}

/** `members` etcd members (1 or 3), clients on the veth's host end, peers on loopback. */
async function spawnEtcd(dir: string, hostEnd: string, members: 1 | 3): Promise<EtcdMember[]> {
  const ports = [];
  for (let i = 0; i < members; i++) ports.push({ client: await freePort(), peer: await freePort() });
  const name = (i: number) => (members === 1 ? "default" : `m${i}`);
  const cluster = ports.map((p, i) => `${name(i)}=http://127.0.0.1:${p.peer}`).join(",");
  return ports.map((p, i) => {
    const url = `http://${hostEnd}:${p.client}`;
    const proc = ManagedProcess.spawn({
      name: `etcd-${name(i)}`,
      command: join(BIN, "etcd"),
      dir,
      args: [
        `--name=${name(i)}`,
        `--data-dir=${join(dir, `etcd-data-${name(i)}`)}`,
        `--listen-client-urls=${url}`,
        `--advertise-client-urls=${url}`,
        `--listen-peer-urls=http://127.0.0.1:${p.peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${p.peer}`,
        `--initial-cluster=${cluster}`,
        "--initial-cluster-state=new",
        "--unsafe-no-fsync",
        "--log-level=warn",
      ],
    });
    return { url, proc };
  });
}

function spawnApiServer(
  ns: string,
  dir: string,
  pki: Pki,
  etcdUrls: readonly string[],
  ip: string,
  port: number,
  priorityAndFairness: boolean,
): ManagedProcess {
  // `ip netns exec` execs the server: the process (group) is the server's own.
  return ManagedProcess.spawn({
    name: `kube-apiserver-${ip}`,
    command: "ip",
    dir,
    args: [
      "netns",
      "exec",
      ns,
      join(BIN, "kube-apiserver"),
      `--etcd-servers=${etcdUrls.join(",")}`,
      `--bind-address=${ip}`,
      `--advertise-address=${ip}`,
      `--secure-port=${port}`,
      "--endpoint-reconciler-type=lease",
      `--cert-dir=${join(dir, `certs-${ip}`)}`,
      `--tls-cert-file=${pki.servingCert}`,
      `--tls-private-key-file=${pki.servingKey}`,
      `--client-ca-file=${pki.caCert}`,
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      "--api-audiences=https://kubernetes.default.svc.cluster.local",
      "--authorization-mode=Node,RBAC",
      "--service-cluster-ip-range=10.96.0.0/16",
      "--disable-admission-plugins=ServiceAccount",
      "--profiling=false",
      `--enable-priority-and-fairness=${priorityAndFairness}`,
    ],
  });
}
