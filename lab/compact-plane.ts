// The compact control plane: what each of the first three lab nodes runs besides its
// kubelet, broker and agent — one etcd member (a static 3-member cluster over the nodes'
// addresses, data in the node's run dir so it survives power cycles and the member
// rejoins), one kube-apiserver (lease endpoint reconciler, advertising the node's address),
// one kube-controller-manager and one kube-scheduler with leader election on, talking to
// their own node's API server as OpenShift's do. The settings are OpenShift's or upstream's
// (COMPACT_SETTINGS, sources in docs/lab.md). With `vmController`, the first two nodes also
// run the VM controller stand-in (harness/kubevirt/), leader-elected as virt-controller's
// two replicas are. This module only makes the PKI and the argv
// lists and writes files into the lab's run dir; the nodes' launchers start the processes,
// so every node fault acts on them as on the node's other processes.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { BIN } from "../harness/env/base.ts";
import { kubeconfigYaml, makePki, type Pki } from "../harness/env/pki.ts";
import type { LabApi } from "./control-plane.ts";
import { HOST_IP, LAB_RUN, ROOT } from "./state.ts";
import { API_PORT, type LabNode, type LabOptions, type LeaderElectionProfile } from "./types.ts";

/** How many nodes carry a control-plane member (the first ones). */
export const MEMBERS = 3;
export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;
/** The node's API server (on its own address, as a control-plane node's). */
export const NODE_API_PORT = 6443;
export const KCM_PORT = 10257;
/** How many nodes run a VM controller replica (KubeVirt's virt-controller Deployment: 2). */
export const VM_CONTROLLER_REPLICAS = 2;
/** The namespace whose VMs the lab's VM controller runs (the lab's own VMs stay untouched). */
export const LAB_VM_NAMESPACE = "lab-vms";
export const SCHEDULER_PORT = 10259;

export interface LeaderElection {
  leaseS: number;
  renewS: number;
  retryS: number;
}

export interface CompactSettings {
  etcd: { heartbeatMs: number; electionMs: number };
  controllerManager: LeaderElection & { nodeMonitorGraceS?: number };
  scheduler: LeaderElection;
}

/** The two profiles of `lab up --leader-election`; docs/lab.md names each value's source. */
export const COMPACT_SETTINGS: Readonly<Record<LeaderElectionProfile, CompactSettings>> = {
  openshift: {
    etcd: { heartbeatMs: 100, electionMs: 1000 },
    controllerManager: { leaseS: 15, renewS: 12, retryS: 3, nodeMonitorGraceS: 40 },
    scheduler: { leaseS: 137, renewS: 107, retryS: 26 },
  },
  upstream: {
    etcd: { heartbeatMs: 100, electionMs: 1000 },
    // node-monitor grace: the binary's own default (50 s since Kubernetes 1.32)
    controllerManager: { leaseS: 15, renewS: 10, retryS: 2 },
    scheduler: { leaseS: 15, renewS: 10, retryS: 2 },
  },
};

export const settingsOf = (opts: LabOptions): CompactSettings =>
  COMPACT_SETTINGS[opts.leaderElection ?? "openshift"];

/** The nodes that carry a member. */
export const membersOf = (nodes: readonly LabNode[]): LabNode[] => nodes.slice(0, MEMBERS);

