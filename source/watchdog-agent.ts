// The watchdog agent of one node, run beside its event source (which renews the node's
// heartbeat Lease and tells the agent each time the API server acknowledged it): it opens
// (arms) the node's watchdog device once the first renewal is acknowledged, and only while
// `wanted` says the FencingPolicy asks for it on this node (source/watchdog-settings.ts
// watchdogArming: a device alone arms nothing), pets it every petIntervalMs only while
// core/watchdog.ts petDecision says the node is on the healthy side, and reports armed /
// not armed (and whether the policy asks for it), with the timeout and the pet grace it
// really uses and the node's boot ID, as the annotation fastfence.io/watchdog that the event
// source writes on the node's heartbeat Lease (the timeout: the device's own, from sysfs, or
// the lab emulation's; never a Node annotation's or FASTFENCE_WATCHDOG_TIMEOUT_MS's, which
// can only refuse a device whose timeout differs: infra/watchdog/device.ts). It disarms (the
// magic close) only after "not armed" has been recorded on that Lease (`record`
// acknowledged): on a graceful stop (also one that comes while the device is being opened),
// and when the policy stops asking for it. Until then it keeps petting by the same rule; a
// record that is refused, fails or never lands leaves the device armed (the node resets),
// because a Lease still saying "armed" over a disarmed device could let fence count a
// running node as reset. It never pets on a guess: an unknown renewal time counts as no
// renewal. When its renewals are more than half the grace old it asks its peers
// to vouch (source/vouch-client.ts) and counts each verified answer, dated when its request
// was sent; a strict majority of the cluster (itself included) keeps it petting
// (core/watchdog.ts). Times: monotonic only.
import { performance } from "node:perf_hooks";
import {
  petDecision,
  WATCHDOG_ANNOTATION,
  WATCHDOG_TIMEOUT_MS,
  formatWatchdogReport,
  type WatchdogReport,
} from "../core/watchdog.ts";
import { asFastfenceError } from "../core/errors.ts";
import type { Logger } from "../infra/log.ts";
import {
  openWatchdogDevice,
  WatchdogUnavailableError,
  type StatDevice,
  type WatchdogDevice,
  type WatchdogEmulation,
} from "../infra/watchdog/device.ts";
import type { ParsedNodeTimeout } from "../core/watchdog-status.ts";
import type { AskResult } from "./vouch-client.ts";

