// Executes fence's powerOff and recover's powerOn actions: resolves each fencing level of
// the policy into a BMC driver (credentials through infra/bmc/credentials.ts from the
// level's Secret: the fastfence namespace for policy levels, the BareMetalHost's namespace
// for discovered ones), runs the levels in order (infra/bmc/levels.ts) and returns their
// attempts as they come, already in the incident's Attempt shape. For a discovered host it
// sets the reboot.metal3.io hold before the power-off (the Bare Metal Operator must not
// power it back on) and clears it before a power-on or when an incident ends
// (releaseHolds). An attempt is "off-confirmed" only when the driver read the power state
// back as Off after the command (S1, infra/bmc/driver.ts and levels.ts). Credentials are
// read per driver and never logged or returned.
import type { Action } from "../../core/decision.ts";
import { FastfenceError, asFastfenceError } from "../../core/errors.ts";
import type { Attempt } from "../../core/incident.ts";
import type { FencingPolicySpec, ResolvedFencingLevel as PolicyLevel } from "../../core/policy.ts";
import { readBmcCredentials } from "../bmc/credentials.ts";
import type { BmcDriver } from "../bmc/driver.ts";
import { fenceWithLevels, type FencingLevel as DriverLevel } from "../bmc/levels.ts";
import { KubeMetal3Api } from "../bmc/metal3.ts";
import { driverForAddress, type BmcOptions } from "../bmc/settings.ts";
import type { Kube } from "../kube/client.ts";
import type { PowerExecutor } from "../runtime/stage-executor.ts";
import type { Clock } from "../../core/clock.ts";

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
  private readonly drivers = new Map<string, Promise<BmcDriver>>();

  /** `metal3` carries the BareMetalHost namespaces (FASTFENCE_METAL3_NAMESPACES); default cluster-wide. */
  constructor(kube: Kube, secretNamespace: string, clock: Clock, metal3?: KubeMetal3Api) {
    this.kube = kube;
    this.secretNamespace = secretNamespace;
    this.clock = clock;
    this.metal3 = metal3 ?? new KubeMetal3Api(kube);
  }

  /**
   * The driver for a policy level: read its credentials Secret and construct the driver on
   * first use, then reuse it (cached per address+secret+options) so connections (Redfish
   * sessions, keep-alive) are reused. A discovered level's Secret is read in its host's
   * namespace, a policy level's in the fastfence namespace (a policy can never name
   * another namespace).
   */
  private async driverForLevel(level: PolicyLevel): Promise<BmcDriver> {
    const namespace = level.discovered?.namespace ?? this.secretNamespace;
    const key = `${level.address}|${namespace}/${level.credentialsSecret}|${JSON.stringify(level.options ?? {})}`;
    let d = this.drivers.get(key);
    if (!d) {
      // The promise is cached, so a prepare and the power-off that follows share one read.
      d = readBmcCredentials(this.kube, { namespace, name: level.credentialsSecret }).then((creds) =>
        driverForAddress(level.address, creds, levelOptions(level.options, level.timeoutMs)),
      );
      this.drivers.set(key, d);
      d.catch(() => this.drivers.delete(key));
    }
    return d;
  }

  async prepare(a: Extract<Action, { kind: "powerOff" }>, signal: AbortSignal): Promise<void> {
    const level = a.levels[0];
    if (!level) return;
    try {
      const d = await this.driverForLevel(level);
      // The level's own budget: a slow BMC's discovery and login carry on into the level.
      await d.prepare?.({ timeoutMs: Math.min(level.timeoutMs, a.timeoutMs), signal });
    } catch {
      // Only a head start: the power-off reports any real problem with this level.
    }
  }

  private async resolve(levels: PolicyLevel[], callTimeoutMs: number): Promise<DriverLevel[]> {
    const driver: DriverLevel[] = [];
    for (const l of levels) {
      driver.push({
        protocol: l.driver,
        driver: await this.driverForLevel(l),
        timeoutMs: l.timeoutMs,
        callTimeoutMs,
        pollMs: Number(l.options?.pollMs ?? 100),
      });
    }
    return driver;
  }

  /**
   * One round: the levels in order within the round's budget (the action's timeoutMs, the
   * policy's timeouts.powerOffTimeoutMs, counted from here, holds and credentials included),
   * each BMC call capped at the policy's timeouts.bmcCallTimeoutMs.
   */
  async powerOff(
    a: Extract<Action, { kind: "powerOff" }>,
    policy: FencingPolicySpec,
    signal: AbortSignal,
  ): Promise<Attempt[]> {
    const start = this.clock.now();
    let levels: DriverLevel[];
    try {
      // Hold first: once off, the Bare Metal Operator must not power the host back on.
      for (const h of discoveredHosts(a.levels)) await this.metal3.hold(h, a.incident);
      levels = await this.resolve(a.levels, policy.timeouts.bmcCallTimeoutMs);
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
    const outcome = await fenceWithLevels(levels, {
      round: a.round,
      by: a.holder,
      now: () => this.clock.now(),
      roundEndsAt: start + a.timeoutMs,
      signal,
      sleep: (ms, s) => this.clock.sleep(ms, s),
    });
    return outcome.attempts;
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
      try {
        const d = await this.driverForLevel(l);
        await d.on({ timeoutMs: l.timeoutMs, signal });
        return;
      } catch (err) {
        lastErr = err;
      }
    }
    throw new FastfenceError("FF_BMC_UNREACHABLE", `no fencing level could power ${a.node} on`, {
      cause: lastErr,
      retriable: true,
    });
  }

  /** Clears an ending incident's hold on every host that carries it (strict with discovery on). */
  releaseHolds(incident: string, policy: FencingPolicySpec): Promise<string[]> {
    return this.metal3.releaseIncident(incident, policy.fencing.discovery === "Metal3");
  }
}

function discoveredHosts(levels: readonly PolicyLevel[]): { namespace: string; name: string }[] {
  const seen = new Map<string, { namespace: string; name: string }>();
  for (const l of levels)
    if (l.discovered) seen.set(`${l.discovered.namespace}/${l.discovered.name}`, l.discovered);
  return [...seen.values()];
}
