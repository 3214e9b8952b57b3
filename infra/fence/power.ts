// Executes fence's powerOff and recover's powerOn actions: resolves each fencing level of
// the policy into a BMC driver (credentials through infra/bmc/credentials.ts from the
// level's Secret: the fastfence namespace for policy levels, the BareMetalHost's namespace
// for discovered ones), runs the levels in order (infra/bmc/levels.ts) and returns their
// attempts as they come, already in the incident's Attempt shape. For a discovered host it
// sets the reboot.metal3.io hold before the power-off (the Bare Metal Operator must not
// power it back on) and clears it before a power-on or when an incident ends
// (releaseHolds). An attempt is "off-confirmed" only when the driver read the power state
// back as Off after the command (S1, infra/bmc/driver.ts and levels.ts). Just before each
// level's off command it takes the action's last look (infra/fence/last-look.ts): a node
// that responds again stops the round with an "abandoned" attempt and no off command.
// Rotated credentials: every power action (a powerOff round, a powerOn, the prepare head
// start) reads its levels' Secrets as they are now (one GET per Secret), so an updated
// Secret is used by the next action without a restart. Drivers are kept per Secret content
// (driver-pool.ts): an unchanged Secret keeps its BMC session, a changed one gets a new
// driver and the old one is closed. A powerOff takes the read its own prepare started (same
// incident and round, at most HEAD_START_MAX_AGE_MS old) instead of a second GET. A GET per
// action rather than a Secret informer: fence's RBAC is `get` on Secrets (an informer needs
// list and watch in every namespace holding BMC Secrets and would keep all of their Secrets
// in memory), and prepare's GET overlaps the lease and incident writes. A BMC that rejects
// the credentials gives the attempt "auth-failed", its message naming the Secret (never its
// content). Every BMC call of a driver it builds is counted and timed (infra/bmc/metered.ts:
// fastfence_bmc_calls_total{driver,operation,result}, fastfence_bmc_call_duration_seconds).
// Credentials are never logged, returned, or put into a key, a label or a message.
import type { Action } from "../../core/decision.ts";
import { FastfenceError, InvalidInputError, asFastfenceError } from "../../core/errors.ts";
import { describeModes, insecureLevelProblem, insecureModes } from "../../core/level-security.ts";
import type { Attempt } from "../../core/incident.ts";
import type { FencingPolicySpec, ResolvedFencingLevel as PolicyLevel } from "../../core/policy.ts";
import {
  namingSecret,
  readBmcCredentials,
  secretName,
  type BmcCredentials,
  type SecretRef,
} from "../bmc/credentials.ts";
import type { BmcDriver } from "../bmc/driver.ts";
import { fenceWithLevels, type FencingLevel as DriverLevel } from "../bmc/levels.ts";
import { meteredDriver, type BmcMetrics } from "../bmc/metered.ts";
import { KubeMetal3Api } from "../bmc/metal3.ts";
import { driverForAddress, type BmcOptions } from "../bmc/settings.ts";
import type { Kube } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import type { PowerExecutor } from "../runtime/stage-executor.ts";
import type { Clock } from "../../core/clock.ts";
import { DriverPool, type DriverUse } from "./driver-pool.ts";
import { lookBeforeOff, type LookDeps } from "./last-look.ts";
import { watchdogLevel, type HeartbeatWatch } from "./watchdog-wait.ts";

export { startHeartbeatWatch } from "./watchdog-wait.ts";

type PowerOff = Extract<Action, { kind: "powerOff" }>;

/**
 * How old a prepare's Secret read may be for its powerOff to take it instead of reading
 * again: between the two run only the lease and incident writes (milliseconds), while a
 * retry round that first waits out its backoff reads afresh.
 */
export const HEAD_START_MAX_AGE_MS = 2000;

/** Builds the driver an address names (settings.ts driverForAddress); injectable for tests. */
export type DriverFactory = (address: string, creds: BmcCredentials, options: BmcOptions) => BmcDriver;

export interface PowerExecutorOptions {
  /** Default: driverForAddress. */
  driverFor?: DriverFactory;
  /** Secret-free notes (a driver replaced after its Secret changed). */
  log?: Logger;
  /** Counts and times every BMC call (fastfence_bmc_calls_total, fastfence_bmc_call_duration_seconds). */
  metrics?: Pick<BmcMetrics, "bmcCalls" | "bmcCallSeconds"> & Partial<Pick<BmcMetrics, "lastLooks">>;
  /** The last look's TCP probe (tests); default source/tcp-probe.ts. */
  probe?: LookDeps["probe"];
  /** The heartbeat watch the watchdog level reads (watchdog-wait.ts); absent: that level refuses. */
  heartbeats?: HeartbeatWatch;
}

