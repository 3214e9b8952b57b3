// Starts OpenIPMI's ipmi_sim as a lab IPMI BMC on a free loopback UDP port: a generated
// lan.conf (one admin user, RMCP+ with the simulator's cipher suites: 3 works, 17 is not
// offered by this ipmi_sim build), the `serial 15 ... codec VM` line that enables power
// control, and a startcmd that is the simulated node (power-off kills it, power-on starts
// it). Returns { host, port, credentials, nodePids(), stop() }.
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { childPids, freeTcpPort, freeUdpPort, pidAlive, RUN_DIR, spawnGroup, waitFor } from "./bmc-spawn.ts";

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

export async function startIpmiSim(
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
  writeFileSync(
    path.join(dir, "lan.conf"),
    `name "ffsim"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 ${port}
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  serial 15 127.0.0.1 ${serialPort} codec VM
  startcmd "${nodeCmd}"
  startnow ${opts.startNow === false ? "false" : "true"}
  poweroff_wait 0
  kill_wait 1
  user 1 true  ""  "test" user 10 none md2 md5 straight
  user 2 true  "${username}" "${password}" admin 10 none md2 md5 straight
`,
    { mode: 0o600 },
  );
  writeFileSync(
    path.join(dir, "sim.emu"),
    `mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
`,
  );
  mkdirSync(path.join(dir, "state"));
  const proc = spawnGroup(
    "ipmi_sim",
    "ipmi_sim",
    ["-c", path.join(dir, "lan.conf"), "-f", path.join(dir, "sim.emu"), "-s", path.join(dir, "state"), "-n"],
    { cwd: dir },
  );
  const ipmitool = async (args: string[]) => {
    const { stdout } = await pexec(
      "ipmitool",
      [
        "-I",
        "lanplus",
        "-C",
        "3",
        "-H",
        "127.0.0.1",
        "-p",
        String(port),
        "-U",
        username,
        "-E",
        "-N",
        "1",
        "-R",
        "3",
        ...args,
      ],
      { env: { ...process.env, IPMI_PASSWORD: password }, timeout: 15_000 },
    );
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
