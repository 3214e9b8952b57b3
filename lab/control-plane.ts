// The lab's control plane and what is seeded into it: etcd, kube-apiserver,
// controller-manager and scheduler on the host (harness/env/controlplane.ts, every process
// recorded in state.json) when the lab runs the host control plane (the compact one is
// compact-plane.ts), the nodes' kubeconfig (through the lab's API endpoint, api-lb.ts),
// the CRDs, the fastfence namespace, the shipped ServiceAccounts, RBAC and admission
// policies (lab/shipped-access.ts) and one Node object per simulated node. It only ever
// talks to the lab's own API servers.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CoreV1Api } from "@kubernetes/client-node";
import { applyFastfenceCrds } from "../harness/env/apply.ts";
import { startControlPlane, type ControlPlane } from "../harness/env/controlplane.ts";
import { kubeconfigYaml } from "../harness/env/pki.ts";
import { waitUntil } from "../harness/env/wait.ts";
import { kwokNodeObject } from "../harness/kube/node.ts";
import { PROBE_ADDRESS_ANNOTATION } from "../source/event-source.ts";
import { HOST_IP, LAB_RUN, record, type LabState } from "./state.ts";
import { applyLabAccess } from "./shipped-access.ts";

/** What the lab needs of its control plane, host or compact: where the API is and its credentials. */
export type LabApi = Pick<ControlPlane, "kubeconfigPath" | "server" | "kubeConfig" | "pki" | "dir" | "stop">;
import { API_PORT, KUBELET_PORT, NAMESPACE, type LabNode, type LabOptions } from "./types.ts";
import { LAB_VM_NAMESPACE } from "./compact-plane.ts";

/** Start the control plane and record its processes and temp dir in the state. */
export async function startLabControlPlane(
  opts: LabOptions,
  s: LabState,
  save: () => void,
): Promise<ControlPlane> {
  const cp = await startControlPlane({
    controllerManager: true,
    scheduler: true,
    controllerManagerArgs: opts.controllerManagerArgs ?? [],
    apiserverArgs: opts.apiserverArgs ?? [],
  });
  s.dirs.push(cp.dir);
  for (const p of [cp.etcd, cp.apiserver, cp.controllerManager, cp.scheduler])
    if (p) s.procs.push(record(p.pid, p.name));
  save();
  return cp;
}

/** The nodes' kubeconfig (admin cert, through the relay); returns its path. */
export function writeNodeKubeconfig(cp: LabApi): string {
  const path = join(LAB_RUN, "node.kubeconfig");
  const server = `https://${HOST_IP}:${API_PORT}`;
  const yaml = kubeconfigYaml(server, cp.pki.caCert, cp.pki.adminCert, cp.pki.adminKey, "admin", {
    cluster: "lab",
    tlsServerName: "kubernetes",
  });
  writeFileSync(path, yaml, { mode: 0o600 });
  return path;
}

/**
 * CRDs, the fastfence namespace, the shipped access control (lab/shipped-access.ts; returns
 * what the lab state records of it), and a Node object (with its status) per lab node.
 */
export async function seedCluster(
  cp: LabApi,
  core: CoreV1Api,
  nodes: LabNode[],
  log: (line: string) => void,
): Promise<LabState["access"]> {
  await applyFastfenceCrds(cp.kubeConfig);
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
  // where `lab up --vm-controller`'s VM controller runs VMs (made always: an empty namespace)
  await core.createNamespace({ body: { metadata: { name: LAB_VM_NAMESPACE } } });
  // fastfence runs as shipped: its ServiceAccounts, RBAC and admission policies.
  const access = await applyLabAccess(cp.kubeConfig, log);
  for (const x of nodes) {
    const obj = kwokNodeObject(x.name, randomUUID(), {
      // schedulable for VMs, as virt-handler labels a node it runs on
      labels: { "node-role.kubernetes.io/control-plane": "", "kubevirt.io/schedulable": "true" },
      annotations: { [PROBE_ADDRESS_ANNOTATION]: `${x.ip}:${KUBELET_PORT}` },
      addresses: [
        { type: "InternalIP", address: x.ip },
        { type: "Hostname", address: x.name },
      ],
    });
    await core.createNode({ body: obj });
    // The create drops status; write it (retrying: the controller-manager edits new nodes).
    await waitUntil(
      `${x.name} status`,
      async () => {
        const cur = await core.readNode({ name: x.name });
        cur.status = { ...cur.status, ...obj.status };
        await core.replaceNodeStatus({ name: x.name, body: cur });
        return true;
      },
      10_000,
      50,
      "lab: ",
    );
  }
  return access;
}
