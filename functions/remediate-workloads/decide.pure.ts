// remediate-workloads, the pure decision (S1): only for an incident in phase FencedOff
// with a power-off read back as Off does it ask for the out-of-service taint and the
// force-deletion of the node's pods (grace 0), VolumeAttachments and KubeVirt virt-launcher
// pods (never the VMIs: KubeVirt fails them and restarts their VMs, docs/safety.md).
// What the deletes removed comes back into `decide` (input.result), and `onReleased`
// records the counts (phase Released) and emits workloads.released. It never
// releases anything on an event's word alone or on an unconfirmed power-off, nor on a node
// other than the one (and the boot) the incident was created for and the event names
// (core/incident-target.ts: TargetMismatch, dead-lettered). No I/O.
// It also waits, never fails silently, when the node carries no fenced-off fact for the incident (core/fenced-off.ts): the admission policy would refuse the taint (FencedOffNotMarked; the resync retries).
import { statusOf, transition, type NodeFence } from "../../core/incident.ts";
import { targetMismatch, type TargetClaim } from "../../core/incident-target.ts";
import { fencedOffNames, fencedOffValue } from "../../core/fenced-off.ts";
import {
  ignored,
  iso,
  outgoing,
  processed,
  rejected,
  OUT_OF_SERVICE_TAINT,
  type Action,
  type DecideInput,
  type Decision,
  type ReleaseCounts,
  type Self,
  type View,
  type ViewRequest,
} from "../../core/decision.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { FfEvent } from "../../events/envelope.ts";
import { EVENT_TYPES, type AnyFfEvent } from "../../events/catalog.ts";
import type { WorkloadsReleased } from "../../events/schemas.ts";
import { provingAttempt } from "../fence/decide.pure.ts";

export const TAINT_STRING = `${OUT_OF_SERVICE_TAINT.key}=${OUT_OF_SERVICE_TAINT.value}:${OUT_OF_SERVICE_TAINT.effect}`;

export function locate(event: FfEvent): ViewRequest {
  const d = event.data as { incident?: string };
  return { node: event.subject, ...(d.incident ? { incident: d.incident } : {}), cluster: false };
}

export function decide(input: DecideInput<FfEvent>): Decision {
  if (input.result) return onResult(input);
  const ev = input.event as AnyFfEvent;
  if (ev.type !== EVENT_TYPES.nodeFenced)
    return ignored("UnhandledEventType", `remediate-workloads does not handle ${ev.type}`);
  const { view } = input;
  const name = ev.data.incident;
  const inc = view.incident;
  if (!inc || inc.metadata.name !== name)
    return ignored("IncidentNotFound", `no incident ${name} in the API: an event alone releases nothing`);
  return releaseOf(inc, view, [
    { from: "the event's subject", node: ev.subject },
    { from: "node.fenced", node: ev.data.node, bootId: ev.data.bootId },
  ]);
}

/**
 * The release of an incident read from the API (phase FencedOff with its proof), or why not.
 * `claims`: what the input names (the event's node and boot); the node read for it
 * (view.node) is checked too. Any of them naming another node or boot than the incident
 * was created for releases nothing (TargetMismatch).
 */
