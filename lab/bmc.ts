// BMC emulation for the lab nodes, on the host side of the bridge: the lab Redfish
// emulator (in this process) or OpenIPMI ipmi_sim per node, and the power switch both
// act through: power-on brings the node's link up (unless a partition cut it) and then
// starts its launcher; power-off takes the link down and SIGKILLs every process of the
// node's network namespace (an unpowered machine answers nothing). ipmi_sim asks for it
// through the power endpoint on 127.0.0.1 (its chassis_control program), the Redfish
// emulator through its hooks. Every action lands in the node's power log (the invariant
// checker's ground truth). It never signals a process outside a lab node's namespace, nor
// listens beyond the lab addresses.
import { execFile } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { join } from "node:path";
import { LabRedfishServer } from "../harness/emulators/redfish/server.ts";
import { sleep } from "../harness/env/base.ts";
import { ipmitoolArgs, writeIpmiSimFiles } from "../harness/env/ipmi-sim-config.ts";
import { freePort } from "../harness/env/ports.ts";
import { ManagedProcess } from "../harness/env/process.ts";
import { waitUntil } from "../harness/env/wait.ts";
import type { CoreV1Api } from "@kubernetes/client-node";
import { createBmcSecret, type FencingLevelInput } from "../harness/kube/fencing-policy.ts";
import { linkEvent } from "./faults.ts";
import { nodeProcesses } from "./topology.ts";
import { HOST_IP, pidsInNetns, procAlive, record, signalPids, type LabState } from "./state.ts";
import type { LabNode } from "./types.ts";

export interface BmcContext {
  nodes: LabNode[];
  state: LabState;
  save(): void;
  /**
   * The node's power was switched (after its processes are gone, or before its launcher
   * starts): what a real power switch resets besides the processes (the lab's emulated
   * watchdog, lab/watchdog.ts).
   */
  powerSwitched?(x: LabNode): void;
}

export interface BmcCreds {
  username: string;
  password: string;
}

export class LabBmcs {
  private readonly ctx: BmcContext;
  private powerServer?: HttpServer;
  private powerPort = 0;

  constructor(ctx: BmcContext) {
    this.ctx = ctx;
  }

  /**
   * Every node's BMC credentials, and the Redfish emulators started (no API needed: the
   * compact plane powers the nodes on before anything is written to the API).
   */
  async prepare(secondLevel: boolean): Promise<Map<string, BmcCreds>> {
    const creds = new Map<string, BmcCreds>();
    for (const x of this.ctx.nodes) {
      const password = `pw${Math.random().toString(36).slice(2, 12)}`;
      const username = x.bmc === "ipmi" ? "admin" : "fence";
      creds.set(x.name, { username, password });
      if (x.bmc === "ipmi") x.ipmiPassword = password;
      if (secondLevel && x.bmc === "redfish") {
        x.ipmiPort = 6230 + x.index;
        x.ipmiPassword = `pw${Math.random().toString(36).slice(2, 12)}`;
      }
      if (x.bmc === "redfish") await this.startRedfish(x, username, password);
    }
    return creds;
  }

