// The lab: a simulated compact bare-metal cluster on one machine. The control plane runs
// on the host (real etcd, kube-apiserver, controller-manager, scheduler from
// test/env/controlplane.ts), reachable from the nodes through a TCP relay on the host side
// of the lab bridge (10.77.0.1:6443). Each node is a network namespace (own address on
// the bridge) whose processes run under a launcher that is PID 1 of its own PID
// namespace: kwok, the kubelet-port listener, a Kafka broker and one node agent (event
// source + one replica of every function). Each node's BMC runs on the host side: the lab
// Redfish emulator (in this process; power-off kills the node's namespace, power-on
// starts the launcher) or OpenIPMI ipmi_sim (its chassis_control program asks the lab to
// start or kill the launcher). Faults: crash,
// hang/resume, partition/heal, partial partitions, BMC faults, function-only crash.
// Everything made is recorded in .cache/lab/state.json first (lab/state.ts), so any
// process can tear it down. It never touches a namespace, link or process it did not make
// and sends traffic only to loopback and to the lab's own namespaces.
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  StorageV1Api,
  type KubeConfig,
  type V1Node,
} from "@kubernetes/client-node";
import { randomUUID } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer, connect, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import type { FencingPolicySpecInput } from "../core/policy.ts";
import { makePooledApiClient } from "../infra/kube/pooled-auth.ts";
import { PROBE_ADDRESS_ANNOTATION } from "../source/event-source.ts";
import { LabRedfishServer } from "../test/emulators/redfish/server.ts";
import { applyObjects, readManifests } from "../test/env/apply.ts";
import { startControlPlane, type ControlPlane } from "../test/env/controlplane.ts";
import { ManagedProcess, THIRD_PARTY_CRDS, freePort } from "../test/env/process.ts";
import { bootstrapOf, prepareBrokers } from "./kafka.ts";
import { blackhole, createBridge, createNodeNet, netnsName, nodeIp, setLink, vethName } from "./net.ts";
import {
  BRIDGE,
  HOST_IP,
  LAB_RUN,
  ROOT,
  emptyState,
  nsPids,
  pidsInNetns,
  procAlive,
  readState,
  record,
  signalPids,
  teardownFromState,
  writeState,
  type LabState,
  type NodeRecord,
} from "./state.ts";

export const NAMESPACE = "fastfence-system";
export const API_PORT = 6443;
export const KUBELET_PORT = 10250;
export const AGENT_PORT = 7070;
export const NODE_NAMES = ["node-a", "node-b", "node-c", "node-d", "node-e", "node-f", "node-g"];

export type BmcKind = "ipmi" | "redfish";
export type BmcFault = "unreachable" | "slow" | "lying" | "stuck" | "none";

export interface LabOptions {
  nodes?: number;
  /** BMC per node: "mixed" (default: ipmi, redfish, ipmi, ...), or all of one kind. */
  bmc?: "mixed" | BmcKind;
  /** Run the node agents (fastfence). false = the baseline: Kubernetes alone. */
  fastfence?: boolean;
  controllerManagerArgs?: string[];
  apiserverArgs?: string[];
  policy?: FencingPolicySpecInput;
  /** Progress lines. */
  log?: (line: string) => void;
  /** Create the default workloads spread over the nodes (default true). */
  workloads?: boolean;
  /** kwok node Lease duration (renewed every quarter of it); default 40 s like a kubelet. */
  kwokLeaseSeconds?: number;
}

export interface LabNode extends NodeRecord {
  redfish?: LabRedfishServer;
  ipmi?: ManagedProcess;
  ipmiPassword?: string;
  /** The launcher started by this process (Redfish nodes). */
  launcher?: ManagedProcess;
  startScript: string;
  /** Power actions the BMC carried out (for the invariant checker). */
  powerLog: { at: number; action: "off" | "on"; by: "bmc" | "lab" }[];
  /** IPMI nodes: a lab-initiated power action (reset) is pending, so log it as "lab". */
  labAction?: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitUntil<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs: number,
  everyMs = 200,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end)
      throw new Error(
        `lab: timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (${String(last)})` : ""}`,
      );
    await sleep(everyMs);
  }
}

function nodeKubeconfig(cp: ControlPlane): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: lab",
    "  cluster:",
    `    server: https://${HOST_IP}:${API_PORT}`,
    `    certificate-authority: ${cp.pki.caCert}`,
    "    tls-server-name: kubernetes",
    "users:",
    "- name: admin",
    "  user:",
    `    client-certificate: ${cp.pki.adminCert}`,
    `    client-key: ${cp.pki.adminKey}`,
    "contexts:",
    "- name: lab",
    "  context: {cluster: lab, user: admin}",
    "current-context: lab",
    "",
  ].join("\n");
}

