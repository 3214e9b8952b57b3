// BMC health check, modelled on Pacemaker's stonith "monitor" operation: every interval,
// each fence replica reads the power state of every node's fencing levels (the policy's
// levels for the node, core/policy-levels.ts resolveLevels, with metal3 discovery when the policy
// opts in) — a login and one status read per level, nothing that changes power — and
// exports the result per node and level: fastfence_bmc_up{node,level,driver} and
// fastfence_bmc_check_result{node,level,driver,result} (and fastfence_bmc_insecure{node,level,
// driver,mode} for a level allowed to use plain HTTP or no certificate checks), where a BMC that rejects the
// credentials (auth-failed) is told apart from one that does not answer (unreachable,
// timeout) and from a Secret that is missing or unusable (credentials). So a wrong password
// is an alert within one interval, not a surprise during the next fencing.
// Every fence replica runs it, not one elected replica: any replica may be the one that
// fences, and what matters is that its own network path and the credentials it reads work;
// a check costs one Secret GET and one short BMC session per level and interval.
// Each check builds its own driver from the Secret as it is now and closes it after (logs
// out), so it never shares, queues behind or disturbs the power executor's sessions (an
// IPMI session serves one exchange at a time) and never holds a BMC session slot between
// checks. It never powers anything on or off, never logs or exports a credential, an
// address or an error message (results are a fixed vocabulary), and a failed pass only
// leaves the previous values and tries again next interval.
import type { Clock } from "../../core/clock.ts";
import { asFastfenceError } from "../../core/errors.ts";
import { describeModes, insecureModes, type InsecureMode } from "../../core/level-security.ts";
import { type FencingPolicySpec, type ResolvedFencingLevel } from "../../core/policy.ts";
import { resolveLevels } from "../../core/policy-levels.ts";
import { BmcCredentialsError, namingSecret, readBmcCredentials, type SecretRef } from "../bmc/credentials.ts";
import { discoverLevels, type Metal3Api } from "../bmc/metal3.ts";
import { bmcResultOf, meteredDriver, type BmcCheckResult, type BmcMetrics } from "../bmc/metered.ts";
import { driverForAddress } from "../bmc/settings.ts";
import { KubeApiError, type Kube } from "../kube/client.ts";
import type { NodeInfo } from "../kube/nodes.ts";
import type { Logger } from "../log.ts";
import { levelOptions, type DriverFactory } from "./power.ts";

export interface BmcHealthOptions {
  kube: Kube;
  /** Namespace of the policy levels' Secrets (the fastfence namespace). */
  secretNamespace: string;
  nodes: { list(): Promise<Pick<NodeInfo, "name" | "labels">[]> };
  policy(now: number): Promise<FencingPolicySpec>;
  /** metal3 discovery, for a policy with fencing.discovery Metal3. */
  metal3?: Metal3Api;
  /** Pause between passes, ms (FASTFENCE_BMC_HEALTH_INTERVAL_MS). */
  intervalMs: number;
  clock: Clock;
  log: Logger;
  metrics: BmcMetrics;
  driverFor?: DriverFactory;
  /** Levels checked at the same time, at most. Default 4. */
  concurrency?: number;
  /** Jitter source in [0, 1): injected for tests. */
  random?: () => number;
}

export interface BmcHealthCheck {
  /** One pass now (also what the loop runs): every level of every node checked once. */
  pass(): Promise<CheckReport[]>;
  stop(): Promise<void>;
}

export interface CheckReport {
  node: string;
  level: number;
  driver: string;
  result: BmcCheckResult;
  /** How the level reaches its BMC insecurely (allowed by its insecure: true); empty: securely. */
  insecure: InsecureMode[];
}

/** A level the pass could not check (its Secret could not be read for a transient reason). */
const NOT_CHECKED = Symbol("not checked");

