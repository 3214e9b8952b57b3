// The compact control plane's command lines (lab/compact-plane.ts): which nodes carry a
// member, the static etcd cluster over their addresses, the API server's lease reconciler
// and advertised address, and the leader-election settings of each profile as docs/lab.md
// states them (OpenShift's or upstream's).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { COMPACT_SETTINGS, compactProcesses, membersOf } from "../../../lab/compact-plane.ts";
import type { LabNode } from "../../../lab/types.ts";
import type { Pki } from "../../../harness/env/pki.ts";

const dir = mkdtempSync(join(tmpdir(), "fastfence-compact-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const node = (i: number): LabNode => ({
  name: `node-${"abcde"[i]}`,
  index: i,
  netns: `fflab-node-${"abcde"[i]}`,
  veth: `fflv-${i}`,
  ip: `10.77.0.${10 + i}`,
  bmc: "ipmi",
  bmcPort: 6230 + i,
  dir,
  startScript: join(dir, "start.sh"),
  powerLog: [],
});
const nodes = [0, 1, 2, 3].map(node);
const pki: Pki = {
  caCert: "/p/ca.crt",
  caKey: "/p/ca.key",
  servingCert: "/p/apiserver.crt",
  servingKey: "/p/apiserver.key",
  adminCert: "/p/admin.crt",
  adminKey: "/p/admin.key",
  saPub: "/p/sa.pub",
  saKey: "/p/sa.key",
};
const argvOf = (procs: { name: string; argv: string[] }[], name: string) =>
  procs.find((p) => p.name === name)!.argv;

describe("compact control plane command lines", () => {
  it("puts a member on each of the first three nodes and none on a fourth", () => {
    expect(membersOf(nodes).map((x) => x.name)).toEqual(["node-a", "node-b", "node-c"]);
    expect(compactProcesses(nodes[3]!, nodes, pki, {})).toEqual([]);
    expect(compactProcesses(nodes[1]!, nodes, pki, {}).map((p) => p.name)).toEqual([
      "etcd",
      "kube-apiserver",
      "kube-controller-manager",
      "kube-scheduler",
    ]);
  });

  it("runs a static three-member etcd cluster without fsync and the OpenShift timings", () => {
    const etcd = argvOf(compactProcesses(nodes[1]!, nodes, pki, {}), "etcd");
    expect(etcd).toContain(
      "--initial-cluster=node-a=http://10.77.0.10:2380,node-b=http://10.77.0.11:2380,node-c=http://10.77.0.12:2380",
    );
    expect(etcd).toContain("--name=node-b");
    expect(etcd).toContain("--advertise-client-urls=http://10.77.0.11:2379");
    expect(etcd).toContain("--unsafe-no-fsync");
    expect(etcd).toContain("--heartbeat-interval=100");
    expect(etcd).toContain("--election-timeout=1000");
  });

  it("advertises the node's address with the lease reconciler, its own etcd member first", () => {
    const api = argvOf(
      compactProcesses(nodes[2]!, nodes, pki, { apiserverArgs: ["--v=1"] }),
      "kube-apiserver",
    );
    expect(api).toContain("--advertise-address=10.77.0.12");
    expect(api).toContain("--endpoint-reconciler-type=lease");
    expect(api).toContain(
      "--etcd-servers=http://10.77.0.12:2379,http://10.77.0.10:2379,http://10.77.0.11:2379",
    );
    expect(api.at(-1)).toBe("--v=1");
  });

  it("elects leaders with OpenShift's settings by default and upstream's on request", () => {
    const openshift = compactProcesses(nodes[0]!, nodes, pki, {});
    expect(argvOf(openshift, "kube-controller-manager")).toEqual(
      expect.arrayContaining([
        "--leader-elect=true",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=12s",
        "--leader-elect-retry-period=3s",
        "--node-monitor-grace-period=40s",
      ]),
    );
    expect(argvOf(openshift, "kube-scheduler")).toEqual(
      expect.arrayContaining([
        "--leader-elect=true",
        "--leader-elect-lease-duration=137s",
        "--leader-elect-renew-deadline=107s",
        "--leader-elect-retry-period=26s",
      ]),
    );
    const upstream = compactProcesses(nodes[0]!, nodes, pki, { leaderElection: "upstream" });
    for (const name of ["kube-controller-manager", "kube-scheduler"])
      expect(argvOf(upstream, name)).toEqual(
        expect.arrayContaining([
          "--leader-elect-lease-duration=15s",
          "--leader-elect-renew-deadline=10s",
          "--leader-elect-retry-period=2s",
        ]),
      );
    // upstream: the binary's own node-monitor grace (50 s)
    expect(
      argvOf(upstream, "kube-controller-manager").some((a) => a.startsWith("--node-monitor-grace")),
    ).toBe(false);
    expect(COMPACT_SETTINGS.upstream.etcd).toEqual(COMPACT_SETTINGS.openshift.etcd);
  });

  it("points the controller manager and scheduler at their own node's API server", () => {
    const kcm = argvOf(compactProcesses(nodes[0]!, nodes, pki, {}), "kube-controller-manager");
    const kubeconfig = kcm.find((a) => a.startsWith("--kubeconfig="))!.slice("--kubeconfig=".length);
    expect(readFileSync(kubeconfig, "utf8")).toMatch(/server: https:\/\/127\.0\.0\.1:6443/);
  });
});
