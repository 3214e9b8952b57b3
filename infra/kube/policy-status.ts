// Says on the FencingPolicy object itself whether fastfence could use its spec: a
// metav1.Condition `Valid` in its status (True, or False with reason InvalidSpec and the
// bad fields; `kubectl wait fencingpolicy/default --for=condition=Valid`), and a
// Kubernetes Event (PolicyInvalid, PolicyValid on recovery) involving it. Written only when
// the stored condition disagrees (status, reason or observedGeneration), with a
// resourceVersion-guarded status write, and the Event only by the writer that won that
// write: so one change gives one status write and one Event, however many replicas read
// the policy. It never changes the spec and never throws: a failed report is logged, the
// reader's log line and metric still say it.
import type { Logger } from "../log.ts";
import { KubeApiError, type Kube } from "./client.ts";
import { recordEvent } from "./events.ts";
import { FENCING_POLICY_GROUP, FENCING_POLICY_KIND, FENCING_POLICY_VERSION } from "../../core/policy.ts";

export const POLICY_CONDITION_TYPE = "Valid";
/** Stable reasons of the `Valid` condition. */
export const POLICY_CONDITION_REASONS = { valid: "SpecValid", invalid: "InvalidSpec" } as const;
/** Stable reasons of the Events. */
export const POLICY_EVENT_REASONS = { invalid: "PolicyInvalid", valid: "PolicyValid" } as const;
/**
 * Namespace of the Events: the API server files Events about a cluster-scoped object in
 * `default` (as it does for Nodes); `kubectl describe fencingpolicy` finds them there.
 */
export const POLICY_EVENT_NAMESPACE = "default";

/** What one read of the policy found. */
export type PolicyVerdict =
  | { valid: true }
  /** `inForceGeneration`: the generation of the valid policy this process keeps using, if any. */
  | { valid: false; issues: readonly string[]; inForceGeneration?: number };

export interface PolicyCondition {
  type: string;
  status: "True" | "False";
  reason: string;
  message: string;
  observedGeneration: number;
  lastTransitionTime: string;
}

/** The FencingPolicy object as read (only the fields used here). */
export interface FencingPolicyObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; uid?: string; generation?: number; resourceVersion?: string };
  spec?: unknown;
  status?: { conditions?: unknown[]; observedGeneration?: number; message?: string };
}

const MAX_MESSAGE = 1000;

function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/** The human message for a verdict. Pure. */
export function verdictMessage(v: PolicyVerdict): string {
  if (v.valid) return "fastfence uses this spec";
  const fields = clip(v.issues.join("; "), MAX_MESSAGE - 200);
  return v.inForceGeneration !== undefined
    ? `invalid spec: ${fields}. fastfence keeps the last valid policy it read (generation ${v.inForceGeneration}) in force until the spec is fixed`
    : `invalid spec: ${fields}. No valid policy was read since fastfence started: events that need the policy are dead-lettered (FF_INVALID_CONFIG) until the spec is fixed`;
}

function storedCondition(obj: FencingPolicyObject): PolicyCondition | undefined {
  return (obj.status?.conditions ?? []).find(
    (c): c is PolicyCondition =>
      typeof c === "object" && c !== null && (c as { type?: unknown }).type === POLICY_CONDITION_TYPE,
  );
}

/**
 * The condition a read calls for. Pure. lastTransitionTime moves only when the status
 * flips (metav1.Condition semantics).
 */
export function policyCondition(
  v: PolicyVerdict,
  generation: number,
  previous: PolicyCondition | undefined,
  nowMs: number,
): PolicyCondition {
  const status = v.valid ? "True" : "False";
  return {
    type: POLICY_CONDITION_TYPE,
    status,
    reason: v.valid ? POLICY_CONDITION_REASONS.valid : POLICY_CONDITION_REASONS.invalid,
    message: verdictMessage(v),
    observedGeneration: generation,
    lastTransitionTime:
      previous?.status === status ? previous.lastTransitionTime : new Date(nowMs).toISOString(),
  };
}

/**
 * Whether the stored condition already says this. The message is not compared: it names
 * the in-force generation, which differs between processes, and must not make replicas
 * rewrite each other's status. Pure.
 */