/** Driver options from a policy level's string map (documented in docs/bmc.md). */
export function levelOptions(opts: Record<string, string> | undefined, timeoutMs: number): BmcOptions {
  const o = opts ?? {};
  const suite = o.cipherSuite ?? o.ipmiCipherSuite;
  return {
    ...(o.insecure === "true" ? { insecure: true } : {}),
    ...(o.ca ? { ca: o.ca } : {}),
    ...(o.offType ? { redfishOffType: o.offType as BmcOptions["redfishOffType"] } : {}),
    ...(suite === "3" || suite === "17" ? { ipmiCipherSuite: Number(suite) as 3 | 17 } : {}),
    ...(o.pollMs ? { pollMs: Number(o.pollMs) } : {}),
    timeoutMs,
  };
}

export class BmcPowerExecutor implements PowerExecutor {
  private readonly kube: Kube;
  private readonly secretNamespace: string;
  private readonly clock: Clock;
  private readonly metal3: KubeMetal3Api;
  private readonly driverFor: DriverFactory;
  private readonly log: Logger | undefined;
  private readonly metrics: PowerExecutorOptions["metrics"];
  private readonly pool = new DriverPool();
  private readonly look: LookDeps;
  private readonly heartbeats: HeartbeatWatch | undefined;
  /** Secret reads prepare started, by action and Secret, until that action's powerOff takes them. */
  private readonly headStarts = new Map<string, { at: number; read: Promise<BmcCredentials> }>();

  /** `metal3` carries the BareMetalHost namespaces (FASTFENCE_METAL3_NAMESPACES); default cluster-wide. */
  constructor(
    kube: Kube,
    secretNamespace: string,
    clock: Clock,
    metal3?: KubeMetal3Api,
    opts: PowerExecutorOptions = {},
  ) {
    this.kube = kube;
    this.secretNamespace = secretNamespace;
    this.clock = clock;
    this.metal3 = metal3 ?? new KubeMetal3Api(kube);
    this.driverFor = opts.driverFor ?? driverForAddress;
    this.log = opts.log;
    this.metrics = opts.metrics;
    this.heartbeats = opts.heartbeats;
    this.look = {
      kube,
      namespace: secretNamespace,
      ...(opts.log ? { log: opts.log } : {}),
      ...(opts.metrics?.lastLooks ? { lastLooks: opts.metrics.lastLooks } : {}),
      ...(opts.probe ? { probe: opts.probe } : {}),
    };
  }

  /**
   * A level's credentials Secret: a discovered level's in its host's namespace, a policy
   * level's in the fastfence namespace (a policy can never name another namespace).
   */
  private secretOf(level: PolicyLevel): SecretRef {
    return { namespace: level.discovered?.namespace ?? this.secretNamespace, name: level.credentialsSecret };
  }

  /** The Secret's credentials as they are now: one GET. */
  private read(ref: SecretRef): Promise<BmcCredentials> {
    return readBmcCredentials(this.kube, ref);
  }

  /** The read this powerOff's prepare started (taken once, if recent enough), else a new one. */
  private readFor(a: PowerOff, ref: SecretRef): Promise<BmcCredentials> {
    const key = headStartKey(a, ref);
    const hs = this.headStarts.get(key);
    this.headStarts.delete(key);
    if (!hs || this.clock.now() - hs.at > HEAD_START_MAX_AGE_MS) return this.read(ref);
    // a failed head start (the API blinked) is not the power-off's answer: read again
    return hs.read.catch(() => this.read(ref));
  }

