// Reads what the API says about planned work for a node (core/decision.ts PlannedView):
// the medik8s NodeMaintenance objects for it and whether an OpenShift cluster upgrade is
// in progress (ClusterVersion "version" Progressing=True), plus, when given a source, the
// other remediators that select it. A kind whose CRD is not installed (a vanilla cluster
// has neither) reads as "none", never as an error; any other failure is the API's
// KubeApiError, so a decision that needs the view is retried rather than taken blind.
// Cached for a short time (confirm asks once per suspicion during a burst) and kept warm
// in the background by the stages on the fencing path (keepWarm), so a decision never waits
// for these reads. Reads only; it never decides what a state means (core/planned.ts does).
import type { PlannedView } from "../../core/decision.ts";
import { KubeApiError, type Kube } from "./client.ts";

export const NODE_MAINTENANCE = {
  group: "nodemaintenance.medik8s.io",
  version: "v1beta1",
  plural: "nodemaintenances",
};
export const CLUSTER_VERSION = {
  group: "config.openshift.io",
  version: "v1",
  plural: "clusterversions",
  name: "version",
};

interface NodeMaintenanceObject {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: { nodeName?: string };
}
interface ClusterVersionObject {
  status?: { conditions?: { type?: string; status?: string; message?: string }[] };
}

/** Other remediators selecting a node, as "Kind/name (remediation …)" (infra/kube/remediators.ts). */
export type RemediatorSource = (
  node: { name: string; labels: Record<string, string> },
  now: number,
) => Promise<readonly string[]>;

/** 404 on a list or get of a kind whose CRD is absent (or the one object absent): none. */
function absent(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 404;
}

export class PlannedReader {
  private readonly kube: Kube;
  private readonly ttlMs: number;
  private readonly remediators: RemediatorSource | undefined;
  private readonly warmOthers: ((now: number) => Promise<unknown>) | undefined;
  private cached:
    { at: number; maintenances: Map<string, string[]>; upgrade: string | undefined } | undefined;

  /**
   * @param ttlMs how long one read of NodeMaintenances and ClusterVersion is reused, ms.
   *   Default 2000: a maintenance or an upgrade takes effect within this time.
   * @param remediators where other remediators come from (none when absent).
   */
  constructor(
    kube: Kube,
    opts: {
      ttlMs?: number;
      remediators?: RemediatorSource;
      /** Refreshes the remediators' own cache (keepWarm calls it with this reader's). */
      warm?: (now: number) => Promise<unknown>;
    } = {},
  ) {
    this.kube = kube;
    this.ttlMs = opts.ttlMs ?? 2000;
    this.remediators = opts.remediators;
    this.warmOthers = opts.warm;
  }

  /**
   * Keeps the caches fresh in the background (every half TTL), so a decision on the
   * fencing path never waits for these reads: what it uses is at most one TTL old. A
   * failed refresh is left to the decision, which then reads (and fails loudly) itself.
   * Returns the stop function.
   */
  keepWarm(clock: { now(): number }): () => void {
    const tick = () => {
      const now = clock.now();
      void this.cluster(now, true).catch(() => undefined);
      void this.warmOthers?.(now).catch(() => undefined);
    };
    tick();
    const timer = setInterval(tick, Math.max(100, this.ttlMs / 2));
    timer.unref();
    return () => clearInterval(timer);
  }

  async forNode(node: { name: string; labels: Record<string, string> }, now: number): Promise<PlannedView> {
    const [c, others] = await Promise.all([this.cluster(now), this.remediators?.(node, now) ?? []]);
    return {
      nodeMaintenances: c.maintenances.get(node.name) ?? [],
      ...(c.upgrade !== undefined ? { clusterUpgrade: c.upgrade } : {}),
      otherRemediators: others,
    };
  }

  private inflight: Promise<NonNullable<PlannedReader["cached"]>> | undefined;

  private async cluster(now: number, refresh = false): Promise<NonNullable<PlannedReader["cached"]>> {
    if (!refresh && this.cached && now - this.cached.at < this.ttlMs) return this.cached;
    this.inflight ??= Promise.all([this.maintenances(), this.upgrade()])
      .then(([maintenances, upgrade]) => (this.cached = { at: now, maintenances, upgrade }))
      .finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  /** NodeMaintenance names by node (one being deleted still counts: the node is not back yet). */
  private async maintenances(): Promise<Map<string, string[]>> {
    const byNode = new Map<string, string[]>();
    let items: NodeMaintenanceObject[];
    try {
      const l = (await this.kube.read("list nodemaintenances", (a) =>
        a.custom.listClusterCustomObject(NODE_MAINTENANCE),
      )) as { items?: NodeMaintenanceObject[] };
      items = l.items ?? [];
    } catch (err) {
      if (absent(err)) return byNode;
      throw err;
    }
    for (const m of items) {
      const node = m.spec?.nodeName;
      if (!node) continue;
      byNode.set(node, [...(byNode.get(node) ?? []), m.metadata?.name ?? "(unnamed)"]);
    }
    return byNode;
  }

  /** The Progressing condition's message while an upgrade runs (absent: none, or not OpenShift). */
  private async upgrade(): Promise<string | undefined> {
    let cv: ClusterVersionObject;
    try {
      cv = (await this.kube.read("read clusterversion version", (a) =>
        a.custom.getClusterCustomObject(CLUSTER_VERSION),
      )) as ClusterVersionObject;
    } catch (err) {
      if (absent(err)) return undefined;
      throw err;
    }
    const p = cv.status?.conditions?.find((c) => c.type === "Progressing");
    return p?.status === "True" ? (p.message ?? "") : undefined;
  }
}