function nodeObject(n: NodeRecord): V1Node {
  const cap = { cpu: "32", memory: "256Gi", pods: "110" };
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: n.name,
      labels: {
        type: "kwok",
        "kubernetes.io/hostname": n.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node-role.kubernetes.io/control-plane": "",
      },
      annotations: {
        "kwok.x-k8s.io/node": "fake",
        "node.alpha.kubernetes.io/ttl": "0",
        [PROBE_ADDRESS_ANNOTATION]: `${n.ip}:${KUBELET_PORT}`,
      },
    },
    spec: {},
    status: {
      allocatable: cap,
      capacity: cap,
      addresses: [
        { type: "InternalIP", address: n.ip },
        { type: "Hostname", address: n.name },
      ],
      nodeInfo: {
        architecture: "amd64",
        bootID: randomUUID(),
        containerRuntimeVersion: "kwok",
        kernelVersion: "kwok",
        kubeProxyVersion: "v1.34.4",
        kubeletVersion: "v1.34.4",
        machineID: n.name,
        operatingSystem: "linux",
        osImage: "kwok",
        systemUUID: n.name,
      },
    },
  };
}

/** The API relay: 10.77.0.1:6443 (lab bridge) → the API server on loopback. */
function startRelay(target: number): Promise<{ server: Server; stop(): Promise<void> }> {
  const socks = new Set<Socket>();
  const server = createServer((c) => {
    const u = connect({ host: "127.0.0.1", port: target });
    socks.add(c).add(u);
    c.setNoDelay(true);
    u.setNoDelay(true);
    c.pipe(u).pipe(c);
    const end = () => {
      c.destroy();
      u.destroy();
      socks.delete(c);
      socks.delete(u);
    };
    c.on("error", end).on("close", end);
    u.on("error", end).on("close", end);
  });
  return new Promise((res, rej) => {
    server.once("error", rej);
    server.listen(API_PORT, HOST_IP, () =>
      res({
        server,
        stop: () =>
          new Promise<void>((r) => {
            for (const s of socks) s.destroy();
            server.close(() => r());
          }),
      }),
    );
  });
}

export class Lab {
  readonly state: LabState;
  nodes: LabNode[] = [];
  cp!: ControlPlane;
  kc!: KubeConfig;
  core!: CoreV1Api;
  apps!: AppsV1Api;
  storage!: StorageV1Api;
  custom!: CustomObjectsApi;
  coord!: CoordinationV1Api;
  brokers = "";
  readonly opts: LabOptions;
  private relay?: { stop(): Promise<void> };
  private stopped = false;
  private readonly log: (line: string) => void;

  private constructor(opts: LabOptions) {
    this.opts = opts;
    this.state = emptyState();
    this.log = opts.log ?? (() => undefined);
  }

  private save(): void {
    writeState(this.state);
  }

