// Executes fence's handOffLeases action (issue 46): reads the Leases the plan lists, places
// each holder on a node (a pod-form holder by its pod's spec.nodeName), lets the pure
// core/lease-handoff.ts judge each one, records the fenced node in the fenced-nodes
// FencedNodeSet (the admission policy's param), then releases each Lease the way client-go's
// ReleaseOnCancel does, guarded by the resourceVersion read: a 409 (renewed or changed
// meanwhile) is re-read and judged again, a bounded number of times, never overwritten; a
// 403 is the same write tried again for a bounded time, on another API server first (the
// policy's param cache lags, on one server more than another).
// Each release is one Kubernetes Event on the incident and one trace span. Best effort: it
// never throws (each Lease's outcome says what failed) and never writes a Lease the pure
// judge did not clear, nor anything but the release.
import type { V1Lease } from "@kubernetes/client-node";
import {
  FENCED_NODES,
  fencedNodeEntry,
  type FencedNodeEntry,
  holderForm,
  judge,
  releaseWrite,
  type HandoffPlan,
  type LeaseOutcome,
  type LeaseRead,
} from "../../core/lease-handoff.ts";
import type { LeaseHandoffEntry } from "../../core/policy-lease-handoff.ts";
import { FENCING_POLICY_GROUP, FENCING_POLICY_VERSION } from "../../core/policy.ts";
import type { Logger } from "../log.ts";
import { traceChild } from "../tracing.ts";
import { KubeApiError, type Kube } from "./client.ts";
import { recordEvent } from "./events.ts";
import { MicroTime } from "./lease.ts";

/** How many times one Lease is re-read and judged again after a lost guard (409). */
export const MAX_HANDOFF_ATTEMPTS = 3;

/**
 * How long a refused (403) release is tried again, the same write each time, the refusing
 * API server tried after the others: admission reads the fenced-nodes FencedNodeSet (its
 * param) from each server's informer cache, which may not have seen the node fence just
 * recorded — for tens of seconds on a server whose etcd client still waits on a member that
 * died silently (the compact lab shows it). A refusal that stays is reported after this
 * long. The hand-off runs off the release's path (core/decision.ts contract 7), so this
 * wait delays no workload.
 */
export const PARAM_CACHE_WAIT_MS = 10_000;
const PARAM_CACHE_RETRY_MS = 250;

export interface LeaseHandoffOptions {
  /** fastfence's namespace: the fenced-nodes FencedNodeSet and the incidents live there. */
  namespace: string;
  log: Logger;
  /** Events' reportingComponent fastfence.io/<component> and instance. */
  component: string;
  instance: string;
  /** Epoch ms now (the release's acquireTime/renewTime). Default Date.now. */
  now?: () => number;
}

/** The FencedNodeSet as read (the fields the hand-off writes; the rest kept as read). */
interface FencedNodeSetObject {
  metadata?: { resourceVersion?: string };
  spec?: { nodes?: Record<string, FencedNodeEntry> };
}

function leaseRead(l: V1Lease): LeaseRead {
  const renew = l.spec?.renewTime;
  return {
    namespace: l.metadata?.namespace ?? "",
    name: l.metadata?.name ?? "",
    resourceVersion: l.metadata?.resourceVersion ?? "",
    ...(l.spec?.holderIdentity ? { holder: l.spec.holderIdentity } : {}),
    ...(renew ? { renewTime: new Date(renew).toISOString() } : {}),
  };
}

const failed = (l: Pick<LeaseRead, "namespace" | "name" | "holder">, code: string, err: unknown) => ({
  namespace: l.namespace,
  name: l.name,
  ...(l.holder ? { holder: l.holder } : {}),
  outcome: "failed" as const,
  code,
  reason: err instanceof Error ? err.message : String(err),
});

export class LeaseHandoff {
  private readonly kube: Kube;
  private readonly o: LeaseHandoffOptions;
  private readonly now: () => number;
  constructor(kube: Kube, o: LeaseHandoffOptions) {
    this.kube = kube;
    this.o = o;
    this.now = o.now ?? Date.now;
  }

