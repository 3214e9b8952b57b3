// Whether a node's event source arms its watchdog, and with what settings. Two parts:
// watchdogDevice reads where the device is and how to pet it from the event source's
// environment (infra/config.ts FASTFENCE_WATCHDOG_*), refusing a bad combination at start
// with an error naming the variable, never a silent default (the lab's emulation mode
// without its timeout is one); watchdogArming then decides,
// from that, the FencingPolicy and the node, whether the agent may arm: only when the
// policy's node entry for this node has the watchdog level (fencing.nodes[].watchdog; the
// first matching entry, as fence reads it) — a device alone arms nothing — and the
// settings agree with the policy's heartbeat interval (a grace shorter than two heartbeats
// would let one slow renewal stop the petting). Pure: it opens nothing and reads no clock;
// the decision is re-made on every policy change (source/policy-follow.ts).
import { InvalidInputError } from "../core/errors.ts";
import { watchdogForNode, type FencingPolicySpec } from "../core/policy.ts";
import type { RuntimeConfig } from "../infra/config.ts";
import type { WatchdogAgentConfig, WatchdogWanted } from "./watchdog-agent.ts";

/** The environment variables the watchdog settings come from. */
export type WatchdogEnv = Pick<
  RuntimeConfig,
  | "FASTFENCE_WATCHDOG_DEVICE"
  | "FASTFENCE_WATCHDOG_TIMEOUT_MS"
  | "FASTFENCE_WATCHDOG_EMULATION"
  | "FASTFENCE_WATCHDOG_RENEW_GRACE_MS"
  | "FASTFENCE_WATCHDOG_PET_INTERVAL_MS"
>;

/**
 * Where the node's device is and how the agent pets it, or undefined when
 * FASTFENCE_WATCHDOG_DEVICE is unset (this node has no watchdog, whatever the policy says).
 * Throws FF_INVALID_CONFIG for settings that contradict each other.
 */
export function watchdogDevice(c: WatchdogEnv): WatchdogAgentConfig | undefined {
  if (!c.FASTFENCE_WATCHDOG_DEVICE) return undefined;
  const issues: string[] = [];
  if (c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS > c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS)
    issues.push(
      `FASTFENCE_WATCHDOG_PET_INTERVAL_MS: must not exceed FASTFENCE_WATCHDOG_RENEW_GRACE_MS (${c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS} > ${c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS})`,
    );
  const t = c.FASTFENCE_WATCHDOG_TIMEOUT_MS;
  const emulation = c.FASTFENCE_WATCHDOG_EMULATION;
  if (emulation && t === undefined)
    issues.push(
      `FASTFENCE_WATCHDOG_TIMEOUT_MS: required with FASTFENCE_WATCHDOG_EMULATION=${emulation} (the emulated device's timeout)`,
    );
  if (t !== undefined && 3 * c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS > t)
    issues.push(
      `FASTFENCE_WATCHDOG_PET_INTERVAL_MS: must be at most a third of FASTFENCE_WATCHDOG_TIMEOUT_MS (${c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS} > ${t} / 3)`,
    );
  if (issues.length) throw new InvalidInputError("FF_INVALID_CONFIG", "invalid watchdog settings", issues);
  return {
    devicePath: c.FASTFENCE_WATCHDOG_DEVICE,
    ...(t !== undefined ? { timeoutMs: t } : {}),
    ...(emulation ? { emulation } : {}),
    renewGraceMs: c.FASTFENCE_WATCHDOG_RENEW_GRACE_MS,
    petIntervalMs: c.FASTFENCE_WATCHDOG_PET_INTERVAL_MS,
  };
}

/** Why a node's agent does not arm (stable codes; the reason is for people). */
export const NOT_ARMED = {
  /** FASTFENCE_WATCHDOG_DEVICE is unset: no agent runs, nothing is reported. */
  noDevice: "NoDevice",
  /** The policy's entry for this node has no watchdog level (or no entry matches). */
  noWatchdogLevel: "NoWatchdogLevel",
  /** The agent's grace is below two of the policy's heartbeat intervals. */
  graceBelowHeartbeats: "GraceBelowHeartbeats",
  /** This node's Node object (its labels) is not read yet. */
  nodeUnknown: "NodeUnknown",
} as const;
export type NotArmedCode = (typeof NOT_ARMED)[keyof typeof NOT_ARMED];

export type WatchdogArming =
  { arm: true; config: WatchdogAgentConfig } | { arm: false; code: NotArmedCode; reason: string };

/**
 * Whether the agent on `node` may arm its watchdog under `policy`. `node` undefined: its
 * Node object is not read yet (its labels may select the entry), so not yet.
 */
export function watchdogArming(
  device: WatchdogAgentConfig | undefined,
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> } | undefined,
): WatchdogArming {
  if (!device)
    return {
      arm: false,
      code: NOT_ARMED.noDevice,
      reason: "no watchdog device (FASTFENCE_WATCHDOG_DEVICE unset)",
    };
  if (!node)
    return { arm: false, code: NOT_ARMED.nodeUnknown, reason: "waiting for this node's Node object" };
  if (!watchdogForNode(policy, node))
    return {
      arm: false,
      code: NOT_ARMED.noWatchdogLevel,
      reason: `not asked for: the FencingPolicy's entry for ${node.name} has no watchdog level (fencing.nodes[].watchdog)`,
    };
  const hb = policy.probe.heartbeatIntervalMs;
  if (device.renewGraceMs < 2 * hb)
    return {
      arm: false,
      code: NOT_ARMED.graceBelowHeartbeats,
      reason: `FASTFENCE_WATCHDOG_RENEW_GRACE_MS must be at least twice the policy's probe.heartbeatIntervalMs (${device.renewGraceMs} < 2 × ${hb})`,
    };
  return { arm: true, config: device };
}

/** The same decision straight from the environment: watchdogArming(watchdogDevice(c), …). */
export function watchdogArmingFor(
  c: WatchdogEnv,
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> } | undefined,
): WatchdogArming {
  return watchdogArming(watchdogDevice(c), policy, node);
}

/** watchdogArming as the agent takes it: requested false only when the policy asks for no watchdog here. */
export function watchdogWanted(
  device: WatchdogAgentConfig | undefined,
  policy: FencingPolicySpec,
  node: { name: string; labels?: Record<string, string> } | undefined,
): WatchdogWanted {
  const a = watchdogArming(device, policy, node);
  return a.arm
    ? { arm: true }
    : { arm: false, reason: a.reason, requested: a.code !== NOT_ARMED.noWatchdogLevel };
}