export function alreadyReported(stored: PolicyCondition | undefined, desired: PolicyCondition): boolean {
  return (
    stored !== undefined &&
    stored.status === desired.status &&
    stored.reason === desired.reason &&
    stored.observedGeneration === desired.observedGeneration
  );
}

export class PolicyStatusReporter {
  private readonly kube: Kube;
  private readonly component: string;
  private readonly instance: string;
  private readonly log: Logger | undefined;
  /** The last report that failed (generation/status), so a failure is logged once. */
  private lastFailure = "";

  /**
   * @param component who reports, e.g. "confirm" (the Event's source and reportingComponent
   *   fastfence.io/<component>); `instance` is the replica.
   */
  constructor(kube: Kube, opts: { component: string; instance: string; log?: Logger }) {
    this.kube = kube;
    this.component = opts.component;
    this.instance = opts.instance;
    this.log = opts.log;
  }

  /** Writes the condition (and an Event) when the stored one disagrees with `v`. Never throws. */
  async report(obj: FencingPolicyObject, v: PolicyVerdict, nowMs: number): Promise<void> {
    const name = obj.metadata?.name;
    if (!name) return;
    const generation = obj.metadata?.generation ?? 0;
    const previous = storedCondition(obj);
    const desired = policyCondition(v, generation, previous, nowMs);
    if (alreadyReported(previous, desired)) return;
    const key = `${generation}/${desired.status}`;
    try {
      const others = (obj.status?.conditions ?? []).filter((c) => c !== previous);
      await this.kube.call(`update fencingpolicy ${name} status`, (a) =>
        a.custom.replaceClusterCustomObjectStatus({
          group: FENCING_POLICY_GROUP,
          version: FENCING_POLICY_VERSION,
          plural: "fencingpolicies",
          name,
          body: {
            ...obj,
            status: {
              ...obj.status,
              observedGeneration: generation,
              message: desired.message,
              conditions: [...others, desired],
            },
          },
        }),
      );
    } catch (err) {
      // 409: another replica reported first (or the policy changed); the next read looks again.
      if (err instanceof KubeApiError && err.status === 409) return;
      this.failed(key, name, err, "cannot write the FencingPolicy status");
      return;
    }
    // Only a change worth an alarm gets an Event: invalid, or valid again after invalid.
    if (desired.status === "True" && previous?.status !== "False") return;
    try {
      await this.event(obj, desired, nowMs);
    } catch (err) {
      this.failed(key, name, err, "cannot record the FencingPolicy Event");
    }
  }

  private failed(key: string, policy: string, err: unknown, msg: string): void {
    if (this.lastFailure === key) return;
    this.lastFailure = key;
    this.log?.warn({ incident: "none", node: "none", policy, err }, msg);
  }

  private async event(obj: FencingPolicyObject, c: PolicyCondition, nowMs: number): Promise<void> {
    const invalid = c.status === "False";
    await recordPolicyEvent(this.kube, obj, {
      type: invalid ? "Warning" : "Normal",
      reason: invalid ? POLICY_EVENT_REASONS.invalid : POLICY_EVENT_REASONS.valid,
      message: `generation ${c.observedGeneration}: ${c.message}`,
      component: this.component,
      instance: this.instance,
      nowMs,
    });
  }
}

/**
 * Records one Kubernetes Event involving the FencingPolicy `obj` (in
 * POLICY_EVENT_NAMESPACE), from fastfence.io/<component>. Throws the client's typed error.
 */
export async function recordPolicyEvent(
  kube: Kube,
  obj: FencingPolicyObject,
  e: {
    type: "Warning" | "Normal";
    reason: string;
    message: string;
    component: string;
    instance: string;
    nowMs: number;
  },
): Promise<void> {
  await recordEvent(
    kube,
    {
      apiVersion: `${FENCING_POLICY_GROUP}/${FENCING_POLICY_VERSION}`,
      kind: FENCING_POLICY_KIND,
      name: obj.metadata?.name ?? "",
      ...(obj.metadata?.uid ? { uid: obj.metadata.uid } : {}),
      ...(obj.metadata?.resourceVersion ? { resourceVersion: obj.metadata.resourceVersion } : {}),
    },
    e,
  );
}