export interface WatchdogAgentConfig {
  /** The device: /dev/watchdog (or /dev/watchdogN), or the lab's FIFO (emulation only). */
  devicePath: string;
  /**
   * With `emulation`: the emulated device's timeout, ms. Without: only what the device's
   * sysfs timeout must be (a device whose timeout differs is not armed); never reported.
   */
  timeoutMs?: number;
  /** The lab's FIFO (FASTFENCE_WATCHDOG_EMULATION); no shipped overlay sets it. */
  emulation?: WatchdogEmulation;
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

/** What the policy says of this node's watchdog now (source/watchdog-settings.ts watchdogArming). */
export type WatchdogWanted =
  | { arm: true }
  | {
      arm: false;
      reason: string;
      /** false: the policy gives this node no watchdog level (not armed by choice, not a fault). */
      requested: boolean;
    };

export interface WatchdogAgent {
  /** The event source's heartbeat renewal was acknowledged by the API server now. */
  onRenewed(): void;
  /** The annotation to write on the heartbeat Lease (the current report). */
  annotations(): Record<string, string>;
  report(): WatchdogReport;
  /**
   * Graceful stop: "not armed" recorded on the Lease first, then disarmed (never a reset);
   * if the record does not land within stopRecordMs the device is left armed.
   */
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
  /**
   * Whether the policy asks for this node's watchdog now, asked before every arming and on
   * every pet round. Unset: always (a bare agent: the lab's tests).
   */
  wanted?: () => WatchdogWanted;
  /**
   * Writes the current report on the node's heartbeat Lease; true once the API server
   * acknowledged it. Required before any disarm. Unset: no Lease carries the report, so
   * nothing needs recording (a bare agent).
   */
  record?: () => Promise<boolean>;
  /** How long a graceful stop tries to record "not armed" before it gives up, ms. Default 3000. */
  stopRecordMs?: number;
  /** What a device path is (tests: plain data); default node:fs stat. */
  statDevice?: StatDevice;
  /** Where sysfs' watchdog class is; default /sys/class/watchdog. */
  sysfs?: string;
}): Promise<WatchdogAgent> {
  const { config, log, node } = opts;
  let stopping = false;
  const mono = opts.mono ?? (() => performance.now());
  let device: WatchdogDevice | undefined;
  let notArmed = "waiting for the first acknowledged heartbeat renewal";
  /** The open in flight, if any: a stop waits for it, so a device opened then is disarmed or left armed by the same rule. */
  let opening: Promise<void> | undefined;
  let retryOpenAt = 0;
  /** false: the policy gives this node no watchdog level (reported as requested: false). */
  let requested = true;
  /** The device is open but the policy no longer asks for it: reported not armed, disarmed once recorded. */
  let releasing = false;
  let recording = false;
  opts.metrics?.armed.set(0);

  /** The magic close, after "not armed" was recorded. */
  async function disarmDevice(why: string): Promise<void> {
    const d = device;
    if (!d) return;
    device = undefined;
    try {
      await d.disarm();
      log.info({ incident: "none", node, why }, "watchdog disarmed (not armed recorded first)");
    } catch (err) {
      log.error({ incident: "none", node, err: asFastfenceError(err).toJSON() }, "watchdog disarm failed");
    }
    opts.metrics?.armed.set(0);
    opts.metrics?.petting.set(0);
  }

  /** Writes the current (not armed) report; true once acknowledged. */
  async function recordReport(): Promise<boolean> {
    if (!opts.record) return true;
    return opts.record().catch(() => false);
  }

  /** The device is open and the policy stopped asking: record "not armed", then disarm. */
  async function release(): Promise<void> {
    if (recording || !device || stopping) return;
    recording = true;
    try {
      if (!(await recordReport())) return; // the next pet round tries again; the report says not armed
      const w = opts.wanted?.() ?? { arm: true };
      if (w.arm || stopping) return void (releasing = false);
      await disarmDevice(w.reason);
    } finally {
      recording = false;
    }
  }

  /** Follows `wanted`: true when the agent may arm (or stay armed). */
  function follow(): boolean {
    if (stopping) return false;
    const w = opts.wanted?.() ?? { arm: true };
    if (w.arm) {
      requested = true;
      if (releasing && !recording) {
        releasing = false;
        log.info({ incident: "none", node }, "watchdog asked for again before it was disarmed: stays armed");
      }
      return true;
    }
    requested = w.requested;
    if (w.reason !== notArmed && !device)
      log.info({ incident: "none", node, reason: w.reason }, "watchdog not armed");
    notArmed = w.reason;
    if (device) {
      if (!releasing)
        log.info(
          { incident: "none", node, reason: w.reason },
          "watchdog no longer asked for: recording not armed on the heartbeat Lease, then disarming",
        );
      releasing = true;
      void release();
    }
    return false;
  }
  /**
   * Arms the device only once the node has proven itself healthy (a renewal acknowledged):
   * a node that boots while the API is not reachable yet must not be reset for it.
   */
  function arm(): Promise<void> {
    if (!follow() || device || opening || mono() < retryOpenAt) return Promise.resolve();
    const nodeTimeout = opts.nodeTimeout?.() ?? { ok: true, timeoutMs: undefined };
    if (nodeTimeout === "unknown") {
      notArmed = "waiting for this node's Node object";
      return Promise.resolve();
    }
    opening = open(nodeTimeout).finally(() => (opening = undefined));
    return opening;
  }
  async function open(nodeTimeout: ParsedNodeTimeout): Promise<void> {
    try {
      if (!nodeTimeout.ok) throw new WatchdogUnavailableError(nodeTimeout.reason);
      // Others' values only refuse a device whose own timeout differs; never reported.
      const expected = [
        ...(nodeTimeout.timeoutMs !== undefined
          ? [{ timeoutMs: nodeTimeout.timeoutMs, from: "the node's fastfence.io/watchdog-timeout-ms" }]
          : []),
        ...(!config.emulation && config.timeoutMs !== undefined
          ? [{ timeoutMs: config.timeoutMs, from: "FASTFENCE_WATCHDOG_TIMEOUT_MS" }]
          : []),
      ];
      if (config.emulation && config.timeoutMs === undefined)
        throw new WatchdogUnavailableError(
          `watchdog ${config.devicePath}: FASTFENCE_WATCHDOG_EMULATION=${config.emulation} needs FASTFENCE_WATCHDOG_TIMEOUT_MS`,
        );
      device = await openWatchdogDevice(config.devicePath, {
        ...(config.emulation ? { emulation: { mode: config.emulation, timeoutMs: config.timeoutMs! } } : {}),
        expected,
        ...(opts.statDevice ? { stat: opts.statDevice } : {}),
        ...(opts.sysfs ? { sysfs: opts.sysfs } : {}),
      });
      await device.pet();
      opts.metrics?.armed.set(1);
      log.info(
        { incident: "none", node, timeoutMs: device.timeoutMs, renewGraceMs: config.renewGraceMs },
        stopping
          ? "watchdog opened while stopping (the stop records not armed, then disarms)"
          : "watchdog armed",
      );
    } catch (err) {
      const e = asFastfenceError(err);
      if (e.message !== notArmed) log.warn({ incident: "none", node, err: e.toJSON() }, "watchdog not armed");
      notArmed = e.message;
      retryOpenAt = mono() + 30_000;
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
    if (!device) return;
    follow();
    if (!device) return;
    // While "not armed" is being recorded (a release, a stop) it goes on petting by the same rule.
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
      await device?.pet();
    } catch (err) {
      log.error({ incident: "none", node, err: asFastfenceError(err).toJSON() }, "watchdog pet failed");
    }
  }
  const timer = setInterval(() => void tick(), config.petIntervalMs);
  follow(); // the policy's answer is in the first report already

  // The grace it really pets with is stated: fence waits for the longest grace any source states.
  const report = (): WatchdogReport =>
    device && !stopping && !releasing
      ? { armed: true, timeoutMs: device.timeoutMs, bootId: opts.bootId(), renewGraceMs: config.renewGraceMs }
      : {
          armed: false,
          // A not-armed report proves nothing; its timeout is the device's if open, else the least.
          timeoutMs: device?.timeoutMs ?? WATCHDOG_TIMEOUT_MS.min,
          bootId: opts.bootId(),
          renewGraceMs: config.renewGraceMs,
          reason: stopping ? "stopping (a graceful stop disarms it)" : notArmed,
          ...(requested ? {} : { requested: false }),
        };
  return {
    onRenewed: () => {
      lastRenewedAt = mono();
      void arm();
    },
    report,
    annotations: () => ({ [WATCHDOG_ANNOTATION]: formatWatchdogReport(report()) }),
    stop: async () => {
      if (stopping) return;
      stopping = true; // the report says not armed from now on; petting goes on until it is recorded
      // An open in flight finishes first: a device it opens is recorded and disarmed like any other.
      await opening;
      if (!device) return void clearInterval(timer);
      const deadline = mono() + (opts.stopRecordMs ?? 3_000);
      let recorded = await recordReport();
      while (!recorded && mono() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        recorded = await recordReport();
      }
      clearInterval(timer);
      if (!recorded) {
        opts.metrics?.petting.set(0);
        log.error(
          { incident: "none", node, timeoutMs: device.timeoutMs },
          "watchdog left armed: 'not armed' could not be recorded on the heartbeat Lease (a decider could count a disarmed node as reset); the node resets within its timeout",
        );
        return;
      }
      await disarmDevice("graceful stop");
    },
  };
}