  node(name: string): LabNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`lab: no node ${name} (nodes: ${this.nodes.map((x) => x.name).join(", ")})`);
    return n;
  }

  /** Bring the lab up. Throws (after tearing down what was made) on failure. */
  static async up(opts: LabOptions = {}): Promise<Lab> {
    const n = Math.min(7, Math.max(1, opts.nodes ?? 3));
    const prev = readState();
    if (prev) {
      if (prev.controller && procAlive(prev.controller) && prev.controller.pid !== process.pid)
        throw new Error(
          `lab: already up (controller pid ${prev.controller.pid}); run "fastfence lab down" first`,
        );
      teardownFromState(prev);
    }
    const lab = new Lab(opts);
    try {
      await lab.build(n);
      return lab;
    } catch (err) {
      lab.state.phase = "failed";
      lab.state.error = err instanceof Error ? err.message : String(err);
      lab.save();
      await lab.down().catch(() => undefined);
      throw err;
    }
  }

  private async build(n: number): Promise<void> {
    const t0 = Date.now();
    const s = this.state;
    s.controller = record(process.pid, "lab-controller", false);
    mkdirSync(LAB_RUN, { recursive: true });
    s.dirs.push(LAB_RUN);
    s.bridge = BRIDGE;
    this.save();
    await createBridge();
    const kinds: BmcKind[] = Array.from({ length: n }, (_, i) =>
      this.opts.bmc === "ipmi"
        ? "ipmi"
        : this.opts.bmc === "redfish"
          ? "redfish"
          : i % 2 === 0
            ? "ipmi"
            : "redfish",
    );
    for (let i = 0; i < n; i++) {
      const name = NODE_NAMES[i]!;
      const rec: NodeRecord = {
        name,
        index: i,
        netns: netnsName(name),
        veth: vethName(i),
        ip: nodeIp(i),
        bmc: kinds[i]!,
        bmcPort: kinds[i] === "ipmi" ? 6230 + i : 8000 + i,
        dir: join(LAB_RUN, name),
      };
      s.netns.push(rec.netns);
      s.veths.push(rec.veth);
      s.nodes.push(rec);
      this.save();
      await createNodeNet(rec.netns, rec.veth, rec.ip);
      mkdirSync(rec.dir, { recursive: true });
      this.nodes.push({ ...rec, startScript: join(rec.dir, "start.sh"), powerLog: [] });
    }
    this.log(`network: bridge ${BRIDGE} ${HOST_IP}/24, ${n} node namespaces (${Date.now() - t0} ms)`);

    const cmArgs = this.opts.controllerManagerArgs ?? [];
    const [cp, brokerCmds] = await Promise.all([
      startControlPlane({
        controllerManager: true,
        scheduler: true,
        controllerManagerArgs: cmArgs,
        apiserverArgs: this.opts.apiserverArgs ?? [],
      }),
      prepareBrokers(this.nodes.map((x) => ({ id: x.index + 1, ip: x.ip, dir: join(x.dir, "kafka") }))),
    ]);
    this.cp = cp;
    s.dirs.push(cp.dir);
    for (const p of [cp.etcd, cp.apiserver, cp.controllerManager, cp.scheduler])
      if (p) s.procs.push(record(p.pid, p.name));
    this.save();
    this.log(`control plane up (${Date.now() - t0} ms): ${cp.server}`);
    this.kc = cp.kubeConfig;
    this.core = makePooledApiClient(this.kc, CoreV1Api);
    this.apps = makePooledApiClient(this.kc, AppsV1Api);
    this.storage = makePooledApiClient(this.kc, StorageV1Api);
    this.custom = makePooledApiClient(this.kc, CustomObjectsApi);
    this.coord = makePooledApiClient(this.kc, CoordinationV1Api);
    const apiPort = Number(new URL(cp.server).port);
    this.relay = await startRelay(apiPort);
    s.ports.api = API_PORT;
    s.kubeconfig = cp.kubeconfigPath;
    const nodeKc = join(LAB_RUN, "node.kubeconfig");
    writeFileSync(nodeKc, nodeKubeconfig(cp), { mode: 0o600 });

    await applyObjects(this.kc, [
      ...readManifests(join(ROOT, "knative/base/crds")),
      ...readManifests(join(THIRD_PARTY_CRDS, "kubevirt.io")),
    ]);
    await this.core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    for (const x of this.nodes) {
      const obj = nodeObject(x);
      await this.core.createNode({ body: obj });
      // The create drops status; write it (retrying: the controller-manager edits new nodes).
      await waitUntil(
        `${x.name} status`,
        async () => {
          const cur = await this.core.readNode({ name: x.name });
          cur.status = { ...cur.status, ...obj.status };
          await this.core.replaceNodeStatus({ name: x.name, body: cur });
          return true;
        },
        10_000,
        50,
      );
    }
    this.brokers = bootstrapOf(this.nodes.map((x) => ({ id: x.index + 1, ip: x.ip, dir: "" })));
    s.brokers = this.brokers;

    // BMC credentials and the fencing policy.
    const policyNodes: NonNullable<NonNullable<FencingPolicySpecInput["fencing"]>["nodes"]> = [];
    for (const x of this.nodes) {
      const password = `pw${Math.random().toString(36).slice(2, 12)}`;
      const username = x.bmc === "ipmi" ? "admin" : "fence";
      await this.core.createNamespacedSecret({
        namespace: NAMESPACE,
        body: { metadata: { name: `bmc-${x.name}` }, stringData: { username, password } },
      });
      if (x.bmc === "ipmi") x.ipmiPassword = password;
      policyNodes.push({
        nodeSelector: { names: [x.name] },
        levels: [
          x.bmc === "ipmi"
            ? {
                driver: "ipmi",
                address: `ipmi://${HOST_IP}:${x.bmcPort}`,
                credentialsSecret: `bmc-${x.name}`,
                timeoutMs: 5000,
                options: { cipherSuite: "3", pollMs: "100" },
              }
            : {
                driver: "redfish",
                address: `redfish+http://${HOST_IP}:${x.bmcPort}/redfish/v1/Systems/${x.name}`,
                credentialsSecret: `bmc-${x.name}`,
                timeoutMs: 5000,
              },
        ],
      });
      if (x.bmc === "redfish") {
        x.redfish = new LabRedfishServer({
          username,
          password,
          systemId: x.name,
          host: HOST_IP,
          port: x.bmcPort,
          sessions: true,
          initialPower: "Off",
          hooks: { powerOff: () => this.killNode(x, "bmc"), powerOn: () => this.startLauncher(x, "bmc") },
        });
        await x.redfish.start();
      }
    }
    const policy: FencingPolicySpecInput = {
      probe: { intervalMs: 100, timeoutMs: 150, observersPerNode: Math.min(2, Math.max(2, n - 1)) },
      suspicion: { missThreshold: 3, minSuspectMs: 250 },
      corroboration: { quorum: 2, evidenceWindowMs: 5000 },
      timeouts: { leaseDurationMs: 5000 },
      fencing: { retryBackoffMs: 500, nodes: policyNodes },
      ...this.opts.policy,
    };
    await this.custom.createClusterCustomObject({
      group: "fastfence.io",
      version: "v1alpha1",
      plural: "fencingpolicies",
      body: {
        apiVersion: "fastfence.io/v1alpha1",
        kind: "FencingPolicy",
        metadata: { name: "default" },
        spec: policy,
      },
    });

    // Node launch configs and start scripts.
    const agentOn = this.opts.fastfence ?? true;
    for (const x of this.nodes) {
      const agentCfg = join(x.dir, "agent-config.json");
      writeFileSync(
        agentCfg,
        JSON.stringify({
          node: x.name,
          ip: x.ip,
          dir: x.dir,
          kubeconfig: nodeKc,
          brokers: this.brokers,
          brokerCount: n,
          namespace: NAMESPACE,
          controlPort: AGENT_PORT,
        }),
      );
      const nodeEnv = {
        NODE_OPTIONS: "--disable-warning=TimeoutNegativeWarning --disable-warning=ExperimentalWarning",
        FASTFENCE_LOG_LEVEL: process.env.FASTFENCE_LAB_LOG_LEVEL ?? "warn",
      };
      const launcherCfg = {
        node: x.name,
        ip: x.ip,
        dir: x.dir,
        listenerPort: KUBELET_PORT,
        api: {
          host: HOST_IP,
          port: API_PORT,
          ca: cp.pki.caCert,
          cert: cp.pki.adminCert,
          key: cp.pki.adminKey,
          servername: "kubernetes",
        },
        processes: [
          { name: "kafka", argv: brokerCmds.get(x.index + 1)! },
          {
            name: "kwok",
            argv: [
              join(ROOT, ".cache/bin/kwok"),
              `--kubeconfig=${nodeKc}`,
              `--manage-single-node=${x.name}`,
              `--node-lease-duration-seconds=${this.opts.kwokLeaseSeconds ?? 40}`,
            ],
          },
          ...(agentOn
            ? [
                {
                  name: "agent",
                  argv: [process.execPath, join(ROOT, "lab/node-agent.ts"), agentCfg],
                  env: nodeEnv,
                },
              ]
            : []),
        ],
      };
      const lcPath = join(x.dir, "launcher.json");
      writeFileSync(lcPath, JSON.stringify(launcherCfg));
      writeFileSync(
        x.startScript,
        `#!/bin/sh\n# Power-on of lab node ${x.name}: its launcher as PID 1 of a new PID namespace inside ${x.netns}.\n` +
          `# Dies with its parent (the BMC).\n` +
          `[ -z "$FFLAB_PDEATH" ] && FFLAB_PDEATH=1 exec setpriv --pdeathsig KILL -- "$0" "$@"\n` +
          `# A SIGTERM (teardown) takes the node down at once: unshare ignores SIGTERM while its\n` +
          `# child lives, so SIGKILL it (its child, PID 1, dies with it).\n` +
          `setpriv --pdeathsig KILL -- ip netns exec ${x.netns} unshare -p -f --kill-child=SIGKILL -m -u --mount-proc ` +
          `env NODE_OPTIONS="${nodeEnv.NODE_OPTIONS}" ${process.execPath} ${join(ROOT, "lab/launcher.ts")} ${lcPath} &\n` +
          `child=$!\ntrap 'kill -KILL $child' TERM INT HUP\nwait $child\nwait $child\n`,
      );
      chmodSync(x.startScript, 0o755);
    }

    // Power on. Both kinds of BMC switch a node through the lab (startLauncher / killNode):
    // the Redfish emulator by hooks, ipmi_sim through its chassis_control program.
    await this.startPowerEndpoint();
    for (const x of this.nodes) {
      if (x.bmc === "ipmi") {
        await this.startIpmiSim(x);
        await this.startLauncher(x, "lab");
      } else {
        x.redfish!.power = "PoweringOn";
        await this.startLauncher(x, "lab");
        x.redfish!.power = "On";
      }
    }
    this.log(
      `nodes powered on (${Date.now() - t0} ms); waiting for kwok, brokers${agentOn ? ", agents" : ""}`,
    );
    await waitUntil(
      "all nodes Ready",
      async () => {
        const nodes = (await this.core.listNode()).items;
        return (
          nodes.filter((o) => o.status?.conditions?.find((c) => c.type === "Ready")?.status === "True")
            .length === n
        );
      },
      90_000,
    );
    await waitUntil("Kafka brokers", async () => (await this.kafkaMeta()).brokers === n, 120_000, 500);
    if (agentOn)
      await waitUntil(
        "node agents ready",
        async () => this.nodes.every((x) => this.agentStatus(x)?.ready === true),
        120_000,
        300,
      );
    await this.waitLeadersBalanced();
    if (this.opts.workloads ?? true) await this.createDefaultWorkloads();
    s.phase = "ready";
    this.save();
    this.log(`lab ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  private async startIpmiSim(x: LabNode): Promise<void> {
    const serialPort = await freePort();
    const conf = join(x.dir, "lan.conf");
    // ipmi_sim runs this for every chassis power request ("get power", "set power 0|1")
    // and answers from it: the node's power is whether its processes run, switched at
    // once by the lab (startcmd would only act on ipmi_sim's 1 s timer, twice).
    const chassis = join(x.dir, "chassis.sh");
    const url = `http://127.0.0.1:${this.powerPort}/power/${x.name}`;
    writeFileSync(
      chassis,
      `#!/bin/sh\n# ipmi_sim chassis_control for lab node ${x.name}: power through the lab's power endpoint.\n` +
        `case "$1 $2" in\n` +
        `  "get power") v=$(curl -sf --max-time 5 ${url}) || exit 1; echo "power:$v" ;;\n` +
        `  "set power") if [ "$3" = 0 ]; then a=off; else a=on; fi; curl -sf --max-time 10 -X POST ${url}/$a >/dev/null ;;\n` +
        `  *) exit 1 ;;\nesac\n`,
    );
    chmodSync(chassis, 0o755);
    writeFileSync(
      conf,
      `name "ff${x.index}"
set_working_mc 0x20
  startlan 1
    addr ${HOST_IP} ${x.bmcPort}
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcde${x.index}
  endlan
  serial 15 127.0.0.1 ${serialPort} codec VM
  user 1 true  ""  "test" user 10 none md2 md5 straight
  user 2 true  "admin" "${x.ipmiPassword}" admin 10 none md2 md5 straight
chassis_control "${chassis}"
`,
      { mode: 0o600 },
    );
    const emu = join(x.dir, "sim.emu");
    writeFileSync(
      emu,
      "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nsel_enable 0x20 1000 0x0a\nmc_enable 0x20\n",
    );
    mkdirSync(join(x.dir, "ipmi-state"), { recursive: true });
    x.ipmi = ManagedProcess.spawn({
      name: `ipmi_sim-${x.name}`,
      command: "ipmi_sim",
      args: ["-c", conf, "-f", emu, "-s", join(x.dir, "ipmi-state"), "-n"],
      dir: x.dir,
    });
    this.state.procs.push(record(x.ipmi.pid, x.ipmi.name));
    this.save();
    await waitUntil(`ipmi_sim ${x.name}`, async () => (await this.ipmiPower(x)) !== undefined, 15_000, 300);
  }

  private powerServer?: HttpServer;
  private powerPort = 0;
  /**
   * The power switch of IPMI nodes, for ipmi_sim's chassis_control program (127.0.0.1
   * only): GET /power/<node> → 1|0 (its launcher runs), POST /power/<node>/on|off. Every
   * action is recorded in the node's power log (the invariant checker's ground truth), as
   * "lab" when the lab itself asked the BMC (resets), else "bmc".
   */
  private async startPowerEndpoint(): Promise<void> {
    const server = createHttpServer((req, res) => {
      const m = /^\/power\/([^/]+)(?:\/(on|off))?$/.exec(req.url ?? "");
      const x = m ? this.nodes.find((n) => n.name === m[1]) : undefined;
      if (!m || !x) return void res.writeHead(404).end();
      if (req.method === "GET" && !m[2]) return void res.end(x.launcher?.running ? "1" : "0");
      if (req.method !== "POST" || !m[2]) return void res.writeHead(405).end();
      const by = x.labAction ? "lab" : "bmc";
      (m[2] === "off" ? this.killNode(x, by) : this.startLauncher(x, by)).then(
        () => res.end("ok"),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.powerServer = server;
    this.powerPort = (server.address() as { port: number }).port;
  }

  async ipmitool(x: LabNode, args: string[]): Promise<string> {
    return await new Promise((res, rej) => {
      import("node:child_process").then(({ execFile }) =>
        execFile(
          "ipmitool",
          [
            "-I",
            "lanplus",
            "-C",
            "3",
            "-H",
            HOST_IP,
            "-p",
            String(x.bmcPort),
            "-U",
            "admin",
            "-E",
            "-N",
            "1",
            "-R",
            "2",
            ...args,
          ],
          { env: { ...process.env, IPMI_PASSWORD: x.ipmiPassword ?? "" }, timeout: 10_000 },
          (err, stdout) => (err ? rej(err) : res(stdout)),
        ),
      );
    });
  }

  private async ipmiPower(x: LabNode): Promise<"On" | "Off" | undefined> {
    const out = await this.ipmitool(x, ["chassis", "power", "status"]);
    return /Power is on/.test(out) ? "On" : /Power is off/.test(out) ? "Off" : undefined;
  }

  /** Power state as the node's BMC reports it. */
  async powerState(name: string): Promise<string> {
    const x = this.node(name);
    if (x.redfish) return x.redfish.power;
    for (let i = 0; i < 3; i++) {
      try {
        const p = await this.ipmiPower(x);
        if (p) return p;
      } catch {
        await sleep(300);
      }
    }
    return "Unknown";
  }

  /** Power-on (Redfish emulator hook, or the lab starting a Redfish node). */
  private async startLauncher(x: LabNode, by: "bmc" | "lab"): Promise<void> {
    if (x.launcher?.running) return;
    x.launcher = ManagedProcess.spawn({
      name: `node-${x.name}`,
      command: x.startScript,
      args: [],
      dir: x.dir,
      logFile: "launcher.log",
    });
    x.powerLog.push({ at: Date.now(), action: "on", by });
    this.state.procs = this.state.procs.filter((p) => p.name !== `node-${x.name}` || procAlive(p));
    this.state.procs.push(record(x.launcher.pid, `node-${x.name}`));
    this.save();
  }

  /** Power-off (Redfish hook): SIGKILL every process of the node's namespace, wait until gone. */
  private async killNode(x: LabNode, by: "bmc" | "lab"): Promise<void> {
    x.powerLog.push({ at: Date.now(), action: "off", by });
    for (let i = 0; i < 100; i++) {
      const pids = pidsInNetns(x.netns);
      if (pids.length === 0) break;
      signalPids(pids, "SIGKILL");
      signalPids(pids, "SIGCONT");
      await sleep(20);
    }
    await x.launcher?.waitExit();
  }

  /** Processes of the node inside its PID namespace (host pids), launcher (ns pid 1) first. */
  nodePids(name: string): { launcher?: number; others: number[]; wrappers: number[] } {
    const x = this.node(name);
    const out: { launcher?: number; others: number[]; wrappers: number[] } = { others: [], wrappers: [] };
    for (const pid of pidsInNetns(x.netns)) {
      const chain = nsPids(pid);
      if (chain.length < 2) out.wrappers.push(pid);
      else if (chain[chain.length - 1] === 1) out.launcher = pid;
      else out.others.push(pid);
    }
    return out;
  }

  /** crash: SIGKILL every process of the node; the "hardware" (launcher) and power stay on. */
  async crash(name: string): Promise<number> {
    const t0 = Date.now();
    const x = this.node(name);
    for (let i = 0; i < 50; i++) {
      const { others } = this.nodePids(x.name);
      if (others.length === 0) break;
      signalPids(others, "SIGKILL");
      await sleep(10);
    }
    this.note(x, "crash", t0);
    return t0;
  }

  /** hang: SIGSTOP every process in the node's PID namespace (power stays On). */
  hang(name: string): number {
    const t0 = Date.now();
    const p = this.nodePids(name);
    signalPids([...(p.launcher ? [p.launcher] : []), ...p.others], "SIGSTOP");
    this.note(this.node(name), "hang", t0);
    return t0;
  }

  resume(name: string): number {
    const p = this.nodePids(name);
    signalPids([...(p.launcher ? [p.launcher] : []), ...p.others], "SIGCONT");
    return Date.now();
  }

  async partition(name: string): Promise<number> {
    const t0 = Date.now();
    await setLink(this.node(name).veth, false);
    this.note(this.node(name), "partition", t0);
    return t0;
  }

  async heal(name: string): Promise<number> {
    const x = this.node(name);
    await setLink(x.veth, true);
    await blackhole(x.netns, [HOST_IP, ...this.nodes.filter((o) => o !== x).map((o) => o.ip)], false);
    return Date.now();
  }

  /** Partial partition: "peers" = reaches the API (host) but no other node; "api" = the reverse. */
  async partialPartition(name: string, mode: "peers" | "api"): Promise<number> {
    const x = this.node(name);
    const t0 = Date.now();
    await blackhole(
      x.netns,
      mode === "peers" ? this.nodes.filter((o) => o !== x).map((o) => o.ip) : [HOST_IP],
      true,
    );
    this.note(x, `partial-partition-${mode}`, t0);
    return t0;
  }

  /** BMC faults. IPMI BMCs support only unreachable (ipmi_sim frozen). */
  async bmcFault(name: string, fault: BmcFault): Promise<void> {
    const x = this.node(name);
    if (x.redfish) {
      x.redfish.resetFaults();
      await x.redfish.setUnreachable(fault === "unreachable");
      if (fault === "slow") x.redfish.faults.latencyMs = 3000;
      if (fault === "lying") x.redfish.faults.lie = true;
      if (fault === "stuck") x.redfish.faults.stuckPoweringOff = true;
    } else if (x.ipmi) {
      if (fault !== "unreachable" && fault !== "none")
        throw new Error(`lab: the IPMI BMC of ${name} supports only "unreachable" and "none"`);
      try {
        process.kill(x.ipmi.pid, fault === "unreachable" ? "SIGSTOP" : "SIGCONT");
      } catch {
        // gone
      }
    }
    this.note(x, `bmc-${fault}`, Date.now());
  }

  /** Function-only crash on a (healthy) node: stop some function replicas / the event source. */
  async functionCrash(name: string, functions: string[], source = false): Promise<unknown> {
    const x = this.node(name);
    const r = await fetch(
      `http://${x.ip}:${AGENT_PORT}/crash?functions=${functions.join(",")}&source=${source ? 1 : 0}`,
      { method: "POST" },
    );
    this.note(x, "function-crash", Date.now());
    return await r.json();
  }

  /** Power the node on through its BMC (after a fence), e.g. between bench trials. */
  async powerOn(name: string): Promise<void> {
    const x = this.node(name);
    if (x.redfish) {
      if (x.redfish.power === "On" && x.launcher?.running) return;
      x.redfish.power = "PoweringOn";
      await this.startLauncher(x, "lab");
      x.redfish.power = "On";
    } else {
      x.labAction = true;
      try {
        for (let i = 0; i < 5; i++) {
          await this.ipmitool(x, ["chassis", "power", "on"]).catch(() => undefined);
          const deadline = Date.now() + 4000;
          while (Date.now() < deadline && this.nodePids(x.name).launcher === undefined) await sleep(100);
          if (this.nodePids(x.name).launcher !== undefined) break;
        }
        await sleep(100);
      } finally {
        x.labAction = false;
      }
    }
  }

  /** Power-cycle a crashed-but-unfenced node (lab reset). */
  async powerCycle(name: string): Promise<void> {
    const x = this.node(name);
    if (x.redfish) {
      x.redfish.power = "PoweringOff";
      await this.killNode(x, "lab");
      x.redfish.power = "Off";
    } else {
      x.labAction = true;
      try {
        await this.ipmitool(x, ["chassis", "power", "off"]);
        await waitUntil(
          "ipmi power off",
          async () => this.nodePids(x.name).launcher === undefined,
          10_000,
          100,
        );
      } finally {
        x.labAction = false;
      }
    }
    await this.powerOn(name);
  }

  readonly faults: { node: string; kind: string; at: number }[] = [];
  private note(x: LabNode, kind: string, at: number): void {
    this.faults.push({ node: x.name, kind, at });
  }

  agentStatus(
    x: LabNode,
  ): { ready: boolean; functions: string[]; source: boolean; readyAt?: string } | undefined {
    const p = join(x.dir, "agent.json");
    if (!existsSync(p)) return undefined;
    try {
      return JSON.parse(readFileSync(p, "utf8")) as { ready: boolean; functions: string[]; source: boolean };
    } catch {
      return undefined;
    }
  }

  /** Brokers alive and partition leaders per broker id (pipeline topics). */
  async kafkaMeta(): Promise<{ brokers: number; leaders: Record<number, number> }> {
    const kafka = new Kafka({
      brokers: this.brokers.split(","),
      clientId: "lab-meta",
      logLevel: logLevel.NOTHING,
      connectionTimeout: 1000,
      requestTimeout: 2000,
      retry: { retries: 1 },
    });
    const admin = kafka.admin();
    await admin.connect();
    try {
      const c = await admin.describeCluster();
      const topics = (await admin.listTopics()).filter((t) => t.startsWith("fastfence"));
      const leaders: Record<number, number> = {};
      if (topics.length) {
        const md = await admin.fetchTopicMetadata({ topics });
        for (const t of md.topics)
          for (const p of t.partitions) leaders[p.leader] = (leaders[p.leader] ?? 0) + 1;
      }
      return { brokers: c.brokers.length, leaders };
    } finally {
      await admin.disconnect();
    }
  }

  /** The node that hosts the most of the pipeline: most partition leaders (ties: first). */
  /**
   * Steady state before anything is measured: brokers that started late lead nothing until
   * Kafka's leader rebalance (every 5 s here) hands them their preferred partitions back;
   * a crash before that would take down most leaders at once, which a running cluster
   * never has. Waits up to 30 s for every broker to lead at least its share minus one.
   */
  async waitLeadersBalanced(timeoutMs = 30_000): Promise<void> {
    const t0 = Date.now();
    for (;;) {
      const { leaders } = await this.kafkaMeta().catch(() => ({ leaders: {} as Record<number, number> }));
      const counts = this.nodes.map((x) => leaders[x.index + 1] ?? 0);
      const total = counts.reduce((a, b) => a + b, 0);
      const share = Math.floor(total / this.nodes.length);
      if (total > 0 && counts.every((c) => c >= share - 1)) {
        this.log(`partition leaders balanced (${counts.join("/")}) in ${Date.now() - t0} ms`);
        return;
      }
      if (Date.now() - t0 > timeoutMs) {
        this.log(`partition leaders still unbalanced after ${timeoutMs} ms (${counts.join("/")}); going on`);
        return;
      }
      await sleep(1000);
    }
  }

  async busiestNode(): Promise<string> {
    const { leaders } = await this.kafkaMeta();
    let best = this.nodes[0]!;
    for (const x of this.nodes) if ((leaders[x.index + 1] ?? 0) > (leaders[best.index + 1] ?? 0)) best = x;
    return best.name;
  }

  private async createDefaultWorkloads(): Promise<void> {
    const { createWorkloads } = await import("./workloads.ts");
    await createWorkloads(this, "", this.nodes[0]!.name, { webReplicas: this.nodes.length });
  }

  async status(): Promise<Record<string, unknown>> {
    const nodes = this.cp ? (await this.core.listNode()).items : [];
    const out = [];
    for (const x of this.nodes) {
      const o = nodes.find((k) => k.metadata?.name === x.name);
      const p = this.nodePids(x.name);
      out.push({
        name: x.name,
        ip: x.ip,
        bmc: `${x.bmc} ${HOST_IP}:${x.bmcPort}`,
        power: await this.powerState(x.name),
        processes: p.others.length + (p.launcher ? 1 : 0),
        ready: o?.status?.conditions?.find((c) => c.type === "Ready")?.status ?? "?",
        bootId: o?.status?.nodeInfo?.bootID?.slice(0, 8),
        taints: (o?.spec?.taints ?? []).map((t) => t.key),
        agent: this.agentStatus(x)?.ready ? "ready" : "-",
      });
    }
    return {
      phase: this.state.phase,
      api: `https://${HOST_IP}:${API_PORT} (relay to ${this.cp?.server})`,
      kubeconfig: this.cp?.kubeconfigPath,
      brokers: this.brokers,
      nodes: out,
    };
  }

  /** Tear everything down (idempotent). */
  async down(): Promise<string[]> {
    if (this.stopped) return [];
    this.stopped = true;
    this.state.phase = "stopping";
    this.save();
    for (const x of this.nodes) await x.redfish?.stop().catch(() => undefined);
    await this.relay?.stop().catch(() => undefined);
    for (const x of this.nodes) {
      if (x.ipmi) process.kill(x.ipmi.pid, "SIGCONT");
    }
    this.powerServer?.close();
    this.powerServer?.closeAllConnections();
    if (process.env.FASTFENCE_LAB_KEEP_LOGS) {
      const { cpSync, readdirSync } = await import("node:fs");
      const keep = join(ROOT, ".cache", "lab-logs");
      for (const x of this.nodes)
        for (const f of existsSync(x.dir) ? readdirSync(x.dir).filter((f) => f.endsWith(".log")) : [])
          cpSync(join(x.dir, f), join(keep, x.name, f));
      for (const x of this.nodes) {
        const brokerLog = join(x.dir, "kafka", "kafka.log"); // the broker's own log4j file
        if (existsSync(brokerLog)) cpSync(brokerLog, join(keep, x.name, "broker.log"));
      }
    }
    // Nodes first (their processes), then the control plane.
    const s = { ...this.state, controller: undefined };
    for (const x of this.nodes) {
      await x.ipmi?.kill().catch(() => undefined);
      await x.launcher?.kill().catch(() => undefined);
    }
    await this.cp?.stop().catch(() => undefined);
    return teardownFromState(s);
  }
}
