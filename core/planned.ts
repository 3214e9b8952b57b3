// Planned work is not failure: whether a node that looks dead must not be fenced now, and
// why (a stable hold reason plus a human message). The states are read from the API by
// the adapter (View.node's cordon and annotations, View.planned) and from the policy,
// never from an event: a cluster-wide pause, a node's pause annotation, another
// remediator that selects the node, a medik8s NodeMaintenance, a MachineConfig reboot
// (cordoned, the machine-config daemon applying a new config or draining), an OpenShift
// cluster upgrade. A planned reboot holds only for plannedWork.maxPlannedRebootMs after the
// incident's first suspicion; then the node is treated as failed. confirm turns a hold
// into Blocked with the reason; fence checks again right before a round. Pure: no I/O, no
// clock; it never decides anything but the hold.
import { ms, type NodeInfo, type PlannedView } from "./decision.ts";
import type { Evidence, NodeFenceStatus } from "./incident.ts";
import type { FencingPolicySpec } from "./policy.ts";

/** Node annotation that pauses fencing of that node (`fastfence pause NODE`); the value is the reason. */
export const PAUSE_ANNOTATION = "fastfence.io/paused";
/** The machine-config daemon's annotations on a Node (OpenShift MCO). */
export const MC_STATE_ANNOTATION = "machineconfiguration.openshift.io/state";
export const MC_CURRENT_CONFIG_ANNOTATION = "machineconfiguration.openshift.io/currentConfig";
export const MC_DESIRED_CONFIG_ANNOTATION = "machineconfiguration.openshift.io/desiredConfig";
export const MC_DESIRED_DRAIN_ANNOTATION = "machineconfiguration.openshift.io/desiredDrain";
/** The annotations the adapter keeps in NodeInfo.annotations (the rest is not read). */
export const PLANNED_ANNOTATIONS: readonly string[] = [
  PAUSE_ANNOTATION,
  MC_STATE_ANNOTATION,
  MC_CURRENT_CONFIG_ANNOTATION,
  MC_DESIRED_CONFIG_ANNOTATION,
  MC_DESIRED_DRAIN_ANNOTATION,
];

/** Why a node is not fenced now: stable codes (the incident's reason, Events, metrics), one line each. */
export const HOLD_REASONS = {
  FencingPaused: "The FencingPolicy pauses all fencing (spec.paused, `fastfence pause`).",
  NodePaused: "The node carries the fastfence.io/paused annotation (`fastfence pause NODE`).",
  OtherRemediator:
    "A NodeHealthCheck or MachineHealthCheck with another remediation selects the node: fastfence refuses it.",
  NodeMaintenance: "A medik8s NodeMaintenance exists for the node (plannedWork.nodeMaintenance).",
  PlannedReboot:
    "The node is cordoned for a MachineConfig update or an MCO drain (plannedWork.machineConfig), within maxPlannedRebootMs.",
  ClusterUpgrade:
    "An OpenShift cluster upgrade is in progress (plannedWork.clusterUpgrade), within maxPlannedRebootMs.",
} as const satisfies Record<string, string>;
export type HoldReason = keyof typeof HOLD_REASONS;
export const HOLD_REASON_CODES = Object.keys(HOLD_REASONS) as [HoldReason, ...HoldReason[]];

export interface Hold {
  reason: HoldReason;
  message: string;
  /** Whether it ends by itself after plannedWork.maxPlannedRebootMs (planned reboots). */
  bounded: boolean;
}

/**
 * `held`: do not confirm or fence now. Not held: go on; `expired` names a planned reboot
 * that outlasted its bound (the node is treated as failed; say so in the incident).
 */
export type HoldVerdict = { held: true; hold: Hold } | { held: false; expired?: Hold };

export interface HoldInput {
  node: NodeInfo;
  /** Absent: not read (then only the policy and the node's own fields are checked). */
  planned: PlannedView | undefined;
  policy: FencingPolicySpec;
  /** Epoch ms of the incident's first suspicion (start of a planned reboot's bound). */
  since: number;
  now: number;
  /**
   * An operator asked for this fencing (`fastfence fence`): the automatic planned states
   * (maintenance, planned reboot, upgrade) give way; pauses and other remediators do not.
   */
  operatorRequested?: boolean;
}

