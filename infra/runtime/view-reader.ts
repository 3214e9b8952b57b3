// Reads the view a pure stage asks for (core/decision.ts ViewRequest) in one go: the node,
// the incident, the node's fencing Lease (its raw object kept for a takeLease to write
// without reading again), the cluster lists and admission ledger, observer heartbeats, the
// kubelet Lease, the node's own heartbeat Lease, planned work for the node, and the node's
// discovered fencing levels when asked. Reads only: it never writes, and it never decides
// what a view means.
import type { V1Lease } from "@kubernetes/client-node";
import type { NodeInfo, View, ViewRequest } from "../../core/decision.ts";
import { discoveryInput } from "../bmc/discovery-input.ts";
import { KubeMetal3Api, type Metal3Api } from "../bmc/metal3.ts";
import { readLedger } from "../kube/admission-ledger.ts";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { hasOutOfServiceTaint } from "../../core/ring.ts";
import { heartbeatReadOf, leaseInfoOf, readLease, readLeaseInfo, readObserverInfos } from "../kube/lease.ts";
import type { NodeInfo as KubeNodeInfo } from "../kube/nodes.ts";
import type { StageAdapters, StageWorld } from "./stage-executor.ts";

/** Where the kubelets renew their Leases (View.kubeletLease). */
const KUBELET_LEASE_NAMESPACE = "kube-node-lease";

/** Leases as one view read them (undefined: absent), each used by at most one takeLease. */
export type RawLeases = Map<string, V1Lease | undefined>;

export function toCoreNode(n: KubeNodeInfo): NodeInfo {
  return {
    name: n.name,
    bootId: n.bootId,
    ready: n.ready,
    labels: n.labels,
    ...(n.unschedulable ? { unschedulable: true } : {}),
    ...(Object.keys(n.annotations ?? {}).length ? { annotations: n.annotations } : {}),
    ...(n.probeAddress ? { probeAddress: n.probeAddress } : {}),
    ...(hasOutOfServiceTaint(n.taints) ? { outOfService: true } : {}),
    ...(n.fencedOff !== undefined ? { fencedOff: n.fencedOff } : {}),
  };
}

export interface ViewReader {
  /** Reads the view; the raw Lease `req.lease` is kept in `leases` for a takeLease to write without a read. */
  readView(req: ViewRequest, now: number, leases: RawLeases): Promise<View>;
  /** All nodes (unless `known`), all open incidents and the admission ledger. */
  readCluster(known?: readonly NodeInfo[]): Promise<Pick<View, "nodes" | "openIncidents" | "ledger">>;
}

export function viewReader(ad: StageAdapters, world: StageWorld): ViewReader {
  let metal3: Metal3Api | undefined = ad.metal3;
  /** All nodes, all open incidents and the admission ledger (View.nodes, .openIncidents, .ledger). */
  async function readCluster(
    known?: readonly NodeInfo[],
  ): Promise<Pick<View, "nodes" | "openIncidents" | "ledger">> {
    const [nodes, openIncidents, ledger] = await Promise.all([
      known ? Promise.resolve(known) : ad.nodes.list().then((l) => l.map(toCoreNode)),
      ad.incidents.listOpen(),
      readLedger(ad.kube, ad.leaseNamespace),
    ]);
    return { nodes, openIncidents, ledger };
  }

  /** Reads the view; the raw Lease `req.lease` is kept in `leases` for a takeLease to write without a read. */
  async function readView(req: ViewRequest, now: number, leases: RawLeases): Promise<View> {
    // Every read at once: the policy too (a fresh read is one more API round trip).
    const policyRead = ad.policy.get(now, { fresh: req.freshPolicy === true });
    const nodeRead = ad.nodes.get(req.node);
    const plannedRead =
      req.planned && ad.planned
        ? nodeRead.then((n) => (n ? ad.planned!.forNode(n, now) : undefined))
        : Promise.resolve(undefined);
    const [node, incident, lease, cluster, nodeList, observers, kubeletLease, planned, heartbeat, policy] =
      await Promise.all([
        nodeRead,
        req.incident
          ? ad.incidents.get(req.incident)
          : req.openIncidentOfNode
            ? ad.incidents.openForNode(req.node, req.exceptBootId)
            : Promise.resolve(undefined),
        req.lease
          ? readLease(ad.kube, ad.leaseNamespace, req.lease).then((l) => {
              leases.set(req.lease!, l);
              return l && leaseInfoOf(l);
            })
          : Promise.resolve(undefined),
        req.cluster ? readCluster() : Promise.resolve({ nodes: [], openIncidents: [] }),
        req.nodeList && !req.cluster ? ad.nodes.list() : Promise.resolve(undefined),
        req.observers ? readObserverInfos(ad.kube, ad.leaseNamespace) : Promise.resolve(undefined),
        req.kubeletLease
          ? readLeaseInfo(ad.kube, KUBELET_LEASE_NAMESPACE, req.node)
          : Promise.resolve(undefined),
        plannedRead,
        req.heartbeatLease
          ? readLease(ad.kube, ad.leaseNamespace, heartbeatLeaseName(req.node)).then((l) =>
              l ? heartbeatReadOf(l) : ("absent" as const),
            )
          : Promise.resolve(undefined),
        policyRead,
      ]);
    const view: View = {
      ...(incident ? { incident } : {}),
      ...(node ? { node: toCoreNode(node) } : {}),
      ...(lease ? { lease } : {}),
      ...(observers ? { observers } : {}),
      ...(kubeletLease ? { kubeletLease } : {}),
      ...(planned ? { planned } : {}),
      ...(heartbeat ? { heartbeat } : {}),
      ...cluster,
      ...(nodeList ? { nodes: nodeList.map(toCoreNode) } : {}),
      policy,
      trustedConfirmers: world.trustedConfirmers,
    };
    if (!req.discovery) return view;
    metal3 ??= new KubeMetal3Api(ad.kube);
    return { ...view, ...(await discoveryInput(metal3, view)) };
  }

  return { readView, readCluster };
}
