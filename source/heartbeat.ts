// This node's heartbeat through the API server, run by its event source: its own heartbeat
// Lease (fastfence-alive-<node>) renewed every heartbeat interval, carrying this replica's
// observer keys and its watchdog report — proof, for confirm, that a node its peers cannot
// reach is still alive (partitioned, not dead). With a device configured it runs the node's
// watchdog agent (source/node-watchdog.ts: armed only while the policy asks for it), and with
// a vouch port the vouch endpoint (source/vouch-server.ts). setInterval follows a policy edit
// of the heartbeat interval (the timer and the write deadline) without a restart. With
// `apiEndpoints` (FASTFENCE_KUBE_ENDPOINTS) a renewal whose API server does not answer moves
// to another one within its deadline, as the stages' requests do. A failed renewal is just
// skipped (the next one retries); it never throws from its timer.
import type { KubeConfig, V1Node } from "@kubernetes/client-node";
import type { Clock } from "../core/clock.ts";
import { heartbeatLeaseName } from "../core/decision.ts";
import type { FencingPolicySpec } from "../core/policy.ts";
import { Kube, type KubeClientConfig } from "../infra/kube/client.ts";
import { LeaseManager } from "../infra/kube/lease.ts";
import type { Logger } from "../infra/log.ts";
import { startNodeWatchdog } from "./node-watchdog.ts";
import type { ObserverKey } from "./observer-key.ts";
import { startVouchServer, vouchRecorder, type VouchServer } from "./vouch-server.ts";
import type { WatchdogAgent, WatchdogAgentConfig } from "./watchdog-agent.ts";

export interface Heartbeat {
  /** This node's watchdog agent, when a device is configured. */
  watchdog?: WatchdogAgent;
  /** The policy's heartbeat interval changed: renew at the new pace, with its write deadline. */
  setInterval(ms: number): void;
  /** Stops renewing and vouching; the watchdog records "not armed", then disarms. */
  stop(): Promise<void>;
}

/** Where a renewal may go besides the kubeconfig's server (infra/kube/client.ts options). */
export type ApiEndpoints = Pick<KubeClientConfig, "extraEndpoints" | "discover" | "discoveryPolicy">;

export async function startHeartbeat(o: {
  kubeConfig: KubeConfig;
  namespace: string;
  node: string;
  replica: string;
  clock: Clock;
  log: Logger;
  key: ObserverKey;
  nodes: ReadonlyMap<string, V1Node>;
  peerKeys: ReadonlyMap<string, string[]>;
  policy: () => FencingPolicySpec;
  intervalMs: number;
  /**
   * Other API servers a renewal may go to (FASTFENCE_KUBE_ENDPOINTS as client options).
   * Unset: only the kubeconfig's server, so a renewal waits for that one to answer.
   */
  apiEndpoints?: ApiEndpoints;
  /** The heartbeat Lease's duration now, ms (it follows the interval). */
  leaseDurationMs: () => number;
  watchdog?: WatchdogAgentConfig;
  vouchPort?: number;
  metrics?: Parameters<typeof startNodeWatchdog>[0]["metrics"];
  /** A renewal was acknowledged (the observer key is on the Lease). */
  onAcquired: () => void;
}): Promise<Heartbeat> {
  const { node, log, key } = o;
  let stopped = false;
  // The request deadline follows the heartbeat interval: rebuilt when the policy changes it
  // (the old client's endpoint discovery stopped).
  let kube: Kube | undefined;
  const leasesFor = (interval: number) => {
    kube?.close();
    kube = new Kube(o.kubeConfig, { requestTimeoutMs: Math.max(500, interval * 2), ...o.apiEndpoints, log });
    return new LeaseManager(kube, { namespace: o.namespace });
  };
  let leases = leasesFor(o.intervalMs);
  const current = { acquire: (...a: Parameters<LeaseManager["acquire"]>) => leases.acquire(...a) };
  let watchdog: WatchdogAgent | undefined;
  const renew = () =>
    current.acquire(heartbeatLeaseName(node), o.replica, o.clock.now(), {
      annotations: (cur) => ({ ...key.annotations(cur), ...watchdog?.annotations() }),
      durationMs: o.leaseDurationMs(),
    });
  if (o.watchdog)
    watchdog = await startNodeWatchdog({
      config: o.watchdog,
      node,
      nodes: o.nodes,
      peerKeys: o.peerKeys,
      signVouchRequest: (c) => key.signVouchRequest(c),
      policy: o.policy,
      record: () => renew().then((r) => r.acquired),
      ...(o.vouchPort !== undefined ? { vouchPort: o.vouchPort } : {}),
      log,
      ...(o.metrics ? { metrics: o.metrics } : {}),
    });
  let vouchServer: VouchServer | undefined;
  if (o.vouchPort !== undefined)
    vouchServer = await startVouchServer({
      node,
      port: o.vouchPort,
      isPeer: (n) => n !== node && o.nodes.has(n),
      // A vouch is a renewal of this node's own Lease that also bumps the vouchee's counter.
      record: vouchRecorder({
        leases: current,
        lease: heartbeatLeaseName(node),
        holder: o.replica,
        now: () => o.clock.now(),
        keep: (cur) => ({ ...key.annotations(cur), ...watchdog?.annotations() }),
      }),
      sign: (c) => key.signVouch(c),
      publishedKeys: (n) => o.peerKeys.get(heartbeatLeaseName(n)) ?? [],
      now: () => o.clock.now(),
      log,
    });
  let busy = false;
  const beat = () => {
    if (busy || stopped) return;
    busy = true;
    renew()
      .then((r) => {
        if (!r.acquired) return;
        watchdog?.onRenewed();
        o.onAcquired();
      })
      .catch((err: unknown) => log.debug({ incident: "none", node, err }, "heartbeat renewal failed"))
      .finally(() => (busy = false));
  };
  beat();
  let timer = setInterval(beat, o.intervalMs);
  return {
    ...(watchdog ? { watchdog } : {}),
    setInterval: (ms) => {
      leases = leasesFor(ms);
      clearInterval(timer);
      if (!stopped) timer = setInterval(beat, ms);
    },
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await vouchServer?.close();
      await watchdog?.stop();
      kube?.close();
    },
  };
}
