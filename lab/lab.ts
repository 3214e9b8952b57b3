// The lab: a simulated compact bare-metal cluster on one machine, and its controller
// object. This module orchestrates; the parts do the work: topology.ts (bridge, node
// namespaces), control-plane.ts (etcd, kube-apiserver, controller-manager, scheduler on
// the host; CRDs and Node objects) or compact-plane.ts (one of each on each of the first
// three nodes), api-lb.ts (the API endpoint 10.77.0.1:6443 the nodes and the lab use),
// kafka.ts (one broker per node), node-launch.ts (what a node runs at power-on: its
// launcher as PID 1 of its own PID namespace, with kwok, the kubelet-port listener, the
// broker and the node agent), bmc.ts (a Redfish emulator or ipmi_sim per node and the
// power switch) and faults.ts (crash, proc-crash, hang/resume, partition/heal, partial
// partitions, BMC faults, function-only crash; the link per link-state.ts). Everything made is recorded in .cache/lab/state.json
// first (state.ts), so any process can tear it down. One lab per machine: it claims the
// machine before making anything (machine-claim.ts). It never touches a namespace, link
// or process that is not a lab's own and sends traffic only to loopback and to the lab's
// own namespaces.
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  StorageV1Api,
  type KubeConfig,
} from "@kubernetes/client-node";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { agentLogTails, keepNodeLogs } from "./keep-logs.ts";
import { claimMachine, releaseMachine } from "./machine-claim.ts";
import { join } from "node:path";
import type { FencingPolicySpecInput } from "../core/policy.ts";
import { timedStart } from "../harness/env/start-times.ts";
import { WaitAbandoned, waitUntil } from "../harness/env/wait.ts";
import { createBmcSecret, createFencingPolicy, redfishLevel } from "../harness/kube/fencing-policy.ts";
import { makePooledApiClient } from "../infra/kube/pooled-auth.ts";
import { LabBmcs, type BmcCreds } from "./bmc.ts";
import { API_LB_OPENSHIFT, startApiLb, type ApiLb } from "./api-lb.ts";
import { compactProcesses, makeCompactPlane, membersOf, NODE_API_PORT } from "./compact-plane.ts";
import { seedCluster, startLabControlPlane, writeNodeKubeconfig, type LabApi } from "./control-plane.ts";
import { markSeeded, SEEDED_GATE, waitCompactPlane } from "./cp-status.ts";
import { labStatus } from "./status.ts";
import { agentStartLine, agentsNotReady, nodesNotReady } from "./node-ready.ts";
import * as faults from "./faults.ts";
import {
  bootstrapOf,
  chooseVictim,
  kafkaMeta,
  prepareBrokers,
  waitLeadersBalanced,
  type VictimChoice,
} from "./kafka.ts";
import { writeNodeLaunch } from "./node-launch.ts";
import { labArtifact } from "./artifact.ts";
import { EmulatedWatchdog, LAB_WATCHDOG_LEVEL, labWatchdogConfig, startLabWatchdogs } from "./watchdog.ts";
import {
  BRIDGE,
  HOST_IP,
  LAB_RUN,
  ROOT,
  clearForNewLab,
  emptyState,
  record,
  teardownFromState,
  writeState,
  type LabState,
} from "./state.ts";
import { buildNetwork, nodeProcesses, type NodeProcesses } from "./topology.ts";
import { LAB_TIMEOUTS } from "./timeouts.ts";
import {
  API_PORT,
  type AgentStatus,
  type BmcFault,
  type FaultNote,
  type LabNode,
  type LabOptions,
} from "./types.ts";

export * from "./types.ts";
export { LAB_TIMEOUTS, SLOW_BMC_TIMEOUTS, type LabTimeouts } from "./timeouts.ts";

export class Lab {
  readonly state: LabState;
  nodes: LabNode[] = [];
  cp!: LabApi;
  kc!: KubeConfig;
  core!: CoreV1Api;
  apps!: AppsV1Api;
  storage!: StorageV1Api;
  custom!: CustomObjectsApi;
  coord!: CoordinationV1Api;
  brokers = "";
  readonly opts: LabOptions;
  readonly faults: FaultNote[] = [];
  private readonly bmcs: LabBmcs;
  /** The API endpoint on the bridge (api-lb.ts). */
  lb?: ApiLb;
  private watchdogs = new Map<string, EmulatedWatchdog>();
  private stopped = false;
  /** Progress lines (the lab's own and its tools'). */
  readonly log: (line: string) => void;