export function releaseOf(inc: NodeFence, view: View, claims: readonly TargetClaim[] = []): Decision {
  const name = inc.metadata.name;
  const mismatch = targetMismatch(inc, [
    ...claims,
    ...(view.node ? [{ from: "the node read for it", node: view.node.name }] : []),
  ]);
  if (mismatch) return rejected("TargetMismatch", mismatch);
  const st = statusOf(inc);
  if (st.phase === "Released" || st.phase === "Recovered" || st.phase === "Closed") {
    return ignored("PhasePassed", `incident ${name} already ${st.phase}`);
  }
  if (st.phase !== "FencedOff")
    return ignored("WrongPhase", `incident ${name} is ${st.phase}, not FencedOff: workloads stay (S1)`);
  const proof = provingAttempt(st.attempts);
  if (!st.powerOffConfirmedAt || !proof) {
    return rejected(
      "PowerOffUnproven",
      `incident ${name} is FencedOff without a recorded Off read-back or watchdog proof: workloads stay (S1)`,
    );
  }
  if (view.node && view.node.bootId !== inc.spec.bootId) {
    return ignored(
      "StaleIncarnation",
      `${inc.spec.nodeName} already runs a new boot ${view.node.bootId}: nothing to release`,
    );
  }
  // The admission policy admits the out-of-service taint only on a Node whose fenced-off
  // fact names its current boot (fence writes it before FencedOff). Without it the taint
  // would be refused: wait, and the resync (resync.pure.ts) tries again.
  if (view.node && !fencedOffNames(view.node.fencedOff, name, inc.spec.bootId)) {
    return ignored(
      "FencedOffNotMarked",
      `${inc.spec.nodeName} carries no fastfence.io/fenced-off naming ${fencedOffValue(name, inc.spec.bootId)} (it says "${view.node.fencedOff ?? ""}"): the taint would be refused; waiting for fence's mark, retried by the resync`,
    );
  }
  const node = inc.spec.nodeName;
  const r = view.policy.remediation;
  const actions: Action[] = [{ kind: "setTaint", node, taint: { ...OUT_OF_SERVICE_TAINT } }];
  // The policy field keeps its name; it releases the VMs through their launcher pods.
  if (r.deleteVirtualMachineInstances) actions.push({ kind: "deleteVmLaunchers", node });
  if (r.deletePods) actions.push({ kind: "deletePods", node, gracePeriodSeconds: 0 });
  if (r.deleteVolumeAttachments) actions.push({ kind: "deleteVolumeAttachments", node });
  return processed(`releasing workloads of ${node} (power-off confirmed ${st.powerOffConfirmedAt})`, actions);
}

/** Decides on the result of the release's deletes (input.result). */
export function onResult(input: DecideInput<unknown>): Decision {
  const { view, now, self, result } = input;
  if (result?.kind !== "released" || !view.incident)
    return rejected(
      "ViewMismatch",
      `remediate-workloads cannot decide on a ${result?.kind ?? "missing"} result here`,
    );
  return onReleased({
    incident: view.incident,
    counts: result.counts,
    policy: view.policy,
    now,
    self,
  });
}

export type { ReleaseCounts };

export interface ReleasedInput {
  /** The incident as read for decide (unchanged: decide writes nothing). */
  incident: NodeFence;
  counts: ReleaseCounts;
  policy: FencingPolicySpec;
  now: number;
  self: Self;
}

export function onReleased(input: ReleasedInput): Decision {
  const { incident: inc, counts, now } = input;
  const name = inc.metadata.name;
  const st = statusOf(inc);
  if (st.phase !== "FencedOff")
    return ignored("PhasePassed", `incident ${name} is ${st.phase}, not FencedOff`);
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const status = transition(st, "Released", iso(now), {
    released: { taint: TAINT_STRING, ...counts },
    reason: "WorkloadsReleased",
    message: `tainted; deleted ${counts.podsDeleted} pods, ${counts.volumeAttachmentsDeleted} VolumeAttachments, ${counts.vmLaunchersDeleted} VM launcher pods`,
  });
  const data: WorkloadsReleased = {
    incident: name,
    node: inc.spec.nodeName,
    bootId: inc.spec.bootId,
    taint: TAINT_STRING,
    ...counts,
    powerOffConfirmedAt: st.powerOffConfirmedAt!,
    releasedAt: status.timestamps.released ?? iso(now),
  };
  return processed(
    `released workloads of ${inc.spec.nodeName}`,
    [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }],
    [outgoing(EVENT_TYPES.workloadsReleased, inc.spec.nodeName, name, data)],
  );
}
