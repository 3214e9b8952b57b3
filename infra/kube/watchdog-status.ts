// Says on the FencingPolicy object whether every Ready node's watchdog is armed: a
// metav1.Condition `WatchdogsArmed` in its status (core/watchdog-status.ts summariseWatchdogs;
// `kubectl wait fencingpolicy/default --for=condition=WatchdogsArmed`), and an Event
// (Warning WatchdogNotArmed when the list of unarmed nodes appears or changes, Normal
// WatchdogsArmed when it empties). The cluster side writes it from the reports the agents
// put on their own heartbeat Leases, so no agent needs rights on Nodes or the policy. In
// the style of the other policy conditions (remediator-status.ts): written only when the
// stored condition differs, with a resourceVersion-guarded status write, the Event only
// from the writer that won it. It touches only its own condition and never throws.
import { FENCING_POLICY_GROUP, FENCING_POLICY_VERSION } from "../../core/policy.ts";
import { WATCHDOG_ANNOTATION } from "../../core/watchdog.ts";
import { WATCHDOGS_ARMED_CONDITION, type WatchdogsArmedSummary } from "../../core/watchdog-status.ts";
import type { Logger } from "../log.ts";
import { KubeApiError, type Kube } from "./client.ts";
import { recordPolicyEvent, type FencingPolicyObject, type PolicyCondition } from "./policy-status.ts";

const HEARTBEAT_LEASE_PREFIX = "fastfence-alive-";

/** Node → the raw watchdog report on its heartbeat Lease (absent: no report). */
export async function readWatchdogReports(kube: Kube, namespace: string): Promise<Map<string, string>> {
  const list = await kube.read(`list leases in ${namespace}`, (a) =>
    a.coordination.listNamespacedLease({ namespace }),
  );
  const out = new Map<string, string>();
  for (const l of list.items) {
    const name = l.metadata?.name ?? "";
    const report = l.metadata?.annotations?.[WATCHDOG_ANNOTATION];
    if (name.startsWith(HEARTBEAT_LEASE_PREFIX) && report !== undefined)
      out.set(name.slice(HEARTBEAT_LEASE_PREFIX.length), report);
  }
  return out;
}

/** The condition a summary calls for. Pure; lastTransitionTime moves only when the status flips. */
export function watchdogsCondition(
  s: WatchdogsArmedSummary,
  generation: number,
  previous: PolicyCondition | undefined,
  nowMs: number,
): PolicyCondition {
  return {
    type: WATCHDOGS_ARMED_CONDITION,
    status: s.status,
    reason: s.reason,
    message: s.message.slice(0, 1000),
    observedGeneration: generation,
    lastTransitionTime:
      previous?.status === s.status ? previous.lastTransitionTime : new Date(nowMs).toISOString(),
  };
}

/** The Event a change calls for, if any. Pure. */
export function watchdogsEvent(
  previous: PolicyCondition | undefined,
  desired: PolicyCondition,
): { type: "Warning" | "Normal"; reason: string } | undefined {
  if (desired.reason === "WatchdogNotArmed")
    return previous?.message === desired.message
      ? undefined
      : { type: "Warning", reason: "WatchdogNotArmed" };
  if (desired.status === "True" && previous?.reason === "WatchdogNotArmed")
    return { type: "Normal", reason: "WatchdogsArmed" };
  return undefined;
}

export type WatchdogReportOutcome = "unchanged" | "written" | "lost-race" | "no-policy" | "failed";

export class WatchdogConditionReporter {
  private readonly kube: Kube;
  private readonly opts: { component: string; instance: string; policy: string; log?: Logger };
  private lastFailure = "";

  constructor(kube: Kube, opts: { component: string; instance: string; policy?: string; log?: Logger }) {
    this.kube = kube;
    this.opts = { ...opts, policy: opts.policy ?? "default" };
  }

  /** Writes the condition for `summary` when the stored one differs. Never throws. */
  async report(summary: WatchdogsArmedSummary, nowMs: number): Promise<WatchdogReportOutcome> {
    let policy: FencingPolicyObject;
    try {
      policy = (await this.kube.read(`read fencingpolicy ${this.opts.policy}`, (a) =>
        a.custom.getClusterCustomObject({
          group: FENCING_POLICY_GROUP,
          version: FENCING_POLICY_VERSION,
          plural: "fencingpolicies",
          name: this.opts.policy,
        }),
      )) as FencingPolicyObject;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return "no-policy";
      return this.failed("read", err, "cannot read the FencingPolicy");
    }
    const name = policy.metadata?.name;
    if (!name) return "no-policy";
    const previous = (policy.status?.conditions ?? []).find(
      (c): c is PolicyCondition =>
        typeof c === "object" && c !== null && (c as { type?: unknown }).type === WATCHDOGS_ARMED_CONDITION,
    );
    const desired = watchdogsCondition(summary, policy.metadata?.generation ?? 0, previous, nowMs);
    if (
      previous &&
      previous.status === desired.status &&
      previous.reason === desired.reason &&
      previous.message === desired.message &&
      previous.observedGeneration === desired.observedGeneration
    )
      return "unchanged";
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
      return this.failed("write", err, "cannot write the FencingPolicy WatchdogsArmed condition");
    }
    this.lastFailure = "";
    const event = watchdogsEvent(previous, desired);
    if (event)
      await recordPolicyEvent(this.kube, policy, {
        ...event,
        message: desired.message,
        component: this.opts.component,
        instance: this.opts.instance,
        nowMs,
      }).catch((err: unknown) => this.failed("event", err, "cannot record the WatchdogsArmed Event"));
    return "written";
  }

  private failed(key: string, err: unknown, msg: string): "failed" {
    if (this.lastFailure !== key) {
      this.lastFailure = key;
      this.opts.log?.warn({ incident: "none", node: "none", policy: this.opts.policy, err }, msg);
    }
    return "failed";
  }
}
