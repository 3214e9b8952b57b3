// The watchdog agent of one node, run beside its event source (which renews the node's
// heartbeat Lease and tells the agent each time the API server acknowledged it): it opens
// (arms) the node's watchdog device once the first renewal is acknowledged, pets it every
// petIntervalMs only while
// core/watchdog.ts petDecision says the node is on the healthy side, and reports armed /
// not armed, with the device's timeout and the node's boot ID, as the annotation
// fastfence.io/watchdog that the event source writes on the node's heartbeat Lease (the
// timeout: the device's sysfs one, which must match the Node's fastfence.io/watchdog-timeout-ms
// when that is set, else that annotation or the configured one). A
// graceful stop disarms the device (the magic close); nothing else ever does. It never
// pets on a guess: an unknown renewal time counts as no renewal. When its renewals are
// more than half the grace old it asks its peers to vouch (source/vouch-client.ts) and
// counts each verified answer, dated when its request was sent; a strict majority of the
// cluster (itself included) keeps it petting (core/watchdog.ts). Times: monotonic only.
import { performance } from "node:perf_hooks";
import {
  petDecision,
  WATCHDOG_ANNOTATION,
  formatWatchdogReport,
  type WatchdogReport,
} from "../core/watchdog.ts";
import { asFastfenceError } from "../core/errors.ts";
import type { Logger } from "../infra/log.ts";
import {
  openWatchdogDevice,
  WatchdogUnavailableError,
  type WatchdogDevice,
} from "../infra/watchdog/device.ts";
import type { ParsedNodeTimeout } from "../core/watchdog-status.ts";
import type { AskResult } from "./vouch-client.ts";

export interface WatchdogAgentConfig {
  /** The device: /dev/watchdog (or /dev/watchdogN), or the lab's FIFO. */
  devicePath: string;
  /** Used when sysfs gives no timeout (the lab), ms. */
  timeoutMs?: number;
  /** How long after the last acknowledged heartbeat renewal the agent still pets, ms. */
  renewGraceMs: number;
  /** How often it pets, ms; well below the timeout. */
  petIntervalMs: number;
}

/** Gauges the agent keeps (served with the event source's metrics). */
export interface WatchdogMetrics {
  armed: { set(v: number): void };
  petting: { set(v: number): void };
}

export interface WatchdogAgent {
  /** The event source's heartbeat renewal was acknowledged by the API server now. */
  onRenewed(): void;
  /** The annotation to write on the heartbeat Lease (the current report). */
  annotations(): Record<string, string>;
  report(): WatchdogReport;
  /** Graceful stop: disarm, never reset. */
  stop(): Promise<void>;
}