  /** Hands off what the plan allows; one outcome per Lease found. Never throws. */
  handOff(plan: HandoffPlan, signal?: AbortSignal): Promise<LeaseOutcome[]> {
    return traceChild(
      "fastfence.lease hand-off",
      { "fastfence.node": plan.node, "fastfence.incident": plan.incident },
      () => this.run(plan, signal),
      (rs) => ({
        "fastfence.leases.released": rs.filter((r) => r.outcome === "released").length,
        "fastfence.leases.failed": rs.filter((r) => r.outcome === "failed").length,
        "fastfence.leases.skipped": rs.filter((r) => r.outcome === "skipped").length,
      }),
    );
  }

  private async run(plan: HandoffPlan, signal?: AbortSignal): Promise<LeaseOutcome[]> {
    const log = this.o.log.child({ incident: plan.incident, node: plan.node });
    const out: LeaseOutcome[] = [];
    // The listed Leases are read at once (most do not exist on a given platform: 404, skipped).
    const reads = await Promise.all(
      plan.leases.map((e) =>
        this.read(e).catch((err: unknown) => {
          log.warn({ err, namespace: e.namespace, lease: e.name }, "cannot read a Lease to hand off");
          out.push(failed({ namespace: e.namespace, name: e.name ?? "(selector)" }, "Error", err));
          return [];
        }),
      ),
    );
    const found = reads.flat();
    let recorded = false;
    for (const first of found) {
      if (signal?.aborted) break;
      let lease = leaseRead(first);
      let body = first;
      for (let attempt = 1; ; attempt++) {
        const podNode = await this.podNode(lease).catch((err: unknown) => {
          log.warn({ err, lease: `${lease.namespace}/${lease.name}` }, "cannot read the holder's pod");
          return null; // unmapped: left alone
        });
        const v = judge({ lease, node: plan.node, provenAt: plan.provenAt, podNode });
        if (!v.release) {
          if (v.code !== "NoHolder") log.info({ lease: `${lease.namespace}/${lease.name}` }, v.reason);
          const { namespace, name, holder } = lease;
          out.push({
            namespace,
            name,
            ...(holder ? { holder } : {}),
            outcome: "skipped",
            code: v.code,
            reason: v.reason,
          });
          break;
        }
        try {
          if (!recorded) recorded = await this.recordFenced(plan);
          await this.releaseOnceSeen(plan, lease, body, signal);
          out.push({
            namespace: lease.namespace,
            name: lease.name,
            outcome: "released",
            holder: lease.holder!,
          });
          log.info({ lease: `${lease.namespace}/${lease.name}`, holder: lease.holder }, "released the Lease");
          void this.event(plan, lease);
          break;
        } catch (err) {
          const conflict = err instanceof KubeApiError && err.status === 409;
          if (!conflict || attempt >= MAX_HANDOFF_ATTEMPTS) {
            const code = conflict
              ? "Conflict"
              : err instanceof KubeApiError && err.status === 403
                ? "Refused"
                : "Error";
            log.warn({ err, lease: `${lease.namespace}/${lease.name}` }, "could not release the Lease");
            out.push(failed(lease, code, err));
            break;
          }
          // Renewed or changed between the read and the write: read again and judge again.
          const again = await this.reread(lease).catch(() => undefined);
          if (!again) {
            out.push(failed(lease, "Error", err));
            break;
          }
          body = again;
          lease = leaseRead(again);
        }
      }
    }
    return out;
  }

  /** The release, tried again on a 403 for up to PARAM_CACHE_WAIT_MS (see there). */
  private async releaseOnceSeen(
    plan: HandoffPlan,
    lease: LeaseRead,
    body: V1Lease,
    signal?: AbortSignal,
  ): Promise<void> {
    const until = this.now() + PARAM_CACHE_WAIT_MS;
    for (;;) {
      try {
        await this.release(plan, lease, body);
        return;
      } catch (err) {
        const refused = err instanceof KubeApiError && err.status === 403;
        if (!refused || signal?.aborted || this.now() + PARAM_CACHE_RETRY_MS > until) throw err;
        this.kube.demote(this.kube.lastAnswered); // its cache may be the one behind
        await new Promise((r) => setTimeout(r, PARAM_CACHE_RETRY_MS));
      }
    }
  }

  private async read(e: LeaseHandoffEntry): Promise<V1Lease[]> {
    const namespace = e.namespace;
    if (e.name) {
      const name = e.name;
      try {
        return [
          await this.kube.read(`read lease ${namespace}/${name}`, (a) =>
            a.coordination.readNamespacedLease({ name, namespace }),
          ),
        ];
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) return [];
        throw err;
      }
    }
    const labelSelector = Object.entries(e.matchLabels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(",");
    const list = await this.kube.read(`list leases in ${namespace}`, (a) =>
      a.coordination.listNamespacedLease({ namespace, labelSelector }),
    );
    return list.items;
  }