  /**
   * The driver for a policy level holding the credentials `read` gives: the level's kept
   * one when they did not change (connections and session reused), else a new one; the
   * driver built from the previous credentials is closed once no action uses it. The
   * caller releases the use when done with it.
   */
  private async driverForLevel(level: PolicyLevel, read: Promise<BmcCredentials>): Promise<DriverUse> {
    const ref = this.secretOf(level);
    refuseInsecure(level);
    const creds = await read;
    const slot = `${level.address}|${secretName(ref)}|${JSON.stringify(level.options ?? {})}`;
    const options = levelOptions(level.options, level.timeoutMs);
    const u = this.pool.use(slot, creds, (c) => {
      const modes = insecureModes(level);
      if (modes.length)
        this.log?.warn(
          { incident: "none", node: "none", target: level.address, insecure: modes },
          `BMC level is insecure (${describeModes(modes)}, allowed by insecure: true): its traffic can be read or changed on the network`,
        );
      const d = namingSecret(this.driverFor(level.address, c, options), ref);
      return this.metrics ? meteredDriver(d, level.driver, this.metrics) : d;
    });
    if (u.replaced)
      this.log?.info(
        { secret: secretName(ref), target: u.driver.target },
        "BMC credentials Secret changed: new driver, the old one is closed",
      );
    return u;
  }

  async prepare(a: PowerOff, signal: AbortSignal): Promise<void> {
    const level = a.levels[0];
    if (!level || insecureLevelProblem(level, "")) return; // the power-off reports the refusal
    const ref = this.secretOf(level);
    const now = this.clock.now();
    for (const [k, hs] of this.headStarts) if (now - hs.at > HEAD_START_MAX_AGE_MS) this.headStarts.delete(k); // never taken
    const read = this.read(ref);
    read.catch(() => undefined); // its powerOff reads again and reports the problem
    // The powerOff that follows takes this read: a prepare and its power-off share one GET.
    this.headStarts.set(headStartKey(a, ref), { at: now, read });
    let use: DriverUse | undefined;
    try {
      use = await this.driverForLevel(level, read);
      // The level's own budget: a slow BMC's discovery and login carry on into the level.
      await use.driver.prepare?.({ timeoutMs: Math.min(level.timeoutMs, a.timeoutMs), signal });
    } catch {
      // Only a head start: the power-off reports any real problem with this level.
    } finally {
      use?.release();
    }
  }

  /**
   * Every level's driver for this round, from its Secret as read now (each Secret once).
   * All or nothing: when one level cannot be resolved, the uses already taken are released.
   */
  private async resolve(
    a: PowerOff,
    callTimeoutMs: number,
  ): Promise<{ levels: DriverLevel[]; uses: DriverUse[] }> {
    a.levels.forEach(refuseInsecure); // before any Secret is read
    const reads = new Map<string, Promise<BmcCredentials>>();
    const readOnce = (ref: SecretRef) => {
      let r = reads.get(secretName(ref));
      if (!r) reads.set(secretName(ref), (r = this.readFor(a, ref)));
      return r;
    };
    const settled = await Promise.allSettled(
      a.levels.map((l) => this.driverForLevel(l, readOnce(this.secretOf(l)))),
    );
    const uses = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const failed = settled.find((r) => r.status === "rejected");
    if (failed) {
      for (const u of uses) u.release();
      throw failed.reason;
    }
    const levels = a.levels.map((l, i) => ({
      protocol: l.driver,
      driver: uses[i]!.driver,
      timeoutMs: l.timeoutMs,
      callTimeoutMs,
      pollMs: Number(l.options?.pollMs ?? 100),
    }));
    return { levels, uses };
  }

  /**
   * One round: the levels in order within the round's budget (the action's timeoutMs, the
   * policy's timeouts.powerOffTimeoutMs, counted from here, holds and credentials included),
   * each BMC call capped at the policy's timeouts.bmcCallTimeoutMs.
   */
  async powerOff(a: PowerOff, policy: FencingPolicySpec, signal: AbortSignal): Promise<Attempt[]> {
    const start = this.clock.now();
    let resolved: { levels: DriverLevel[]; uses: DriverUse[] };
    try {
      // Hold first: once off, the Bare Metal Operator must not power the host back on.
      for (const h of discoveredHosts(a.levels)) await this.metal3.hold(h, a.incident);
      resolved = await this.resolve(a, policy.timeouts.bmcCallTimeoutMs);
    } catch (err) {
      const e = asFastfenceError(err, "FF_INVALID_CONFIG");
      const iso = new Date(start).toISOString();
      return [
        {
          round: a.round,
          level: 0,
          driver: a.levels[0]?.driver ?? "redfish",
          by: a.holder,
          startedAt: iso,
          finishedAt: new Date(this.clock.now()).toISOString(),
          result: "error",
          errorCode: e.code,
          message: e.message,
        },
      ];
    }
    try {
      const outcome = await fenceWithLevels(resolved.levels, {
        round: a.round,
        by: a.holder,
        now: () => this.clock.now(),
        roundEndsAt: start + a.timeoutMs,
        signal,
        sleep: (ms, s) => this.clock.sleep(ms, s),
        ...(a.skipLevels ? { skip: a.skipLevels } : {}),
        ...(a.look
          ? { beforeOff: (level: number) => lookBeforeOff(this.look, a.look!, a.incident, level) }
          : {}),
      });
      if (outcome.confirmed) return outcome.attempts;
      const wd = await this.watchdogLevel(
        a,
        outcome.attempts,
        start + a.timeoutMs - this.clock.now(),
        signal,
      );
      return wd ? [...outcome.attempts, wd] : outcome.attempts;
    } finally {
      for (const u of resolved.uses) u.release();
    }
  }