export function startBmcHealthCheck(o: BmcHealthOptions): BmcHealthCheck {
  const stopping = new AbortController();
  const driverFor = o.driverFor ?? driverForAddress;
  const random = o.random ?? Math.random;
  /** The result series set last, by node|level|driver, to remove when it changes or goes. */
  const current = new Map<string, CheckReport>();
  let lastProblem = "";
  let running: Promise<CheckReport[]> | undefined;

  function secretOf(level: ResolvedFencingLevel): SecretRef {
    return { namespace: level.discovered?.namespace ?? o.secretNamespace, name: level.credentialsSecret };
  }

  async function check(
    level: ResolvedFencingLevel,
    policy: FencingPolicySpec,
  ): Promise<BmcCheckResult | typeof NOT_CHECKED> {
    const ref = secretOf(level);
    let driver;
    try {
      const creds = await readBmcCredentials(o.kube, ref);
      const options = levelOptions(level.options, level.timeoutMs);
      driver = meteredDriver(
        namingSecret(driverFor(level.address, creds, options), ref),
        level.driver,
        o.metrics,
      );
    } catch (err) {
      if (err instanceof BmcCredentialsError) return "credentials";
      if (err instanceof KubeApiError && err.status === 404) return "credentials";
      if (err instanceof KubeApiError) return NOT_CHECKED;
      return "error"; // a level address no driver understands
    }
    const signal = stopping.signal;
    try {
      await driver.prepare?.({ timeoutMs: level.timeoutMs, signal });
      await driver.status({ timeoutMs: policy.timeouts.bmcCallTimeoutMs, signal });
      return "ok";
    } catch (err) {
      return bmcResultOf(err);
    } finally {
      await driver.close?.().catch(() => undefined);
    }
  }

  async function levelsOf(
    node: Pick<NodeInfo, "name" | "labels">,
    policy: FencingPolicySpec,
  ): Promise<ResolvedFencingLevel[]> {
    let discovered: ResolvedFencingLevel[] | undefined;
    const own = resolveLevels(policy, node, undefined);
    if (!own && policy.fencing.discovery === "Metal3" && o.metal3) {
      const d = await discoverLevels(o.metal3, node.name).catch(() => ({ discoveryError: "" }));
      if ("discoveredLevels" in d) discovered = d.discoveredLevels;
    }
    return own ?? resolveLevels(policy, node, discovered) ?? [];
  }

  function record(r: CheckReport): void {
    const key = `${r.node}|${r.level}|${r.driver}`;
    const before = current.get(key);
    const labels = { node: r.node, level: String(r.level), driver: r.driver };
    if (before && before.result !== r.result)
      o.metrics.bmcCheckResult.remove({ ...labels, result: before.result });
    for (const mode of before?.insecure ?? []) o.metrics.bmcInsecure.remove({ ...labels, mode });
    for (const mode of r.insecure) o.metrics.bmcInsecure.set({ ...labels, mode }, 1);
    if (r.insecure.length && !before?.insecure.length)
      o.log.warn(
        { incident: "none", node: r.node, level: r.level, driver: r.driver, insecure: r.insecure },
        `BMC health check: this fencing level is insecure (${describeModes(r.insecure)}), allowed by its insecure: true`,
      );
    o.metrics.bmcCheckResult.set({ ...labels, result: r.result }, 1);
    o.metrics.bmcUp.set(labels, r.result === "ok" ? 1 : 0);
    current.set(key, r);
    if (before?.result === r.result) return;
    if (r.result === "ok")
      o.log.info({ incident: "none", node: r.node, level: r.level }, "BMC health check: power state read");
    else
      o.log.warn(
        { incident: "none", node: r.node, level: r.level, driver: r.driver, result: r.result },
        r.result === "auth-failed"
          ? "BMC health check: the BMC rejected the credentials of this fencing level"
          : "BMC health check failed: this fencing level may not work when it is needed",
      );
  }

  /** Removes the series of levels the last pass did not have (node gone, policy changed). */
  function forgetAllBut(seen: Set<string>): void {
    for (const [key, r] of current) {
      if (seen.has(key)) continue;
      const labels = { node: r.node, level: String(r.level), driver: r.driver };
      o.metrics.bmcCheckResult.remove({ ...labels, result: r.result });
      o.metrics.bmcUp.remove(labels);
      for (const mode of r.insecure) o.metrics.bmcInsecure.remove({ ...labels, mode });
      current.delete(key);
    }
  }

  async function pass(): Promise<CheckReport[]> {
    const policy = await o.policy(o.clock.now());
    const nodes = await o.nodes.list();
    const todo: { node: string; index: number; level: ResolvedFencingLevel }[] = [];
    for (const n of nodes) {
      const levels = await levelsOf(n, policy);
      levels.forEach((level, index) => todo.push({ node: n.name, index, level }));
    }
    const reports: CheckReport[] = [];
    const seen = new Set<string>();
    let next = 0;
    const worker = async () => {
      while (next < todo.length && !stopping.signal.aborted) {
        const t = todo[next++]!;
        seen.add(`${t.node}|${t.index}|${t.level.driver}`);
        const result = await check(t.level, policy);
        if (result === NOT_CHECKED) continue; // the previous value stands
        const r = {
          node: t.node,
          level: t.index,
          driver: t.level.driver,
          result,
          insecure: insecureModes(t.level),
        };
        record(r);
        reports.push(r);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, o.concurrency ?? 4) }, worker));
    if (!stopping.signal.aborted) forgetAllBut(seen);
    return reports;
  }

  async function loop(): Promise<void> {
    // The first pass within one interval of the start (spread over the replicas).
    let wait = o.intervalMs * random();
    while (!stopping.signal.aborted) {
      await o.clock.sleep(wait, stopping.signal).catch(() => undefined);
      if (stopping.signal.aborted) return;
      try {
        running = pass();
        await running;
        lastProblem = "";
      } catch (err) {
        const e = asFastfenceError(err);
        if (e.message !== lastProblem && !stopping.signal.aborted)
          o.log.warn(
            { incident: "none", node: "none", err: e.toJSON() },
            "BMC health check pass failed (policy or nodes unreadable); trying again next interval",
          );
        lastProblem = e.message;
      } finally {
        running = undefined;
      }
      wait = o.intervalMs * (0.9 + 0.2 * random());
    }
  }

  void loop();
  return {
    pass,
    stop: async () => {
      stopping.abort(new Error("BMC health check stopped"));
      await running?.catch(() => undefined);
    },
  };
}