  private constructor(opts: LabOptions) {
    this.opts = opts;
    this.state = emptyState();
    this.log = opts.log ?? (() => undefined);
    this.bmcs = new LabBmcs(this);
  }

  save(): void {
    writeState(this.state);
  }

  /** BmcContext: a power switch resets the node's emulated watchdog, as a real one. */
  powerSwitched(x: LabNode): void {
    this.watchdogs.get(x.name)?.powerReset();
  }

  node(name: string): LabNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`lab: no node ${name} (nodes: ${this.nodes.map((x) => x.name).join(", ")})`);
    return n;
  }

  /** Bring the lab up. Throws (after tearing down what was made) on failure. */
  static async up(opts: LabOptions = {}): Promise<Lab> {
    const n = Math.min(7, Math.max(1, opts.nodes ?? 3));
    // First the machine (LabBusyError if another lab runs: then nothing here is touched).
    await claimMachine(ROOT);
    try {
      clearForNewLab(opts.log);
    } catch (err) {
      await releaseMachine();
      throw err;
    }
    const lab = new Lab(opts);
    try {
      await timedStart("lab", `${n} nodes`, () => lab.build(n));
      return lab;
    } catch (err) {
      lab.state.phase = "failed";
      lab.state.error = err instanceof Error ? err.message : String(err);
      lab.save();
      for (const l of agentLogTails(lab.nodes)) lab.log(l);
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
    this.nodes = await buildNetwork(s, () => this.save(), n, this.opts.bmc);
    this.log(`network: bridge ${BRIDGE} ${HOST_IP}/24, ${n} node namespaces (${Date.now() - t0} ms)`);

    const compact = this.opts.controlPlane === "compact";
    const [cp, brokerCmds] = await Promise.all([
      compact ? makeCompactPlane(this.nodes) : startLabControlPlane(this.opts, s, () => this.save()),
      prepareBrokers(this.nodes.map((x) => ({ id: x.index + 1, ip: x.ip, dir: join(x.dir, "kafka") }))),
    ]);
    this.cp = cp;
    this.log(`control plane ${compact ? "PKI made" : "up"} (${Date.now() - t0} ms): ${cp.server}`);
    this.kc = cp.kubeConfig;
    this.core = makePooledApiClient(this.kc, CoreV1Api);
    this.apps = makePooledApiClient(this.kc, AppsV1Api);
    this.storage = makePooledApiClient(this.kc, StorageV1Api);
    this.custom = makePooledApiClient(this.kc, CustomObjectsApi);
    this.coord = makePooledApiClient(this.kc, CoordinationV1Api);
    this.lb = compact
      ? await startApiLb(
          membersOf(this.nodes).map((x) => ({ host: x.ip, port: NODE_API_PORT, name: x.name })),
          API_LB_OPENSHIFT,
        )
      : await startApiLb([{ host: "127.0.0.1", port: Number(new URL(cp.server).port), name: "host" }]);
    s.ports.api = API_PORT;
    s.kubeconfig = cp.kubeconfigPath;
    const nodeKubeconfig = writeNodeKubeconfig(cp);
    this.brokers = bootstrapOf(this.nodes.map((x) => ({ id: x.index + 1, ip: x.ip, dir: "" })));
    s.brokers = this.brokers;
    const creds = await this.bmcs.prepare(this.opts.secondLevel ?? false);
    const seed = async () => {
      s.access = await seedCluster(cp, this.core, this.nodes, this.log);
      await this.seedFencing(n, creds);
    };
    if (!compact) await seed();

    const agent = this.opts.fastfence ?? true;
    const artifact = (s.artifact = labArtifact(this.log)); // what the node agents run
    if (this.opts.watchdog && agent) this.watchdogs = startLabWatchdogs(this, this.log);
    for (const x of this.nodes)
      writeNodeLaunch(x, {
        artifact: artifact.dir,
        ...(this.opts.watchdog && agent ? { watchdog: labWatchdogConfig(x) } : {}),
        ...(compact && "saPki" in cp
          ? { controlPlane: compactProcesses(x, this.nodes, cp.saPki, this.opts), gate: SEEDED_GATE }
          : {}),
        cp,
        nodeKubeconfig,
        brokers: this.brokers,
        brokerCount: n,
        brokerArgv: brokerCmds.get(x.index + 1)!,
        agent,
        kwokLeaseSeconds: this.opts.kwokLeaseSeconds ?? 40,
      });

    // Power on. Both kinds of BMC switch a node through the lab (startLauncher / killNode):
    // the Redfish emulator by hooks, ipmi_sim through its chassis_control program.
    await this.bmcs.powerOnAll();
    if (compact) {
      await waitCompactPlane(this, 180_000);
      this.log(`compact control plane up (${Date.now() - t0} ms); seeding`);
      await seed();
      await markSeeded(this.core);
    }
    this.log(`nodes powered on (${Date.now() - t0} ms); waiting for kwok, brokers${agent ? ", agents" : ""}`);
    await this.waitHealthy(n, agent);
    s.phase = "ready";
    this.save();
    this.log(`lab ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }

  /** The BMC Secrets and the fencing policy naming every BMC. */
  private async seedFencing(n: number, creds: Map<string, BmcCreds>): Promise<void> {
    const t = this.opts.timeouts ?? LAB_TIMEOUTS;
    const policyNodes: NonNullable<NonNullable<FencingPolicySpecInput["fencing"]>["nodes"]> = [];
    for (const x of this.nodes) {
      const { username, password } = creds.get(x.name)!;
      await createBmcSecret(this.core, x.name, username, password);
      policyNodes.push({
        nodeSelector: { names: [x.name] },
        levels: [
          x.bmc === "ipmi"
            ? {
                driver: "ipmi",
                address: `ipmi://${HOST_IP}:${x.bmcPort}`,
                credentialsSecret: `bmc-${x.name}`,
                timeoutMs: t.ipmiLevelMs,
                options: { cipherSuite: "3", pollMs: "100" },
              }
            : { ...redfishLevel(HOST_IP, x.bmcPort, x.name), timeoutMs: t.redfishLevelMs },
          ...(this.opts.secondLevel && x.bmc === "redfish"
            ? [await this.bmcs.secondLevel(x, this.core, t.ipmiLevelMs)]
            : []),
        ],
        // with emulated watchdogs: the watchdog level after the BMC level (docs/lab.md)
        ...(this.opts.watchdog && (this.opts.fastfence ?? true)
          ? { watchdog: { ...LAB_WATCHDOG_LEVEL } }
          : {}),
      });
    }
    await createFencingPolicy(this.custom, {
      probe: { intervalMs: 100, timeoutMs: 150, observersPerNode: Math.min(2, Math.max(2, n - 1)) },
      suspicion: { missThreshold: 3, minSuspectMs: 250 },
      corroboration: { quorum: 2, evidenceWindowMs: 5000 },
      timeouts: { bmcCallTimeoutMs: t.bmcCallMs, powerOffTimeoutMs: t.roundMs, leaseDurationMs: t.leaseMs },
      fencing: { retryBackoffMs: 500, nodes: policyNodes },
      ...this.opts.policy,
    });
  }

  /** Nodes Ready, brokers up, agents ready (if any), leaders balanced, default workloads Running (made meanwhile). */
  private async waitHealthy(n: number, agent: boolean): Promise<void> {
    const t0 = Date.now();
    const ready = async () => {
      const notReady = nodesNotReady(
        (await this.core.listNode()).items,
        this.nodes.map((x) => x.name),
      );
      if (notReady.length) throw new Error(`not Ready: ${notReady.join("; ")}`);
      return true;
    };
    await waitUntil("all nodes Ready", ready, 90_000, 200, "lab: ");
    const brokersUp = async () => (await this.kafkaMeta()).brokers === n;
    await waitUntil("Kafka brokers", brokersUp, 120_000, 500, "lab: ");
    this.log(`nodes Ready and ${n} Kafka brokers up (${Date.now() - t0} ms)`);
    const workloads = (this.opts.workloads ?? true) && this.createDefaultWorkloads();
    if (workloads) workloads.catch(() => undefined); // awaited below, after the agents' wait
    if (agent) await this.waitAgents();
    await Promise.all([this.waitLeadersBalanced(), workloads]);
  }

  private async waitAgents(): Promise<void> {
    // Each agent creates topics and ACLs, then starts its replicas. An agent that gave up
    // ends the wait at once with its reason; a slow one is named with its step and pending replicas.
    const agents = () => this.nodes.map((x) => ({ name: x.name, status: this.agentStatus(x) }));
    const agentsReady = async () => {
      const failed = agents().find((a) => a.status?.failed);
      if (failed) throw new WaitAbandoned(`node agent of ${failed.name} failed at ${failed.status!.failed}`);
      const waiting = agentsNotReady(agents());
      if (waiting.length) throw new Error(waiting.join("; "));
      return true;
    };
    await waitUntil("node agents ready", agentsReady, 180_000, 300, "lab: ");
    const lines = agents().map((a) => agentStartLine(a.name, a.status));
    this.log(`node agents ready: ${lines.join("; ")}`);
  }

  // ---- power (bmc.ts)
  /** Power state as the node's BMC reports it. */
  powerState(name: string): Promise<string> {
    return this.bmcs.powerState(this.node(name));
  }
  /** Power the node on through its BMC (after a fence), e.g. between bench trials. */
  powerOn(name: string): Promise<void> {
    return this.bmcs.powerOn(this.node(name));
  }
  /** Power-cycle a crashed-but-unfenced node (lab reset). */
  powerCycle(name: string): Promise<void> {
    return this.bmcs.powerCycle(this.node(name));
  }
  ipmitool(x: LabNode, args: string[]): Promise<string> {
    return this.bmcs.ipmitool(x, args);
  }

  // ---- faults (faults.ts; proc-crash is faults.procCrash)
  crash(name: string): Promise<number> {
    return faults.crash(this, name);
  }
  hang(name: string): number {
    return faults.hang(this, name);
  }
  resume(name: string): number {
    return faults.resume(this, name);
  }
  partition(name: string): Promise<number> {
    return faults.partition(this, name);
  }
  heal(name: string): Promise<number> {
    return faults.heal(this, name);
  }
  partialPartition(name: string, mode: "peers" | "api"): Promise<number> {
    return faults.partialPartition(this, name, mode);
  }
  bmcFault(name: string, fault: BmcFault, latencyMs?: number): Promise<void> {
    return faults.bmcFault(this, name, fault, latencyMs);
  }
  functionCrash(name: string, functions: string[], opts: faults.FunctionCrash = {}): Promise<unknown> {
    return faults.functionCrash(this, name, functions, opts);
  }

  // ---- what runs where

  /** Processes of the node inside its PID namespace (host pids), launcher (ns pid 1) first. */
  nodePids(name: string): NodeProcesses {
    return nodeProcesses(this.node(name).netns);
  }

  agentStatus(x: LabNode): AgentStatus | undefined {
    const p = join(x.dir, "agent.json");
    if (!existsSync(p)) return undefined;
    try {
      return JSON.parse(readFileSync(p, "utf8")) as AgentStatus;
    } catch {
      return undefined;
    }
  }

  /** Brokers alive and partition leaders per broker id (pipeline topics). */
  kafkaMeta(): Promise<{ brokers: number; leaders: Record<number, number> }> {
    return kafkaMeta(this.brokers);
  }
  /** Steady state before anything is measured (kafka.ts waitLeadersBalanced). */
  waitLeadersBalanced(timeoutMs = 30_000): Promise<void> {
    return waitLeadersBalanced(this.brokers, this.nodes, this.log, timeoutMs);
  }
  /** A trial's victim: the node hosting the most partition leaders, or the active KRaft controller's (kafka.ts chooseVictim). */
  chooseVictim(preferController: boolean): Promise<VictimChoice> {
    const dirs = this.nodes.map((x) => join(x.dir, "kafka"));
    return chooseVictim(this.brokers, this.nodes, dirs, preferController);
  }

  private async createDefaultWorkloads(): Promise<void> {
    const { createWorkloads } = await import("./workloads.ts");
    await createWorkloads(this, "", this.nodes[0]!.name, { webReplicas: this.nodes.length, log: this.log });
  }

  status(): Promise<Record<string, unknown>> {
    return labStatus(this);
  }

  /** Tear everything down (idempotent). */
  async down(): Promise<string[]> {
    if (this.stopped) return [];
    this.stopped = true;
    this.state.phase = "stopping";
    this.save();
    for (const w of this.watchdogs.values()) w.stop();
    await this.bmcs.stop();
    await this.lb?.stop().catch(() => undefined);
    if (process.env.FASTFENCE_LAB_KEEP_LOGS) keepNodeLogs(this.nodes);
    // Nodes first (their processes), then the control plane.
    const s = { ...this.state, controller: undefined };
    for (const x of this.nodes) {
      await x.ipmi?.kill().catch(() => undefined);
      await x.launcher?.kill().catch(() => undefined);
    }
    await this.cp?.stop().catch(() => undefined);
    const done = teardownFromState(s);
    await releaseMachine();
    return done;
  }
}
