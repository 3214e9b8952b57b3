// Lab networking: one host bridge (fflab0, 10.77.0.1/24) and, per simulated node, a
// network namespace (fflab-<node>) joined to it by a veth pair with its own address.
// Also the network faults: link down/up (partition) and blackhole routes inside the
// node's namespace (partial partitions). Touches only the bridge, namespaces and veths
// whose names carry the lab prefixes; callers record each name in state.json first.
import { spawn } from "node:child_process";
import { BRIDGE, HOST_IP, NETNS_PREFIX, SUBNET, VETH_PREFIX } from "./state.ts";

export function ipCmd(args: string[]): Promise<string> {
  return new Promise((res, rej) => {
    const c = spawn("ip", args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    c.stdout.on("data", (d: Buffer) => (out += d.toString()));
    c.stderr.on("data", (d: Buffer) => (out += d.toString()));
    c.once("error", rej);
    c.once("exit", (code) => (code === 0 ? res(out) : rej(new Error(`ip ${args.join(" ")}: ${out.trim()}`))));
  });
}

export const netnsName = (node: string) => `${NETNS_PREFIX}${node}`;
/** Host-side veth name (at most 15 characters). */
export const vethName = (index: number) => `${VETH_PREFIX}${index}`;
export const nodeIp = (index: number) => `${SUBNET}.${10 + index}`;

export async function createBridge(): Promise<void> {
  await ipCmd(["link", "add", BRIDGE, "type", "bridge"]);
  await ipCmd(["addr", "add", `${HOST_IP}/24`, "dev", BRIDGE]);
  await ipCmd(["link", "set", BRIDGE, "up"]);
}

export async function createNodeNet(ns: string, veth: string, ip: string): Promise<void> {
  await ipCmd(["netns", "add", ns]);
  await ipCmd(["link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns]);
  await ipCmd(["link", "set", veth, "master", BRIDGE, "up"]);
  await ipCmd(["-n", ns, "addr", "add", `${ip}/24`, "dev", "eth0"]);
  await ipCmd(["-n", ns, "link", "set", "eth0", "up"]);
  await ipCmd(["-n", ns, "link", "set", "lo", "up"]);
}

/** partition: the node's link down (true) or up again (false). */
export async function setLink(veth: string, up: boolean): Promise<void> {
  await ipCmd(["link", "set", veth, up ? "up" : "down"]);
}

/** Blackhole routes inside a node's namespace to the given /32 addresses (add or remove). */
export async function blackhole(ns: string, addrs: string[], on: boolean): Promise<void> {
  for (const a of addrs) {
    try {
      await ipCmd(["-n", ns, "route", on ? "add" : "del", "blackhole", `${a}/32`]);
    } catch (err) {
      if (on) throw err;
    }
  }
}
