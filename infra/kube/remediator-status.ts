// Says on the FencingPolicy object whether another remediator (a NodeHealthCheck or
// MachineHealthCheck with a remediation other than fastfence's) selects nodes, which
// fastfence then refuses: a metav1.Condition `RemediatorConflict` in its status (True with
// reason OtherRemediatorSelectsNodes and a message naming each remediator and its nodes;
// False with reason NoConflict), `kubectl wait fencingpolicy/default
// --for=condition=RemediatorConflict=false`. Beside, and in the same style as, the `Valid`
// condition (policy-status.ts): written only when the stored condition differs, with a
// resourceVersion-guarded status write, and an Event only from the writer that won it: a
// Warning (RemediatorConflict) when a conflict appears or its list changes, a Normal one
// (RemediatorConflictResolved) when the last one goes. It touches only its own condition
// (never the spec, `Valid` or status.message) and never throws: a failed report is logged
// once and made again by a later call.
import {
  OTHER_REMEDIATOR_REASON,
  selectionsMessage,
  type RemediatorSelection,
} from "../../core/remediators.ts";
import { FENCING_POLICY_GROUP, FENCING_POLICY_VERSION } from "../../core/policy.ts";
import type { Logger } from "../log.ts";
import { KubeApiError, type Kube } from "./client.ts";
import { recordPolicyEvent, type FencingPolicyObject, type PolicyCondition } from "./policy-status.ts";

export const REMEDIATOR_CONDITION_TYPE = "RemediatorConflict";
/** Stable reasons of the `RemediatorConflict` condition. */
export const REMEDIATOR_CONDITION_REASONS = {
  conflict: "OtherRemediatorSelectsNodes",
  none: "NoConflict",
} as const;
/** Stable reasons of the Events. */
export const REMEDIATOR_EVENT_REASONS = {
  conflict: "RemediatorConflict",
  resolved: "RemediatorConflictResolved",
} as const;

export const NO_CONFLICT_MESSAGE =
  "no NodeHealthCheck or MachineHealthCheck with a remediation other than fastfence's selects a node";

/** What a report did. */
export type RemediatorReportOutcome =
  /** The stored condition already said it. */
  | "unchanged"
  /** The condition was written (and the Event recorded, when one was due). */
  | "written"
  /** Another writer changed the policy first (409); a later call looks again. */
  | "lost-race"
  /** There is no FencingPolicy object to put the condition on (the defaults are in force). */
  | "no-policy"
  /** The read or the write failed (logged once); a later call tries again. */
  | "failed";

function storedCondition(obj: FencingPolicyObject): PolicyCondition | undefined {
  return (obj.status?.conditions ?? []).find(
    (c): c is PolicyCondition =>
      typeof c === "object" && c !== null && (c as { type?: unknown }).type === REMEDIATOR_CONDITION_TYPE,
  );
}

/**
 * The condition `selections` call for. Pure. lastTransitionTime moves only when the
 * status flips (metav1.Condition semantics).
 */
export function remediatorCondition(
  selections: readonly RemediatorSelection[],
  generation: number,
  previous: PolicyCondition | undefined,
  nowMs: number,
): PolicyCondition {
  const conflict = selections.length > 0;
  const status = conflict ? "True" : "False";
  return {
    type: REMEDIATOR_CONDITION_TYPE,
    status,
    reason: conflict ? REMEDIATOR_CONDITION_REASONS.conflict : REMEDIATOR_CONDITION_REASONS.none,
    message: conflict ? selectionsMessage(selections) : NO_CONFLICT_MESSAGE,
    observedGeneration: generation,
    lastTransitionTime:
      previous?.status === status ? previous.lastTransitionTime : new Date(nowMs).toISOString(),
  };
}

/**
 * Whether the stored condition already says this. The message is compared: it names the
 * remediators and nodes, and is the same in every replica that sees the same objects. Pure.
 */
export function sameRemediatorCondition(
  stored: PolicyCondition | undefined,
  desired: PolicyCondition,
): boolean {
  return (
    stored !== undefined &&
    stored.status === desired.status &&
    stored.reason === desired.reason &&
    stored.message === desired.message &&
    stored.observedGeneration === desired.observedGeneration
  );
}

