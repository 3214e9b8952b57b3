// Reads the cluster-scoped FencingPolicy (name "default" unless configured) and resolves
// it with the schema's defaults. Cached for a short time so a burst of events costs one
// read. An invalid policy is an error naming the bad fields, never silently replaced by
// defaults; a missing policy means the defaults.
import { InvalidInputError } from "../../core/errors.ts";
import {
  FENCING_POLICY_GROUP,
  FENCING_POLICY_VERSION,
  FencingPolicySpecSchema,
  type FencingPolicySpec,
} from "../../core/policy.ts";
import { KubeApiError, type Kube } from "./client.ts";

export class PolicyReader {
  private readonly kube: Kube;
  private readonly name: string;
  private readonly ttlMs: number;
  private cached: { at: number; policy: FencingPolicySpec } | undefined;
  /**
   * @param ttlMs how long a read policy is reused, ms. Default 5000: policy edits take
   *   effect within this time; longer saves API reads during an incident.
   */
  constructor(kube: Kube, name = "default", ttlMs = 5000) {
    this.kube = kube;
    this.name = name;
    this.ttlMs = ttlMs;
  }

  async get(now: number): Promise<FencingPolicySpec> {
    if (this.cached && now - this.cached.at < this.ttlMs) return this.cached.policy;
    let spec: unknown = {};
    try {
      const obj = (await this.kube.call(`read fencingpolicy ${this.name}`, (a) =>
        a.custom.getClusterCustomObject({
          group: FENCING_POLICY_GROUP,
          version: FENCING_POLICY_VERSION,
          plural: "fencingpolicies",
          name: this.name,
        }),
      )) as { spec?: unknown };
      spec = obj.spec ?? {};
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 404)) throw err;
    }
    const r = FencingPolicySpecSchema.safeParse(spec);
    if (!r.success)
      throw new InvalidInputError(
        "FF_INVALID_CONFIG",
        `FencingPolicy ${this.name} is invalid`,
        r.error.issues.map((i) => `spec.${i.path.join(".")}: ${i.message}`),
      );
    this.cached = { at: now, policy: r.data };
    return r.data;
  }
}
