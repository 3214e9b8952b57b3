// OpenIPMI ipmi_sim configuration shared by the harness's IPMI BMC and the lab's: the
// lan.conf (one LAN channel with RMCP+, the `serial 15 ... codec VM` line that enables
// power control, an admin user), the emulator commands file (one BMC), the files written
// into a dir with the ipmi_sim argv that reads them, and the ipmitool lanplus argv
// (cipher suite 3; 17 is not offered by this ipmi_sim build). It only writes files.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface IpmiSimLan {
  /** ipmi_sim's name for the BMC. */
  name: string;
  host: string;
  port: number;
  /** 32 hex digits. */
  guid: string;
  /** Loopback TCP port of the VM serial interface (power control needs it). */
  serialPort: number;
  username: string;
  password: string;
  /** Power lines of the MC (e.g. startcmd ...), before the users. */
  power?: string[];
  /** Lines after the users (e.g. chassis_control ...). */
  trailer?: string[];
}

/** The lan.conf text. */
export function ipmiSimLanConf(o: IpmiSimLan): string {
  return [
    `name "${o.name}"`,
    "set_working_mc 0x20",
    "  startlan 1",
    `    addr ${o.host} ${o.port}`,
    "    priv_limit admin",
    "    allowed_auths_callback none md2 md5 straight",
    "    allowed_auths_user none md2 md5 straight",
    "    allowed_auths_operator none md2 md5 straight",
    "    allowed_auths_admin none md2 md5 straight",
    `    guid ${o.guid}`,
    "  endlan",
    `  serial 15 127.0.0.1 ${o.serialPort} codec VM`,
    ...(o.power ?? []).map((l) => `  ${l}`),
    '  user 1 true  ""  "test" user 10 none md2 md5 straight',
    `  user 2 true  "${o.username}" "${o.password}" admin 10 none md2 md5 straight`,
    ...(o.trailer ?? []),
    "",
  ].join("\n");
}

/** The emulator commands: one BMC at 0x20 with a SEL, no sensors. */
export const IPMI_SIM_EMU =
  "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nsel_enable 0x20 1000 0x0a\nmc_enable 0x20\n";

/**
 * Write lan.conf (mode 600: it holds the password) and sim.emu into `dir`, make the state
 * dir `dir/<stateDir>`; returns ipmi_sim's arguments.
 */
export function writeIpmiSimFiles(dir: string, lan: IpmiSimLan, stateDir: string): string[] {
  const conf = join(dir, "lan.conf");
  const emu = join(dir, "sim.emu");
  writeFileSync(conf, ipmiSimLanConf(lan), { mode: 0o600 });
  writeFileSync(emu, IPMI_SIM_EMU);
  mkdirSync(join(dir, stateDir), { recursive: true });
  return ["-c", conf, "-f", emu, "-s", join(dir, stateDir), "-n"];
}

/** ipmitool's lanplus arguments (password from IPMI_PASSWORD, -E); `retries` is -R. */
export function ipmitoolArgs(host: string, port: number, username: string, retries: number): string[] {
  const target = ["-H", host, "-p", String(port), "-U", username];
  return ["-I", "lanplus", "-C", "3", ...target, "-E", "-N", "1", "-R", String(retries)];
}