/** The Event a change from `previous` to `desired` calls for, if any. Pure. */
export function remediatorEvent(
  previous: PolicyCondition | undefined,
  desired: PolicyCondition,
): { type: "Warning" | "Normal"; reason: string } | undefined {
  if (desired.status === "True")
    return previous?.status === "True" && previous.message === desired.message
      ? undefined
      : { type: "Warning", reason: REMEDIATOR_EVENT_REASONS.conflict };
  return previous?.status === "True"
    ? { type: "Normal", reason: REMEDIATOR_EVENT_REASONS.resolved }
    : undefined;
}

export class RemediatorConflictReporter {
  private readonly kube: Kube;
  private readonly policy: string;
  private readonly component: string;
  private readonly instance: string;
  private readonly log: Logger | undefined;
  /** The last report that failed (status/what), so a failure is logged once. */
  private lastFailure = "";

  /**
   * @param opts.component who reports, e.g. "confirm" (the Event's reportingComponent
   *   fastfence.io/<component>); `instance` is the replica; `policy` the FencingPolicy's
   *   name (default "default").
   */
  constructor(kube: Kube, opts: { component: string; instance: string; policy?: string; log?: Logger }) {
    this.kube = kube;
    this.policy = opts.policy ?? "default";
    this.component = opts.component;
    this.instance = opts.instance;
    this.log = opts.log;
  }

  /**
   * Writes the condition for `selections` (RemediatorReader.selections over the cluster's
   * nodes) when the stored one differs, on `obj` (the policy as just read) or on a fresh
   * read when it is not given. Never throws.
   */
  async report(
    selections: readonly RemediatorSelection[],
    nowMs: number,
    obj?: FencingPolicyObject,
  ): Promise<RemediatorReportOutcome> {
    const status = selections.length ? "True" : "False";
    let policy = obj;
    if (!policy) {
      try {
        policy = (await this.kube.read(`read fencingpolicy ${this.policy}`, (a) =>
          a.custom.getClusterCustomObject({
            group: FENCING_POLICY_GROUP,
            version: FENCING_POLICY_VERSION,
            plural: "fencingpolicies",
            name: this.policy,
          }),
        )) as FencingPolicyObject;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) return "no-policy";
        return this.failed(`${status}/read`, err, "cannot read the FencingPolicy");
      }
    }
    const name = policy.metadata?.name;
    if (!name) return "no-policy";
    const generation = policy.metadata?.generation ?? 0;
    const previous = storedCondition(policy);
    const desired = remediatorCondition(selections, generation, previous, nowMs);
    if (sameRemediatorCondition(previous, desired)) return "unchanged";
    try {
      const others = (policy.status?.conditions ?? []).filter((c) => c !== previous);
      const body = { ...policy, status: { ...policy.status, conditions: [...others, desired] } };
      await this.kube.call(`update fencingpolicy ${name} status`, (a) =>
        a.custom.replaceClusterCustomObjectStatus({
          group: FENCING_POLICY_GROUP,
          version: FENCING_POLICY_VERSION,
          plural: "fencingpolicies",
          name,
          body,
        }),
      );
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 409) return "lost-race";
      return this.failed(
        `${status}/write`,
        err,
        "cannot write the FencingPolicy RemediatorConflict condition",
      );
    }
    this.lastFailure = "";
    const event = remediatorEvent(previous, desired);
    if (event) {
      try {
        await recordPolicyEvent(this.kube, policy, {
          ...event,
          message: desired.message,
          component: this.component,
          instance: this.instance,
          nowMs,
        });
      } catch (err) {
        this.failed(`${status}/event`, err, "cannot record the FencingPolicy RemediatorConflict Event");
      }
    }
    return "written";
  }

  private failed(key: string, err: unknown, msg: string): "failed" {
    if (this.lastFailure !== key) {
      this.lastFailure = key;
      this.log?.warn(
        { incident: "none", node: "none", policy: this.policy, reason: OTHER_REMEDIATOR_REASON, err },
        msg,
      );
    }
    return "failed";
  }
}