/** Whether the node is cordoned while the MCO updates or drains it, and how (for the message). */
export function machineConfigReboot(node: NodeInfo): string | undefined {
  if (!node.unschedulable) return undefined;
  const a = node.annotations ?? {};
  const state = a[MC_STATE_ANNOTATION];
  const current = a[MC_CURRENT_CONFIG_ANNOTATION];
  const desired = a[MC_DESIRED_CONFIG_ANNOTATION];
  if ((state === "Working" || state === "Degraded") && desired && desired !== current)
    return `cordoned, machine-config state ${state}, ${current ?? "(none)"} → ${desired}`;
  const drain = a[MC_DESIRED_DRAIN_ANNOTATION];
  if (drain?.startsWith("drain-")) return `cordoned, MCO drain ${drain}`;
  return undefined;
}

/** The hold that applies to the node now, first match in order of operator intent. */
export function holdOf(i: HoldInput): HoldVerdict {
  const { node, planned, policy, now } = i;
  const name = node.name;
  if (policy.paused) {
    const why = policy.pausedReason ? `: ${policy.pausedReason}` : "";
    return held("FencingPaused", `fencing is paused cluster-wide${why}`, false);
  }
  const pause = node.annotations?.[PAUSE_ANNOTATION];
  if (pause !== undefined)
    return held("NodePaused", `fencing of ${name} is paused${pause ? `: ${pause}` : ""}`, false);
  if (planned?.otherRemediators.length)
    return held(
      "OtherRemediator",
      `${planned.otherRemediators.join("; ")} also remediates ${name}: fastfence refuses it`,
      false,
    );
  if (i.operatorRequested) return { held: false };
  const pw = policy.plannedWork;
  if (pw.nodeMaintenance && planned?.nodeMaintenances.length)
    return held(
      "NodeMaintenance",
      `${name} is in maintenance (NodeMaintenance ${planned.nodeMaintenances.join(", ")})`,
      false,
    );
  const bound = (reason: HoldReason, what: string): HoldVerdict => {
    const left = i.since + pw.maxPlannedRebootMs - now;
    const s = Math.round(pw.maxPlannedRebootMs / 1000);
    if (left > 0)
      return held(
        reason,
        `${what}: not fenced for up to ${s} s after its first suspicion (${Math.ceil(left / 1000)} s left)`,
        true,
      );
    return {
      held: false,
      expired: {
        reason,
        message: `${what}, but silent for more than ${s} s: treated as failed`,
        bounded: true,
      },
    };
  };
  const mc = pw.machineConfig ? machineConfigReboot(node) : undefined;
  if (mc) return bound("PlannedReboot", `${name} is rebooting for a MachineConfig update (${mc})`);
  if (pw.clusterUpgrade && planned?.clusterUpgrade !== undefined)
    return bound(
      "ClusterUpgrade",
      `a cluster upgrade is in progress (${planned.clusterUpgrade || "Progressing"})`,
    );
  return { held: false };
}

function held(reason: HoldReason, message: string, bounded: boolean): HoldVerdict {
  return { held: true, hold: { reason, message, bounded } };
}

/**
 * Where a planned reboot's bound starts: the incident's first suspicion (else now) — unless
 * the incident is older than the node's current silence, i.e. every miss streak among
 * `fresh` (the evidence that counts now) began after it. An incident stays open for its
 * boot after a suspicion that led nowhere (one observer's misses, a veto; the node
 * answered again), and a planned reboot days later must not count from then: its bound
 * starts at the earliest of those streaks.
 */
export function suspectedSince(
  st: NodeFenceStatus | undefined,
  now: number,
  fresh: readonly Evidence[] = [],
): number {
  const t = ms(st?.timestamps.suspected);
  const since = Number.isFinite(t) ? t : now;
  const starts = fresh.map((e) => ms(e.firstMissAt ?? e.at)).filter((x) => Number.isFinite(x));
  return starts.length ? Math.max(since, Math.min(...starts)) : since;
}
