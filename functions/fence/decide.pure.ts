// fence, the pure decision (S1, S3, S6): acts only on incident state a trusted confirm
// identity wrote (a quorum of verified evidence, or a standing operator's request), takes
// the per-node Lease, runs the power-off levels with their last look, and makes FencedOff
// only of a read-back of exactly Off (or the watchdog level's proof), writing the fenced-off
// fact on the Node first. It must never power off a node other than the incident's own boot.
// The steps' rules: confirmation, hold, last-look, look-after, watchdog-level .pure.ts. No I/O.
import {
  OBSERVED_REASON,
  statusOf,
  transition,
  type Attempt,
  type NodeFence,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import {
  fenceLeaseName,
  ignored,
  iso,
  ms,
  outgoing,
  processed,
  rejected,
  type Action,
  type DecideInput,
  type Decision,
  liveHolder,
  type NodeInfo,
  type Self,
  type View,
  type ViewRequest,
} from "../../core/decision.ts";
import type { ErrorCode } from "../../core/errors.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import { resolveLevels } from "../../core/policy-levels.ts";
import { holdOf, suspectedSince } from "../../core/planned.ts";
import { abandonedRound, failedData, heldRound, observed, withdrawnRound } from "./hold.pure.ts";
import { lookPlan } from "./last-look.pure.ts";
import { checkConfirmation } from "./confirmation.pure.ts";
import { targetMismatch } from "../../core/incident-target.ts";
import { markFencedOff as markOff } from "../../core/fenced-off.ts";
import { watchdogExpired, watchdogFencedMessage, watchdogPlan } from "./watchdog-level.pure.ts";
import { escalationDue, liedLevels } from "./look-after.pure.ts";
import { handoffActions, onHandoffResult } from "./handoff.pure.ts";

export { liveHolder } from "../../core/decision.ts";
export { failedData } from "./hold.pure.ts";
import { freshIndependentEvidence } from "../../core/rules.ts";
import type { FfEvent } from "../../events/envelope.ts";
import { EVENT_TYPES, type AnyFfEvent } from "../../events/catalog.ts";
import type { NodeFenced } from "../../events/schemas.ts";

export function locate(event: FfEvent): ViewRequest {
  const d = event.data as { incident?: string };
  return {
    node: event.subject,
    ...(d.incident ? { incident: d.incident } : {}),
    lease: fenceLeaseName(event.subject),
    cluster: false,
    discovery: true,
    planned: true,
    freshPolicy: true,
    heartbeatLease: true,
    observers: true, // the published keys: stored evidence counts only if it verifies (confirmation.pure.ts)
  };
}

export function decide(input: DecideInput<FfEvent>): Decision {
  if (input.result) return onResult(input);
  const ev = input.event as AnyFfEvent;
  if (ev.type !== EVENT_TYPES.fenceRequested && ev.type !== EVENT_TYPES.fenceFailed) {
    return ignored("UnhandledEventType", `fence does not handle ${ev.type}`);
  }
  const { view, now, self } = input;
  const policy = view.policy;
  const name = ev.data.incident;
  const inc = view.incident;
  if (!inc || inc.metadata.name !== name)
    return ignored("IncidentNotFound", `no incident ${name} in the API: an event alone fences nothing (S6)`);
  const mismatch = targetMismatch(inc, [
    { from: "the event's subject", node: ev.subject },
    { from: ev.type, node: ev.data.node, bootId: ev.data.bootId },
    ...(view.node ? [{ from: "the node read for it", node: view.node.name }] : []),
  ]);
  if (mismatch) return rejected("TargetMismatch", mismatch);
  const st = statusOf(inc);
  const node = view.node;
  if (!node)
    return ignored(
      "NodeNotFound",
      `node ${inc.spec.nodeName} is not in the API: cannot verify its incarnation`,
    );
  if (node.bootId !== inc.spec.bootId) {
    return ignored(
      "StaleIncarnation",
      `stale incarnation: ${node.name} booted ${node.bootId} since incident boot ${inc.spec.bootId}; not powering off (S3)`,
    );
  }

  // A replica on the node it would fence powers itself off mid-round: the round then ends
  // only when its Lease expires. Replicas on other nodes drive; resync.pure.ts lets this
  // one step in when none has (OWN_NODE_STALLED_FACTOR).
  if (onOwnNode(self, inc))
    return ignored(
      "OwnNode",
      `${self.replica} runs on ${self.node}: a fence replica on another node drives ${name}`,
    );

  let round: number;
  let waitUntil: number | undefined;
  const lease = view.lease;
  const held = liveHolder(lease, now);
  const drivenByOther = held && held.holder !== self.replica ? held : undefined;
  if (st.phase === "Confirmed") {
    if (ev.type !== EVENT_TYPES.fenceRequested)
      return ignored("WrongPhase", `fence.failed for an incident in phase Confirmed`);
    // Another replica took the lease and is about to record phase Fencing: it drives.
    if (drivenByOther)
      return ignored(
        "DrivenByOtherReplica",
        `fencing of ${name} starting by ${drivenByOther.holder} (lease until ${iso(drivenByOther.until)})`,
      );
    round = 1;
  } else if (st.phase === "FenceFailed") {
    if (ev.type !== EVENT_TYPES.fenceFailed)
      return ignored("PhasePassed", `incident ${name} already FenceFailed (retries follow fence.failed)`);
    if (ev.data.round !== st.round)
      return ignored(
        "StaleRound",
        `fence.failed of round ${ev.data.round}, incident is at round ${st.round}`,
      );
    if (ev.data.final || (st.round >= policy.fencing.maxRounds && !escalationDue(st)))
      return ignored("FencingGaveUp", `fencing of ${name} gave up after ${st.round} rounds`);
    round = st.round + 1;
    const notBefore = ms(st.retryNotBefore);
    if (Number.isFinite(notBefore) && notBefore > now) waitUntil = notBefore;
  } else if (st.phase === "Fencing") {
    if (drivenByOther)
      return ignored(
        "DrivenByOtherReplica",
        `fencing of ${name} in progress by ${drivenByOther.holder} (lease until ${iso(drivenByOther.until)})`,
      );
    if (lease?.holder === self.replica)
      return ignored("DrivenByThisReplica", `fencing of ${name} already driven by this replica`);
    round = Math.max(st.round, 1); // take over the round of a driver whose lease expired
  } else {
    // Suspected/Blocked: confirm has not confirmed it (an early or forged request); later
    // phases: fencing already happened (a duplicate or reordered request).
    const early = st.phase === "Suspected" || st.phase === "Blocked";
    return ignored(early ? "WrongPhase" : "PhasePassed", `incident ${name} already ${st.phase}`);
  }

  return startRound({
    inc,
    st,
    node,
    view,
    self,
    now,
    round,
    ...(waitUntil !== undefined ? { waitUntil } : {}),
  });
}

/** Whether this replica runs on the incident's node (known only with FASTFENCE_NODE_NAME). */
export function onOwnNode(self: Self, inc: NodeFence): boolean {
  return self.node !== undefined && self.node === inc.spec.nodeName;
}

/** Decides on the result of the power-off the last decision asked for (input.result). */
export function onResult(input: DecideInput<unknown>): Decision {
  const { view, now, self, result } = input;
  if (result?.kind === "leasesHandedOff") return onHandoffResult(result);
  if (result?.kind !== "powerOff" || !view.incident)
    return rejected("ViewMismatch", `fence cannot decide on a ${result?.kind ?? "missing"} result here`);
  return onPowerOffResult({
    incident: view.incident,
    result: { attempts: result.attempts },
    policy: view.policy,
    now,
    self,
  });
}

/** A fencing round to start: the incident as read, its node, the round and when. */
export interface RoundStart {
  inc: NodeFence;
  st: NodeFenceStatus;
  node: NodeInfo;
  view: View;
  self: Self;
  now: number;
  round: number;
  /** Wait until this epoch ms first (a retry's retryNotBefore). */
  waitUntil?: number;
}

/**
 * Starts a fencing round once the caller checked the phase and the Lease: re-checks the
 * confirmation the incident records (S6, S2), takes the node's Lease, records Fencing and
 * asks for the power-off; records FenceFailed when no level matches the node.
 */
export function startRound(r: RoundStart): Decision {
  const { inc, st, node, view, self, now, round, waitUntil } = r;
  const policy = view.policy;
  const name = inc.metadata.name;
  const distrust = checkConfirmation(inc, st, node, policy, view.trustedConfirmers, view.observers);
  if (distrust)
    return distrust.code === "OperatorRequestWithdrawn"
      ? withdrawnRound(inc, st, distrust.reason, now)
      : rejected(distrust.code, distrust.reason);
  if (st.reason === OBSERVED_REASON)
    return ignored("AlreadyObserved", `incident ${name} was observed (Observe mode): never fenced`);
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  // Planned work checked again at the last moment, on a fresh policy: a pause or a
  // maintenance that began after confirmation stops the round before any power command.
  const since = suspectedSince(st, now, freshIndependentEvidence(st.evidence, node.name, now, policy));
  const hold = holdOf({ node, planned: view.planned, policy, since, now });
  if (hold.held) return heldRound(inc, st, rv, hold.hold, now);

  const levels = resolveLevels(policy, node, view.discoveredLevels);
  const leaseName = fenceLeaseName(node.name);
  if (!levels) {
    const status = transition(st, "FenceFailed", iso(now), {
      reason: "NoFencingLevels",
      message: `no fencing levels match node ${node.name}${policy.fencing.discovery !== "None" ? ` (discovery ${policy.fencing.discovery}: ${view.discoveryError ?? "nothing found"})` : ""}`,
      round,
    });
    return processed(
      `no fencing levels for ${node.name}`,
      [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }],
      [
        outgoing(
          EVENT_TYPES.fenceFailed,
          node.name,
          name,
          failedData(inc, status, "NoFencingLevels", "FF_BMC_UNSUPPORTED", [], true),
        ),
      ],
    );
  }

  // After a lie (look-after.pure.ts): only the levels that never lied (the watchdog's too), no last look.
  const lied = liedLevels(st);
  const watchdog = watchdogPlan(policy, node, levels.length, inc.spec.bootId, lied);
  if (policy.mode === "Observe") return observed(inc, st, rv, node, levels, round, !!watchdog);
  const status = transition(st, "Fencing", iso(waitUntil ?? now), {
    round,
    fencingBy: self.replica,
    reason: "Fencing",
    message: `round ${round}: ${[...levels.map((l) => l.driver), ...(watchdog ? ["watchdog"] : [])].join(" → ")} by ${self.replica}`,
  });
  const actions: Action[] = [
    ...(waitUntil !== undefined ? [{ kind: "waitUntil", at: waitUntil } as const] : []),
    {
      kind: "takeLease",
      leaseName,
      node: node.name,
      holder: self.replica,
      durationMs: policy.timeouts.leaseDurationMs,
    },
    { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
    {
      kind: "powerOff",
      node: node.name,
      incident: name,
      round,
      holder: self.replica,
      levels,
      timeoutMs: policy.timeouts.powerOffTimeoutMs,
      // Every round looks last (an operator's request's too); not after a lie (look-after.pure.ts)
      ...(lied.length ? {} : { look: lookPlan(inc, st, node, view) }),
      ...(lied.length ? { skipLevels: lied } : {}),
      ...(watchdog ? { watchdog } : {}),
    },
  ];
  return processed(`fencing ${node.name} round ${round}`, actions);
}

/** What the adapter's powerOff action produced: every attempt of the round, in order. */
export interface PowerOffResult {
  attempts: Attempt[];
}

export interface PowerOffResultInput {
  /** The incident as written by the Fencing status write (its new resourceVersion). */
  incident: NodeFence;
  result: PowerOffResult;
  policy: FencingPolicySpec;
  now: number;
  self: Self;
}

/** S1: an attempt that proves the node is off: read back Off, or its armed watchdog surely reset it. */
export function provingAttempt(attempts: readonly Attempt[]): Attempt | undefined {
  return confirmingAttempt(attempts) ?? watchdogExpired(attempts);
}

/** S1: the attempt that proves the node is off, if any (read back exactly Off, after the command). */
export function confirmingAttempt(attempts: readonly Attempt[]): Attempt | undefined {
  return attempts.find(
    (a) =>
      a.result === "off-confirmed" &&
      a.readBackState === "Off" &&
      a.commandAt !== undefined &&
      a.readBackAt !== undefined &&
      ms(a.readBackAt) >= ms(a.commandAt),
  );
}

const RESULT_CODES: Record<Attempt["result"], ErrorCode> = {
  "off-confirmed": "FF_BMC_STILL_ON", // only reached when the read-back did not say Off
  "still-on": "FF_BMC_STILL_ON",
  unreachable: "FF_BMC_UNREACHABLE",
  "auth-failed": "FF_BMC_AUTH_FAILED",
  timeout: "FF_BMC_TIMEOUT",
  error: "FF_BMC_PROTOCOL",
  abandoned: "FF_NODE_RESPONDING",
  "watchdog-expired": "FF_WATCHDOG_NOT_EXPIRED", // only reached when its proof did not hold
};

export function onPowerOffResult(input: PowerOffResultInput): Decision {
  const { incident: inc, result, policy, now, self } = input;
  const name = inc.metadata.name;
  const st = statusOf(inc);
  if (st.phase !== "Fencing")
    return ignored("PhasePassed", `incident ${name} is ${st.phase}, not Fencing: result not recorded`);
  if (st.fencingBy !== self.replica)
    return ignored("DrivenByOtherReplica", `incident ${name} is driven by ${st.fencingBy ?? "nobody"} now`);
  const rv = inc.metadata.resourceVersion;
  if (!rv) return rejected("MissingResourceVersion", `incident ${name} was read without a resourceVersion`);
  const attempts = [...st.attempts, ...result.attempts].slice(-50);
  const release: Action = {
    kind: "releaseLease",
    leaseName: fenceLeaseName(inc.spec.nodeName),
    node: inc.spec.nodeName,
    holder: self.replica,
  };
  const ok = provingAttempt(result.attempts);
  const looked = result.attempts.find((a) => a.result === "abandoned" && a.lastLook);
  if (!ok && looked) return abandonedRound({ inc, st, rv, attempts, looked, release, policy, now });
  if (ok) {
    const at = ok.readBackAt ?? ok.finishedAt; // a watchdog proof: when the verdict held
    const status = transition(st, "FencedOff", iso(now), {
      attempts,
      powerOffConfirmedAt: at,
      reason: ok.watchdog ? "WatchdogExpired" : "PowerOffConfirmed",
      message: ok.watchdog
        ? watchdogFencedMessage(ok)
        : `${ok.driver} (level ${ok.level}) read back Off at ${at}`,
    });
    const data: NodeFenced = {
      incident: name,
      node: inc.spec.nodeName,
      bootId: inc.spec.bootId,
      powerOffConfirmedAt: at,
      round: st.round,
      level: ok.level,
      driver: ok.driver,
      attempts: result.attempts.length,
    };
    return processed(
      `${inc.spec.nodeName} powered off (read back Off)`,
      [
        markOff(inc),
        { kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status },
        ...handoffActions(inc, policy, at), // the node's leaders' Leases (S1 makes it safe)
        release,
      ],
      [outgoing(EVENT_TYPES.nodeFenced, inc.spec.nodeName, name, data)],
    );
  }
  const last = result.attempts.at(-1);
  const code =
    (last?.errorCode as ErrorCode | undefined) ?? (last ? RESULT_CODES[last.result] : "FF_INTERNAL");
  const why = last
    ? `${last.driver} level ${last.level}: ${last.result}${last.readBackState ? ` (read back ${last.readBackState})` : ""}${last.message ? `: ${last.message}` : ""}`
    : "no attempt was made";
  const final = st.round >= policy.fencing.maxRounds;
  const retryNotBefore = final ? undefined : iso(now + policy.fencing.retryBackoffMs);
  const status = transition(st, "FenceFailed", iso(now), {
    attempts,
    reason: "PowerOffNotConfirmed",
    message: `round ${st.round}/${policy.fencing.maxRounds}: power-off not confirmed; ${why}; workloads stay (S1)${final ? "; giving up" : ""}`,
    retryNotBefore,
  });
  return processed(
    `fencing ${inc.spec.nodeName} round ${st.round} failed`,
    [{ kind: "updateIncidentStatus", name, expectedResourceVersion: rv, status }, release],
    [
      outgoing(
        EVENT_TYPES.fenceFailed,
        inc.spec.nodeName,
        name,
        failedData(inc, status, why, code, result.attempts, final),
      ),
    ],
  );
}
