// Starts OpenIPMI's ipmi_sim as a test IPMI BMC on a free loopback UDP port: a generated
// lan.conf (ipmi-sim-config.ts: one admin user, RMCP+ with cipher suite 3) whose startcmd
// is the simulated node (power-off kills it, power-on starts it).
// Returns { host, port, credentials, nodePids(), stop() }. Never listens off loopback.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { ipmitoolArgs, writeIpmiSimFiles } from "./ipmi-sim-config.ts";
import { childPids, freeTcpPort, freeUdpPort, pidAlive, RUN_DIR, spawnGroup, waitFor } from "./bmc-spawn.ts";
import { timedStart } from "./start-times.ts";

const pexec = promisify(execFile);

export interface IpmiSim {
  host: string;
  port: number;
  username: string;
  password: string;
  /** Processes of the simulated node (ipmi_sim's startcmd children); empty when powered off. */
  nodePids(): number[];
  nodeRunning(): boolean;
  /** ipmitool -I lanplus -C 3 ... chassis power status → "on" | "off" (the cross-check). */
  ipmitoolStatus(): Promise<"on" | "off">;
  ipmitool(args: string[]): Promise<string>;
  stop(): Promise<void>;
  logTail(): string;
}

async function startIpmiSimNow(
  opts: { username?: string; password?: string; startNow?: boolean; nodeCmd?: string } = {},
): Promise<IpmiSim> {
  mkdirSync(RUN_DIR, { recursive: true });
  const dir = mkdtempSync(path.join(RUN_DIR, "ipmisim-"));
  const username = opts.username ?? "admin";
  // ipmi_sim passwords: at most 16 (IPMI 1.5) / 20 bytes, no spaces or quotes
  const password = opts.password ?? `pw${Math.random().toString(36).slice(2, 10)}X`;
  const port = await freeUdpPort();
  const serialPort = await freeTcpPort();
  const nodeCmd = opts.nodeCmd ?? "setpriv --pdeathsig KILL -- sleep 100000";
  const args = writeIpmiSimFiles(
    dir,
    {
      name: "ffsim",
      host: "127.0.0.1",
      port,
      guid: "a123456789abcdefa123456789abcdef",
      serialPort,
      username,
      password,
      power: [
        `startcmd "${nodeCmd}"`,
        `startnow ${opts.startNow === false ? "false" : "true"}`,
        "poweroff_wait 0",
        "kill_wait 1",
      ],
    },
    "state",
  );
  const proc = spawnGroup("ipmi_sim", "ipmi_sim", args, { cwd: dir });
  const ipmitool = async (args: string[]) => {
    const { stdout } = await pexec("ipmitool", [...ipmitoolArgs("127.0.0.1", port, username, 3), ...args], {
      env: { ...process.env, IPMI_PASSWORD: password },
      timeout: 15_000,
    });
    return stdout;
  };
  const ipmitoolStatus = async () => {
    const out = await ipmitool(["chassis", "power", "status"]);
    if (/Power is on/.test(out)) return "on" as const;
    if (/Power is off/.test(out)) return "off" as const;
    throw new Error(`unexpected ipmitool output: ${out}`);
  };
  try {
    await waitFor("ipmi_sim", async () => !!(await ipmitoolStatus()), {
      timeoutMs: 15_000,
      intervalMs: 200,
      proc,
    });
  } catch (err) {
    await proc.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  // ipmi_sim runs under setpriv; its own pid is setpriv's exec target, i.e. proc.pid
  const nodePids = () => childPids(proc.pid).filter(pidAlive);
  return {
    host: "127.0.0.1",
    port,
    username,
    password,
    nodePids,
    nodeRunning: () => nodePids().length > 0,
    ipmitoolStatus,
    ipmitool,
    logTail: () => proc.logTail(),
    stop: async () => {
      const pids = nodePids();
      await proc.stop();
      for (const p of pids) {
        try {
          process.kill(p, "SIGKILL");
        } catch {
          // gone
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Start ipmi_sim; timed (start-times.ts). */
export function startIpmiSim(opts: Parameters<typeof startIpmiSimNow>[0] = {}): Promise<IpmiSim> {
  return timedStart("bmc-ipmi-sim", "ipmi_sim", () => startIpmiSimNow(opts));
}
