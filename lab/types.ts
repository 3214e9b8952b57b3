// The lab's shared vocabulary: its fixed ports and node names, the options of `lab up`,
// a node as the controller holds it (its record plus its BMC, launcher and power log),
// BMC kinds and faults. Declarations only: it must never do anything at import time.
import type { FencingPolicySpecInput } from "../core/policy.ts";
import type { LabRedfishServer } from "../harness/emulators/redfish/server.ts";
import type { ManagedProcess } from "../harness/env/process.ts";
import { FASTFENCE_NAMESPACE } from "../harness/kube/fencing-policy.ts";
import type { LinkFlags } from "./link-state.ts";
import type { NodeRecord } from "./state.ts";
import type { LabTimeouts } from "./timeouts.ts";

export const NAMESPACE = FASTFENCE_NAMESPACE;
/** The API relay's port on the lab bridge. */
export const API_PORT = 6443;
/** Each node's kubelet-port listener (what the observers probe). */
export const KUBELET_PORT = 10250;
/**
 * Each node agent's control endpoint (function-only crash): a Unix socket of this name in
 * the node's directory. Out of band, like a serial console: the node's network faults
 * (a partition from the API host included) never cut the lab off from it.
 */
export const AGENT_SOCKET = "agent.sock";
/** Each node agent's metrics endpoint on the node's address (GET /metrics). */
export const AGENT_METRICS_PORT = 7070;
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
  /**
   * Give every node an emulated watchdog (lab/watchdog.ts) that its agent arms and pets, and
   * the lab's FencingPolicy the watchdog level after each node's BMC level (LAB_WATCHDOG_LEVEL).
   * Default false: a watchdog resets every node cut off from the API, which most trials do.
   */
  watchdog?: boolean;
  /**
   * Give every Redfish node a second fencing level: an IPMI BMC (ipmi_sim on UDP 6230+i)
   * that switches the same emulated machine, after its Redfish level (issue 18: the look
   * after the power-off escalates to it when the Redfish BMC lies). Default false.
   */
  secondLevel?: boolean;
  /** The FencingPolicy's timeout chain (lab/timeouts.ts); default LAB_TIMEOUTS. */
  timeouts?: LabTimeouts;
  /**
   * Where etcd, kube-apiserver, the controller manager and the scheduler run: "host" (one
   * of each on the host, the default here for the benches' baseline and the tests) or
   * "compact" (one of each on each of the first three nodes, lab/compact-plane.ts).
   */
  controlPlane?: ControlPlaneMode;
  /** The compact plane's leader election and etcd timing: "openshift" (default) or "upstream". */
  leaderElection?: LeaderElectionProfile;
  /**
   * Run the VM controller stand-in (harness/kubevirt/) on the first VM_CONTROLLER_REPLICAS
   * nodes of the compact plane, leader-elected on kubevirt/virt-controller with KubeVirt's
   * settings, for the VMs of the lab-vms namespace. Default off.
   */
  vmController?: boolean;
}

export type ControlPlaneMode = "host" | "compact";
export type LeaderElectionProfile = "openshift" | "upstream";

/** A power action a BMC (or the lab, resetting) carried out: the invariant checker's ground truth. */
export interface PowerAction {
  at: number;
  action: "off" | "on";
  by: "bmc" | "lab";
}

export interface LabNode extends NodeRecord {
  redfish?: LabRedfishServer;
  ipmi?: ManagedProcess;
  ipmiPassword?: string;
  /** The UDP port of its ipmi_sim when that is a second level beside a Redfish BMC (else bmcPort). */
  ipmiPort?: number;
  /** The launcher started by this process (Redfish nodes). */
  launcher?: ManagedProcess;
  startScript: string;
  /** Power actions the BMC carried out (for the invariant checker). */
  powerLog: PowerAction[];
  /** IPMI nodes: a lab-initiated power action (reset) is pending, so log it as "lab". */
  labAction?: boolean;
  /**
   * Why its link is down, if it is (lab/link-state.ts): the machine is dark (silent crash,
   * power-off) or the network cut it off (partition). Unset: up, as built.
   */
  link?: LinkFlags;
}

/** A fault the lab injected (node, kind, ms epoch). */
export interface FaultNote {
  node: string;
  kind: string;
  at: number;
}

/**
 * A node agent's agent.json (lab/node-agent.ts writes it, the lab reads it): `step` is what
 * the agent is doing now, `pending` the replicas not yet synced or joined, and `failed` why
 * the agent gave up (it then exits; the launcher never restarts a process).
 */
export interface AgentStatus {
  ready: boolean;
  source: boolean;
  functions: string[];
  startedAt: string;
  readyAt?: string;
  step: string;
  pending?: string[];
  failed?: string;
  /** The last error a retried step met ("<step>: <message>"), for a slow start's wait to name. */
  lastError?: string;
  /** Each replica's user name as the API server authenticated it (component → user). */
  identities?: Record<string, string>;
  /** Each step ended so far with how long it took, in order (a slow `lab up` says where). */
  steps?: { step: string; ms: number }[];
}
