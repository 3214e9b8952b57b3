// Reads the cluster-scoped FencingPolicy (name "default" unless configured) and resolves
// it with the schema's defaults. Cached for a short time so a burst of events costs one
// read; a missing policy means the defaults. An invalid policy (one the CRD let through but
// the schema refuses, e.g. stored before a stricter CRD was installed) is never silently
// replaced by the defaults, which might fence where the user's policy would not: the last
// valid policy this process read stays in force, and if there was none since it started,
// get() throws FF_INVALID_CONFIG naming the bad fields (every event that needs the policy
// is dead-lettered) — never a guess. Either way it is loud: an error log line naming the
// fields and the metric fastfence_policy_valid 0 (once per generation, not per event), and,
// with a reporter, the policy's `Valid` condition and an Event (policy-status.ts).
import { InvalidInputError } from "../../core/errors.ts";
import {
  FENCING_POLICY_GROUP,
  FENCING_POLICY_VERSION,
  FencingPolicySpecSchema,
  type FencingPolicySpec,
} from "../../core/policy.ts";
import type { Logger } from "../log.ts";
import type { FunctionMetrics } from "../metrics.ts";
import { KubeApiError, type Kube } from "./client.ts";
import type { FencingPolicyObject, PolicyStatusReporter, PolicyVerdict } from "./policy-status.ts";

/**
 * How long a read policy is reused, ms: every stage reads through a PolicyReader with this
 * cache, so a policy edit reaches each stage within it; the event source re-reads on the
 * same period (source/policy-follow.ts), so both see an edit within one period.
 */
export const POLICY_RELOAD_MS = 5000;

export interface PolicyReaderOptions {
  log?: Logger;
  metrics?: Pick<FunctionMetrics, "policyValid" | "policyInvalid">;
  /** Writes the policy's condition and Events; without it only the log and metric say it. */
  reporter?: PolicyStatusReporter;
}

export class PolicyReader {
  private readonly kube: Kube;
  private readonly name: string;
  private readonly ttlMs: number;
  private readonly opts: PolicyReaderOptions;
  private cached: { at: number; policy: FencingPolicySpec } | undefined;
  /** The last valid policy read since this process started, and its generation. */
  private inForce: { policy: FencingPolicySpec; generation: number } | undefined;
  /** What the last read found ("<generation>/<valid>"), so the log says each change once. */
  private lastSeen = "";
  private reporting: Promise<void> | undefined;

  /**
   * @param ttlMs how long a read policy is reused, ms. Default POLICY_RELOAD_MS (5000): policy edits take
   *   effect (and an invalid edit is reported) within this time; longer saves API reads
   *   during an incident.
   */
  constructor(kube: Kube, name = "default", ttlMs = POLICY_RELOAD_MS, opts: PolicyReaderOptions = {}) {
    this.kube = kube;
    this.name = name;
    this.ttlMs = ttlMs;
    this.opts = opts;
  }

  /** The policy; `fresh` reads it again whatever the cache holds (a pause must act at once). */
  async get(now: number, opts: { fresh?: boolean } = {}): Promise<FencingPolicySpec> {
    if (!opts.fresh && this.cached && now - this.cached.at < this.ttlMs) return this.cached.policy;
    let obj: FencingPolicyObject | undefined;
    try {
      obj = (await this.kube.read(`read fencingpolicy ${this.name}`, (a) =>
        a.custom.getClusterCustomObject({
          group: FENCING_POLICY_GROUP,
          version: FENCING_POLICY_VERSION,
          plural: "fencingpolicies",
          name: this.name,
        }),
      )) as FencingPolicyObject;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 404)) throw err;
    }
    const generation = obj?.metadata?.generation ?? 0;
    const r = FencingPolicySpecSchema.safeParse(obj?.spec ?? {});
    if (r.success) {
      this.inForce = { policy: r.data, generation };
      this.cached = { at: now, policy: r.data };
      this.seen(obj, generation, { valid: true }, now);
      return r.data;
    }
    const issues = r.error.issues.map((i) => `spec.${i.path.join(".")}: ${i.message}`);
    const verdict: PolicyVerdict = {
      valid: false,
      issues,
      ...(this.inForce ? { inForceGeneration: this.inForce.generation } : {}),
    };
    this.seen(obj, generation, verdict, now);
    if (this.inForce) {
      this.cached = { at: now, policy: this.inForce.policy };
      return this.inForce.policy;
    }
    throw new InvalidInputError("FF_INVALID_CONFIG", `FencingPolicy ${this.name} is invalid`, issues);
  }

  /** Resolves when the report started by the last read (if any) is done. For tests. */
  async settled(): Promise<void> {
    await this.reporting;
  }

  private seen(obj: FencingPolicyObject | undefined, generation: number, v: PolicyVerdict, now: number) {
    const { log, metrics, reporter } = this.opts;
    metrics?.policyValid.set({ policy: this.name }, v.valid ? 1 : 0);
    const key = `${generation}/${v.valid}`;
    if (key !== this.lastSeen) {
      const wasInvalid = this.lastSeen.endsWith("/false");
      this.lastSeen = key;
      const base = { incident: "none", node: "none", policy: this.name, generation };
      if (!v.valid) {
        metrics?.policyInvalid.inc({ policy: this.name });
        log?.error(
          { ...base, issues: v.issues, inForceGeneration: v.inForceGeneration ?? null },
          v.inForceGeneration !== undefined
            ? "FencingPolicy is invalid; the last valid policy stays in force"
            : "FencingPolicy is invalid and no valid policy was read since start; events that need it are dead-lettered",
        );
      } else if (wasInvalid) log?.info(base, "FencingPolicy is valid again");
    }
    // The stored condition is compared on every read (it came with the object), so a
    // report lost to a conflict or an API error is made again on a later read.
    if (reporter && obj && !this.reporting)
      this.reporting = reporter.report(obj, v, now).finally(() => (this.reporting = undefined));
  }
}