  /** The round's watchdog level after its BMC levels (watchdog-wait.ts), if it has one and may try it. */
  private watchdogLevel(
    a: PowerOff,
    bmc: Attempt[],
    leftMs: number,
    signal: AbortSignal,
  ): Promise<Attempt | undefined> {
    if (!a.watchdog) return Promise.resolve(undefined);
    const watch = this.heartbeats ?? NO_WATCH;
    return watchdogLevel(
      {
        watch,
        look: this.look,
        ...(this.log ? { log: this.log } : {}),
        now: () => this.clock.now(),
        sleep: (ms, s) => this.clock.sleep(ms, s),
      },
      a,
      bmc,
      leftMs,
      signal,
    );
  }

  async powerOn(
    a: Extract<Action, { kind: "powerOn" }>,
    _policy: FencingPolicySpec,
    signal: AbortSignal,
  ): Promise<void> {
    // Let the Bare Metal Operator power it on too (spec.online), and not fight our on.
    for (const h of discoveredHosts(a.levels)) await this.metal3.release(h, a.incident);
    let lastErr: unknown;
    for (const l of a.levels) {
      let use: DriverUse | undefined;
      try {
        // the Secret as it is now: a rotated one is used, a wrong one is named in the error
        use = await this.driverForLevel(l, this.read(this.secretOf(l)));
        await use.driver.on({ timeoutMs: l.timeoutMs, signal });
        return;
      } catch (err) {
        lastErr = err;
      } finally {
        use?.release();
      }
    }
    const why = lastErr instanceof FastfenceError ? ` (last: ${lastErr.message})` : "";
    throw new FastfenceError("FF_BMC_UNREACHABLE", `no fencing level could power ${a.node} on${why}`, {
      cause: lastErr,
      retriable: true,
    });
  }

  /** Clears an ending incident's hold on every host that carries it (strict with discovery on). */
  releaseHolds(incident: string, policy: FencingPolicySpec): Promise<string[]> {
    return this.metal3.releaseIncident(incident, policy.fencing.discovery === "Metal3");
  }
}

/** Without a heartbeat watch no report is ever seen: the watchdog level refuses (NoWatchdog). */
const NO_WATCH: HeartbeatWatch = {
  seen: () => ({
    report: undefined,
    watchSyncedSince: undefined,
    lastRenewalSeenAt: undefined,
    lastVouchSeenAt: undefined,
  }),
  stop: () => undefined,
};

/**
 * Plain HTTP or no certificate checks only on a level that says insecure: true: the policy
 * reader and discovery refuse such a level already; one that reaches here anyway is refused too.
 */
function refuseInsecure(level: PolicyLevel): void {
  const problem = insecureLevelProblem(level, `fencing level ${level.driver} ${level.address}`);
  if (problem) throw new InvalidInputError("FF_INVALID_CONFIG", problem);
}

function discoveredHosts(levels: readonly PolicyLevel[]): { namespace: string; name: string }[] {
  const seen = new Map<string, { namespace: string; name: string }>();
  for (const l of levels)
    if (l.discovered) seen.set(`${l.discovered.namespace}/${l.discovered.name}`, l.discovered);
  return [...seen.values()];
}

/** Where a prepare leaves its read for its powerOff: the action (incident, round) and the Secret. */
function headStartKey(a: PowerOff, ref: SecretRef): string {
  return `${a.incident}#${a.round}|${secretName(ref)}`;
}