export async function startWatchdogAgent(opts: {
  config: WatchdogAgentConfig;
  node: string;
  /** The node's current boot ID (status.nodeInfo.bootID), as the event source knows it. */
  bootId(): string;
  /** Nodes in the cluster, this one included. */
  clusterSize(): number;
  /**
   * This node's configured timeout (its Node annotation, core/watchdog-status.ts), or
   * "unknown" while the Node is not read yet (the agent then waits to arm). Unset: the
   * configured FASTFENCE_WATCHDOG_TIMEOUT_MS only.
   */
  nodeTimeout?: () => ParsedNodeTimeout | "unknown";
  log: Logger;
  metrics?: WatchdogMetrics;
  /** Monotonic ms; default performance.now. */
  mono?: () => number;
  /** Asks the peers to vouch (source/vouch-client.ts askPeers); unset: no vouching. */
  askPeers?: () => Promise<AskResult[]>;
}): Promise<WatchdogAgent> {
  const { config, log, node } = opts;
  let stopping = false;
  const mono = opts.mono ?? (() => performance.now());
  let device: WatchdogDevice | undefined;
  let notArmed = "waiting for the first acknowledged heartbeat renewal";
  let opening = false;
  let retryOpenAt = 0;
  opts.metrics?.armed.set(0);
  /**
   * Arms the device only once the node has proven itself healthy (a renewal acknowledged):
   * a node that boots while the API is not reachable yet must not be reset for it.
   */
  async function arm(): Promise<void> {
    if (device || opening || stopping || mono() < retryOpenAt) return;
    const nodeTimeout = opts.nodeTimeout?.() ?? { ok: true, timeoutMs: undefined };
    if (nodeTimeout === "unknown") return void (notArmed = "waiting for this node's Node object");
    opening = true;
    try {
      if (!nodeTimeout.ok) throw new WatchdogUnavailableError(nodeTimeout.reason);
      device = await openWatchdogDevice(config.devicePath, config.timeoutMs, nodeTimeout.timeoutMs);
      await device.pet();
      opts.metrics?.armed.set(1);
      log.info({ incident: "none", node, timeoutMs: device.timeoutMs }, "watchdog armed");
    } catch (err) {
      const e = asFastfenceError(err);
      if (e.message !== notArmed) log.warn({ incident: "none", node, err: e.toJSON() }, "watchdog not armed");
      notArmed = e.message;
      retryOpenAt = mono() + 30_000;
    } finally {
      opening = false;
    }
  }
  let lastRenewedAt: number | undefined;
  let lastReason = "";
  const vouchedAt = new Map<string, number>();
  let asking = false;
  /** Renewals more than half the grace old: ask the peers, once at a time. */
  function maybeAsk(now: number): void {
    if (!opts.askPeers || asking) return;
    if (lastRenewedAt !== undefined && now - lastRenewedAt <= config.renewGraceMs / 2) return;
    asking = true;
    opts
      .askPeers()
      .then((rs) => {
        for (const r of rs)
          if (r.vouchedAt !== undefined)
            vouchedAt.set(r.node, Math.max(vouchedAt.get(r.node) ?? -Infinity, r.vouchedAt));
        const refused = rs.filter((r) => r.refused);
        if (refused.length)
          log.debug(
            { incident: "none", node, refused: refused.map((r) => `${r.node}: ${r.refused}`) },
            "peers did not vouch",
          );
      })
      .catch(() => undefined)
      .finally(() => (asking = false));
  }

  async function tick(): Promise<void> {
    if (!device || stopping) return;
    const now = mono();
    maybeAsk(now);
    const d = petDecision({
      now,
      lastRenewedAt,
      vouchedAt,
      clusterSize: opts.clusterSize(),
      renewGraceMs: config.renewGraceMs,
      stopping: false,
    });
    opts.metrics?.petting.set(d.pet ? 1 : 0);
    if (d.reason !== lastReason) {
      (d.pet ? log.info : log.warn).call(log, { incident: "none", node, reason: d.reason }, d.message);
      lastReason = d.reason;
    }
    if (!d.pet) return;
    try {
      await device.pet();
    } catch (err) {
      log.error({ incident: "none", node, err: asFastfenceError(err).toJSON() }, "watchdog pet failed");
    }
  }
  const timer = setInterval(() => void tick(), config.petIntervalMs);

  const report = (): WatchdogReport =>
    device
      ? { armed: !stopping, timeoutMs: device.timeoutMs, bootId: opts.bootId() }
      : {
          armed: false,
          timeoutMs: config.timeoutMs ?? 1_000,
          bootId: opts.bootId(),
          reason: notArmed,
        };
  return {
    onRenewed: () => {
      lastRenewedAt = mono();
      void arm();
    },
    report,
    annotations: () => ({ [WATCHDOG_ANNOTATION]: formatWatchdogReport(report()) }),
    stop: async () => {
      stopping = true;
      clearInterval(timer);
      if (!device) return;
      try {
        await device.disarm();
        log.info({ incident: "none", node }, "watchdog disarmed (graceful stop)");
      } catch (err) {
        log.error({ incident: "none", node, err: asFastfenceError(err).toJSON() }, "watchdog disarm failed");
      }
      opts.metrics?.armed.set(0);
    },
  };
}
