// The event source's three watches — Nodes, kubelet Leases, heartbeat Leases — on the API
// servers fastfence may use (infra/kube/failover-informer.ts): a failed watch restarts after
// a delay on the server a request would try first; the heartbeat watch, which sees a
// renewal several times a second when healthy, moves to another server once it was quiet
// for as long as it counts as synced, and takes the other two along when they were on the
// same server. It reports the heartbeat watch's state (listed or not) and nothing else; it
// decides nothing about what it sees and never writes to the API.
import type { KubeConfig, V1Lease, V1Node } from "@kubernetes/client-node";
import { Kube } from "../infra/kube/client.ts";
import { FailoverInformer } from "../infra/kube/failover-informer.ts";
import type { Logger } from "../infra/log.ts";
import type { ApiEndpoints } from "./heartbeat.ts";

export interface SourceWatchesOptions {
  kubeConfig: KubeConfig;
  /** FASTFENCE_KUBE_ENDPOINTS as client options; unset = the kubeconfig's server only. */
  apiEndpoints?: ApiEndpoints;
  /**
   * Deadline of one list attempt, ms. Default 10000: a loaded API server may take seconds to
   * list, and a list is hedged to the next server after 500 ms anyway (Kube.read).
   */
  listTimeoutMs?: number;
  /** Namespace of the heartbeat Leases; unset = no heartbeat watch (it never syncs). */
  heartbeatNamespace?: string;
  /** How long the heartbeat watch may be quiet, ms (the sightings' staleness bound, read at each check). */
  heartbeatQuietMs: () => number;
  /** Restart delay after a failed watch, ms. Default 500. */
  restartMs?: number;
  /** The heartbeat watch listed (true) or stopped delivering: failed or moving (false). */
  onHeartbeatListed: (listed: boolean) => void;
  /** This replica's node, for log lines. */
  node: string;
  log: Logger;
}

export interface SourceWatches {
  nodes: FailoverInformer<V1Node>;
  leases: FailoverInformer<V1Lease>;
  heartbeats: FailoverInformer<V1Lease>;
  /** Starts every watch (listeners attached before); resolves once each has listed. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function sourceWatches(o: SourceWatchesOptions): SourceWatches {
  const { log } = o;
  const kube = new Kube(o.kubeConfig, {
    requestTimeoutMs: o.listTimeoutMs ?? 10_000,
    readHedgeMs: 500,
    ...o.apiEndpoints,
    log,
  });
  const hbNamespace = o.heartbeatNamespace ?? "default";
  const nodes = new FailoverInformer<V1Node>({
    name: "nodes",
    kube,
    path: "/api/v1/nodes",
    list: (a) => a.core.listNode(),
    log,
  });
  const leases = new FailoverInformer<V1Lease>({
    name: "leases",
    kube,
    path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    list: (a) => a.coordination.listNamespacedLease({ namespace: "kube-node-lease" }),
    log,
  });
  const heartbeats = new FailoverInformer<V1Lease>({
    name: "heartbeats",
    kube,
    path: `/apis/coordination.k8s.io/v1/namespaces/${hbNamespace}/leases`,
    list: (a) => a.coordination.listNamespacedLease({ namespace: hbNamespace }),
    quietMs: o.heartbeatQuietMs,
    log,
  });
  heartbeats.on("listed", () => o.onHeartbeatListed(true));
  heartbeats.on("moved", (from) => {
    o.onHeartbeatListed(false);
    for (const inf of [nodes, leases])
      if (inf.server === from) void inf.moveOn("the heartbeat watch on the same API server went quiet");
  });
  let stopped = false;
  // A watch stops on errors other than 410 (and a failed list): restart it.
  for (const inf of [nodes, leases, heartbeats] as FailoverInformer<V1Node | V1Lease>[])
    inf.on("error", (err: unknown) => {
      if (inf === heartbeats) o.onHeartbeatListed(false);
      if (stopped) return;
      log.warn({ incident: "none", node: o.node, informer: inf.name, err }, "informer stopped; restarting");
      setTimeout(() => !stopped && void inf.start(), o.restartMs ?? 500);
    });
  const watches = [nodes, leases, ...(o.heartbeatNamespace ? [heartbeats] : [])] as FailoverInformer<
    V1Node | V1Lease
  >[];
  return {
    nodes,
    leases,
    heartbeats,
    start: () => {
      // Ready once each has listed, a list that failed at first and was restarted included.
      const ready = Promise.all(
        watches.map((inf) => new Promise<void>((listed) => inf.on("listed", () => listed()))),
      ).then(() => undefined);
      for (const inf of watches) void inf.start();
      return ready;
    },
    stop: async () => {
      stopped = true;
      await Promise.allSettled([nodes.stop(), leases.stop(), heartbeats.stop()]);
      kube.close();
    },
  };
}