  private reread(l: LeaseRead): Promise<V1Lease> {
    const { name, namespace } = l;
    return this.kube.read(`read lease ${namespace}/${name}`, (a) =>
      a.coordination.readNamespacedLease({ name, namespace }),
    );
  }

  /** A pod-form holder's node: its spec.nodeName ("" unbound), null when no such pod; undefined for host holders. */
  private async podNode(l: LeaseRead): Promise<string | null | undefined> {
    const form = holderForm(l.holder);
    if (form?.kind !== "pod") return undefined;
    try {
      const pod = await this.kube.read(`read pod ${l.namespace}/${form.pod}`, (a) =>
        a.core.readNamespacedPod({ name: form.pod, namespace: l.namespace }),
      );
      return pod.spec?.nodeName ?? "";
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return null;
      throw err;
    }
  }

  /** Adds the node to the fenced-nodes FencedNodeSet (guarded; retried on 409). */
  private async recordFenced(plan: HandoffPlan): Promise<boolean> {
    const { group, version, plural, name } = FENCED_NODES;
    const { namespace } = this.o;
    const entry = fencedNodeEntry(plan.incident, plan.provenAt);
    const ref = { group, version, namespace, plural, name };
    for (let attempt = 1; ; attempt++) {
      const set = (await this.kube.read(`read fencednodeset ${name}`, (a) =>
        a.custom.getNamespacedCustomObject(ref),
      )) as FencedNodeSetObject;
      const listed = set.spec?.nodes?.[plan.node];
      if (listed?.incident === entry.incident && listed.provenAt === entry.provenAt) return true;
      try {
        const body = { ...set, spec: { ...set.spec, nodes: { ...set.spec?.nodes, [plan.node]: entry } } };
        await this.kube.call(`record ${plan.node} in fencednodeset ${name}`, (a) =>
          a.custom.replaceNamespacedCustomObject({ ...ref, body }),
        );
        return true;
      } catch (err) {
        if (!(err instanceof KubeApiError && err.status === 409) || attempt >= MAX_HANDOFF_ATTEMPTS)
          throw err;
      }
    }
  }

  private release(plan: HandoffPlan, lease: LeaseRead, body: V1Lease): Promise<V1Lease> {
    const at = new MicroTime(this.now());
    const w = releaseWrite(plan, lease, at.toISOString());
    const { namespace, name } = lease;
    const spec = {
      ...body.spec,
      acquireTime: at,
      renewTime: at,
      leaseDurationSeconds: w.spec.leaseDurationSeconds,
    };
    delete spec.holderIdentity;
    const next: V1Lease = {
      ...body,
      metadata: { ...body.metadata, annotations: { ...body.metadata?.annotations, ...w.annotations } },
      spec,
    };
    return traceChild(
      "fastfence.lease release",
      { "fastfence.lease": `${namespace}/${name}`, "fastfence.lease.holder": lease.holder ?? "" },
      () =>
        this.kube.call(`release lease ${namespace}/${name}`, (a) =>
          a.coordination.replaceNamespacedLease({ name, namespace, body: next }),
        ),
    );
  }

  /** One Event on the incident per released Lease (best effort, logged when lost). */
  private async event(plan: HandoffPlan, lease: LeaseRead): Promise<void> {
    try {
      await recordEvent(
        this.kube,
        {
          apiVersion: `${FENCING_POLICY_GROUP}/${FENCING_POLICY_VERSION}`,
          kind: "NodeFence",
          name: plan.incident,
          namespace: this.o.namespace,
        },
        {
          type: "Normal",
          reason: "LeaseHandedOff",
          message: `released Lease ${lease.namespace}/${lease.name} held by ${lease.holder ?? "?"} on ${plan.node}, powered off at ${plan.provenAt}: a standby leads at its next retry`,
          component: this.o.component,
          instance: this.o.instance,
          nowMs: this.now(),
        },
      );
    } catch (err) {
      this.o.log.warn({ err, incident: plan.incident }, "recording the LeaseHandedOff Event failed");
    }
  }
}