  /** The Redfish emulator of a Redfish node on HOST_IP:bmcPort, powered Off. */
  async startRedfish(x: LabNode, username: string, password: string): Promise<void> {
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

  /**
   * A second level for a Redfish node (lab up --second-level): an ipmi_sim on UDP 6230+i
   * (started with the others by powerOnAll) that switches the same machine through the
   * power endpoint, with its own credentials Secret bmc-<node>-ipmi. Returns its level.
   */
  async secondLevel(x: LabNode, core: CoreV1Api, timeoutMs: number): Promise<FencingLevelInput> {
    x.ipmiPort ??= 6230 + x.index; // prepare() set both before the power-on
    x.ipmiPassword ??= `pw${Math.random().toString(36).slice(2, 12)}`;
    await createBmcSecret(core, `${x.name}-ipmi`, "admin", x.ipmiPassword);
    return {
      driver: "ipmi",
      address: `ipmi://${HOST_IP}:${x.ipmiPort}`,
      credentialsSecret: `bmc-${x.name}-ipmi`,
      timeoutMs,
      options: { cipherSuite: "3", pollMs: "100" },
    };
  }

  /** First power-on of every node (both kinds switch through startLauncher). */
  async powerOnAll(): Promise<void> {
    await this.startPowerEndpoint();
    for (const x of this.ctx.nodes) {
      if (x.bmc === "redfish" && x.ipmiPort) await this.startIpmiSim(x);
      if (x.bmc === "ipmi") {
        await this.startIpmiSim(x);
        await this.startLauncher(x, "lab");
      } else {
        x.redfish!.power = "PoweringOn";
        await this.startLauncher(x, "lab");
        x.redfish!.power = "On";
      }
    }
  }

  /**
   * The power switch of IPMI nodes, for ipmi_sim's chassis_control program (127.0.0.1
   * only): GET /power/<node> → 1|0 (its launcher runs), POST /power/<node>/on|off. Every
   * action is recorded in the node's power log (the invariant checker's ground truth), as
   * "lab" when the lab itself asked the BMC (resets), else "bmc".
   */
  private async startPowerEndpoint(): Promise<void> {
    const server = createHttpServer((req, res) => {
      const m = /^\/power\/([^/]+)(?:\/(on|off))?$/.exec(req.url ?? "");
      const x = m ? this.ctx.nodes.find((n) => n.name === m[1]) : undefined;
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

  private async startIpmiSim(x: LabNode): Promise<void> {
    const serialPort = await freePort();
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
    const args = writeIpmiSimFiles(
      x.dir,
      {
        name: `ff${x.index}`,
        host: HOST_IP,
        port: x.ipmiPort ?? x.bmcPort,
        guid: `a123456789abcdefa123456789abcde${x.index}`,
        serialPort,
        username: "admin",
        password: x.ipmiPassword ?? "",
        trailer: [`chassis_control "${chassis}"`],
      },
      "ipmi-state",
    );
    x.ipmi = ManagedProcess.spawn({ name: `ipmi_sim-${x.name}`, command: "ipmi_sim", args, dir: x.dir });
    this.ctx.state.procs.push(record(x.ipmi.pid, x.ipmi.name));
    this.ctx.save();
    await waitUntil(
      `ipmi_sim ${x.name}`,
      async () => (await this.ipmiPower(x)) !== undefined,
      15_000,
      300,
      "lab: ",
    );
  }

  async ipmitool(x: LabNode, args: string[]): Promise<string> {
    return await new Promise((res, rej) =>
      execFile(
        "ipmitool",
        [...ipmitoolArgs(HOST_IP, x.ipmiPort ?? x.bmcPort, "admin", 2), ...args],
        { env: { ...process.env, IPMI_PASSWORD: x.ipmiPassword ?? "" }, timeout: 10_000 },
        (err, stdout) => (err ? rej(err) : res(stdout)),
      ),
    );
  }

  private async ipmiPower(x: LabNode): Promise<"On" | "Off" | undefined> {
    const out = await this.ipmitool(x, ["chassis", "power", "status"]);
    return /Power is on/.test(out) ? "On" : /Power is off/.test(out) ? "Off" : undefined;
  }

  /** Power state as the node's BMC reports it. */
  async powerState(x: LabNode): Promise<string> {
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

  /**
   * Power-on (Redfish emulator hook, ipmi_sim through the power endpoint, the lab): the
   * link first (a silent crash or power-off left it down; a partition keeps it down until
   * its heal), then the launcher, whose first act is to reach the API.
   */
  async startLauncher(x: LabNode, by: "bmc" | "lab"): Promise<void> {
    if (x.launcher?.running) return;
    await linkEvent(x, "power-on");
    if (x.launcher?.running) return; // started by a concurrent power-on meanwhile
    this.ctx.powerSwitched?.(x);
    x.launcher = ManagedProcess.spawn({
      name: `node-${x.name}`,
      command: x.startScript,
      args: [],
      dir: x.dir,
      logFile: "launcher.log",
    });
    x.powerLog.push({ at: Date.now(), action: "on", by });
    const s = this.ctx.state;
    s.procs = s.procs.filter((p) => p.name !== `node-${x.name}` || procAlive(p));
    s.procs.push(record(x.launcher.pid, `node-${x.name}`));
    this.ctx.save();
  }

  /**
   * Power-off (Redfish hook, ipmi_sim through the power endpoint, the lab): the link down,
   * then SIGKILL every process of the node's namespace, wait until gone. The link stays
   * down until power-on.
   */
  async killNode(x: LabNode, by: "bmc" | "lab"): Promise<void> {
    x.powerLog.push({ at: Date.now(), action: "off", by });
    await linkEvent(x, "power-off");
    for (let i = 0; i < 100; i++) {
      const pids = pidsInNetns(x.netns);
      if (pids.length === 0) break;
      signalPids(pids, "SIGKILL");
      signalPids(pids, "SIGCONT");
      await sleep(20);
    }
    await x.launcher?.waitExit();
    this.ctx.powerSwitched?.(x);
  }

  /** Power the node on through its BMC (after a fence), e.g. between bench trials. */
  async powerOn(x: LabNode): Promise<void> {
    if (x.redfish) {
      if (x.redfish.power === "On" && x.launcher?.running) return;
      // Off with its launcher still running: a lying BMC read Off but never switched the
      // power (chaos seed 201), so the machine runs whatever a crash left of it. Switch it
      // off for real first, so it boots whole.
      if (x.launcher?.running) await this.killNode(x, "lab");
      x.redfish.power = "PoweringOn";
      await this.startLauncher(x, "lab");
      x.redfish.power = "On";
      return;
    }
    const launcher = () => nodeProcesses(x.netns).launcher;
    x.labAction = true;
    try {
      for (let i = 0; i < 5; i++) {
        await this.ipmitool(x, ["chassis", "power", "on"]).catch(() => undefined);
        const deadline = Date.now() + 4000;
        while (Date.now() < deadline && launcher() === undefined) await sleep(100);
        if (launcher() !== undefined) break;
      }
      await sleep(100);
    } finally {
      x.labAction = false;
    }
  }

  /** Power-cycle a crashed-but-unfenced node (lab reset). */
  async powerCycle(x: LabNode): Promise<void> {
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
          async () => nodeProcesses(x.netns).launcher === undefined,
          10_000,
          100,
          "lab: ",
        );
      } finally {
        x.labAction = false;
      }
    }
    await this.powerOn(x);
  }

  /** Stop the Redfish emulators, thaw frozen ipmi_sims (to be killed), close the power endpoint. */
  async stop(): Promise<void> {
    for (const x of this.ctx.nodes) await x.redfish?.stop().catch(() => undefined);
    for (const x of this.ctx.nodes) {
      if (x.ipmi) process.kill(x.ipmi.pid, "SIGCONT");
    }
    this.powerServer?.close();
    this.powerServer?.closeAllConnections();
  }
}
