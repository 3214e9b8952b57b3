// The lab's shape: the host bridge and, per simulated node, its record (name, network
// namespace, veth, address, BMC kind and port, run dir) and its network namespace joined
// to the bridge; and which processes a node runs (found by its network namespace). Each
// name is recorded in state.json before it is made. It never touches a namespace, link or
// process that is not the lab's own.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { createBridge, createNodeNet, netnsName, nodeIp, vethName } from "./net.ts";
import { BRIDGE, LAB_RUN, nsPids, pidsInNetns, type LabState, type NodeRecord } from "./state.ts";
import { NODE_NAMES, type BmcKind, type LabNode, type LabOptions } from "./types.ts";

/** The BMC kind of each of n nodes: "mixed" alternates ipmi, redfish, ipmi, ... */
export function bmcKinds(n: number, bmc: LabOptions["bmc"]): BmcKind[] {
  return Array.from({ length: n }, (_, i) =>
    bmc === "ipmi" ? "ipmi" : bmc === "redfish" ? "redfish" : i % 2 === 0 ? "ipmi" : "redfish",
  );
}

/** Create the bridge and n node namespaces (recording each first); returns the nodes. */
export async function buildNetwork(
  s: LabState,
  save: () => void,
  n: number,
  bmc: LabOptions["bmc"],
): Promise<LabNode[]> {
  s.bridge = BRIDGE;
  save();
  await createBridge();
  const kinds = bmcKinds(n, bmc);
  const nodes: LabNode[] = [];
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
    save();
    await createNodeNet(rec.netns, rec.veth, rec.ip);
    mkdirSync(rec.dir, { recursive: true });
    nodes.push({ ...rec, startScript: join(rec.dir, "start.sh"), powerLog: [] });
  }
  return nodes;
}

export interface NodeProcesses {
  /** The launcher: PID 1 of the node's PID namespace (host pid). */
  launcher?: number;
  /** Everything else inside the node's PID namespace. */
  others: number[];
  /** Processes in its network namespace but outside its PID namespace (ip netns exec, unshare). */
  wrappers: number[];
}

/** Processes of a node (host pids), by its network namespace, launcher (ns pid 1) apart. */
export function nodeProcesses(netns: string): NodeProcesses {
  const out: NodeProcesses = { others: [], wrappers: [] };
  for (const pid of pidsInNetns(netns)) {
    const chain = nsPids(pid);
    if (chain.length < 2) out.wrappers.push(pid);
    else if (chain[chain.length - 1] === 1) out.launcher = pid;
    else out.others.push(pid);
  }
  return out;
}