/** The PKI (serving cert for every node address, the relay and the service IP) and the host's kubeconfig. */
export async function makeCompactPlane(nodes: readonly LabNode[]): Promise<LabApi & { saPki: Pki }> {
  const dir = join(LAB_RUN, "pki");
  mkdirSync(dir, { recursive: true });
  const pki = await makePki(dir, [HOST_IP, ...nodes.map((x) => x.ip)]);
  const server = `https://${HOST_IP}:${API_PORT}`;
  const kubeconfigPath = join(dir, "admin.kubeconfig");
  writeFileSync(kubeconfigPath, kubeconfigYaml(server, pki.caCert, pki.adminCert, pki.adminKey, "admin"), {
    mode: 0o600,
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  return {
    kubeconfigPath,
    server,
    kubeConfig,
    dir,
    pki: { caCert: pki.caCert, caKey: pki.caKey, adminCert: pki.adminCert, adminKey: pki.adminKey },
    saPki: pki,
    // the processes are the nodes': powering the nodes off stops them
    stop: () => Promise.resolve(),
  };
}

const dur = (s: number) => `${s}s`;
const leaderArgs = (l: LeaderElection) => [
  "--leader-elect=true",
  `--leader-elect-lease-duration=${dur(l.leaseS)}`,
  `--leader-elect-renew-deadline=${dur(l.renewS)}`,
  `--leader-elect-retry-period=${dur(l.retryS)}`,
];

/**
 * The control-plane processes of member `x` (launcher entries, started before everything
 * else at each power-on), and its local kubeconfig (its own API server on 127.0.0.1).
 */
export function compactProcesses(
  x: LabNode,
  nodes: readonly LabNode[],
  pki: Pki,
  opts: LabOptions,
): { name: string; argv: string[] }[] {
  const members = membersOf(nodes);
  if (!members.includes(x)) return [];
  const st = settingsOf(opts);
  const local = join(x.dir, "local.kubeconfig");
  writeFileSync(
    local,
    kubeconfigYaml(`https://127.0.0.1:${NODE_API_PORT}`, pki.caCert, pki.adminCert, pki.adminKey, "admin"),
    { mode: 0o600 },
  );
  const peer = (m: LabNode) => `http://${m.ip}:${ETCD_PEER_PORT}`;
  const client = (m: LabNode) => `http://${m.ip}:${ETCD_CLIENT_PORT}`;
  const etcd = [
    join(BIN, "etcd"),
    `--name=${x.name}`,
    `--data-dir=${join(x.dir, "etcd")}`,
    `--listen-client-urls=${client(x)},http://127.0.0.1:${ETCD_CLIENT_PORT}`,
    `--advertise-client-urls=${client(x)}`,
    `--listen-peer-urls=${peer(x)}`,
    `--initial-advertise-peer-urls=${peer(x)}`,
    `--initial-cluster=${members.map((m) => `${m.name}=${peer(m)}`).join(",")}`,
    "--initial-cluster-state=new",
    "--initial-cluster-token=fflab",
    `--heartbeat-interval=${st.etcd.heartbeatMs}`,
    `--election-timeout=${st.etcd.electionMs}`,
    // no fsync: three members share one disk with everything else (docs/lab.md)
    "--unsafe-no-fsync",
    "--log-level=warn",
    "--quota-backend-bytes=1073741824",
  ];
  const apiserver = [
    join(BIN, "kube-apiserver"),
    // its own member first, as OpenShift lists localhost first
    `--etcd-servers=${[x, ...members.filter((m) => m !== x)].map(client).join(",")}`,
    "--bind-address=0.0.0.0",
    `--advertise-address=${x.ip}`,
    `--secure-port=${NODE_API_PORT}`,
    "--endpoint-reconciler-type=lease",
    `--cert-dir=${join(x.dir, "apiserver-certs")}`,
    `--tls-cert-file=${pki.servingCert}`,
    `--tls-private-key-file=${pki.servingKey}`,
    `--client-ca-file=${pki.caCert}`,
    `--service-account-key-file=${pki.saPub}`,
    `--service-account-signing-key-file=${pki.saKey}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    "--api-audiences=https://kubernetes.default.svc.cluster.local",
    "--authorization-mode=Node,RBAC",
    "--service-cluster-ip-range=10.96.0.0/16",
    "--disable-admission-plugins=ServiceAccount",
    "--profiling=false",
    "--enable-priority-and-fairness=false",
    "--allow-privileged=true",
    ...(opts.apiserverArgs ?? []),
  ];
  const kube = (certDir: string, port: number) => [
    `--kubeconfig=${local}`,
    `--authentication-kubeconfig=${local}`,
    `--authorization-kubeconfig=${local}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${port}`,
    `--cert-dir=${join(x.dir, certDir)}`,
    "--profiling=false",
  ];
  const kcm = st.controllerManager;
  const controllerManager = [
    join(BIN, "kube-controller-manager"),
    ...kube("kcm-certs", KCM_PORT),
    ...leaderArgs(kcm),
    "--controllers=*",
    "--use-service-account-credentials=true",
    `--service-account-private-key-file=${pki.saKey}`,
    `--root-ca-file=${pki.caCert}`,
    `--cluster-signing-cert-file=${pki.caCert}`,
    `--cluster-signing-key-file=${pki.caKey}`,
    ...(kcm.nodeMonitorGraceS ? [`--node-monitor-grace-period=${dur(kcm.nodeMonitorGraceS)}`] : []),
    ...(opts.controllerManagerArgs ?? []),
  ];
  const scheduler = [
    join(BIN, "kube-scheduler"),
    ...kube("scheduler-certs", SCHEDULER_PORT),
    ...leaderArgs(st.scheduler),
  ];
  // KubeVirt's own leader election settings (15/10/2 s) under either profile; the identity
  // is `<node>_<uuid>` per start, as a host-network client-go process's (docs/lab.md).
  const vmController =
    opts.vmController && members.indexOf(x) < VM_CONTROLLER_REPLICAS
      ? [
          {
            name: "virt-controller",
            argv: [
              process.execPath,
              join(ROOT, "harness/kubevirt/vm-controller-main.ts"),
              `--kubeconfig=${local}`,
              `--identity-host=${x.name}`,
              `--namespaces=${LAB_VM_NAMESPACE}`,
            ],
          },
        ]
      : [];
  return [
    { name: "etcd", argv: etcd },
    { name: "kube-apiserver", argv: apiserver },
    { name: "kube-controller-manager", argv: controllerManager },
    { name: "kube-scheduler", argv: scheduler },
    ...vmController,
  ];
}
