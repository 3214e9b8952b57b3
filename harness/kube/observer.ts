// Observer keys on heartbeat Leases, for tests that speak as (or against) a node's
// event-source replica: publish an Ed25519 key (source/observer-key.ts) on a node's
// heartbeat Lease (fastfence-alive-<node>) in the annotation detect and confirm verify
// with, as the current key (what the replica does) or beside it as the previous one,
// optionally renewing the Lease; and mark a Node Ready as its kubelet would. Every write
// is a read-modify-replace on the Lease's resourceVersion (a live replica renews it every
// few hundred ms, so a conflict is retried). It only talks to the API server of the
// KubeConfig it is given (as that identity, so admission policies apply) and never writes
// or logs a private key.
import { CoordinationV1Api, CoreV1Api, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { OBSERVER_KEY_ANNOTATION, OBSERVER_PREVIOUS_KEY_ANNOTATION } from "../../core/evidence-proof.ts";
import { MicroTime } from "../../infra/kube/lease.ts";
import { EnvError } from "../env/base.ts";

export interface PublishKeyOptions {
  namespace: string;
  /** The node whose heartbeat Lease carries the key. */
  node: string;
  /** The annotation value to publish (ObserverKey.annotation: "<keyId>:<base64 SPKI DER>"). */
  annotation: string;
  /** "current" (as the replica publishes its own key, default) or "previous" (beside it). */
  slot?: "current" | "previous";
  /**
   * Renew the Lease now as `holder` for `durationSeconds` (a heartbeat, so the observer
   * counts as alive); required when the Lease does not exist yet. Unset: the Lease's
   * times and holder are kept.
   */
  renew?: { holder: string; durationSeconds: number };
}

const code = (err: unknown) => (err as { code?: number }).code;

/** Writes the key onto the node's heartbeat Lease (creating it with `renew`), retrying conflicts. */
export async function publishObserverKey(kc: KubeConfig, o: PublishKeyOptions): Promise<void> {
  const coord = kc.makeApiClient(CoordinationV1Api);
  const name = heartbeatLeaseName(o.node);
  const { namespace } = o;
  const slot = o.slot === "previous" ? OBSERVER_PREVIOUS_KEY_ANNOTATION : OBSERVER_KEY_ANNOTATION;
  for (let attempt = 1; ; attempt++) {
    let lease: V1Lease | undefined;
    try {
      lease = await coord.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (code(err) !== 404) throw err;
    }
    const now = new MicroTime(Date.now());
    const renewed = o.renew
      ? { holderIdentity: o.renew.holder, leaseDurationSeconds: o.renew.durationSeconds, renewTime: now }
      : {};
    try {
      if (!lease) {
        if (!o.renew) throw new EnvError(`heartbeat Lease ${namespace}/${name} does not exist (give renew)`);
        await coord.createNamespacedLease({
          namespace,
          body: {
            metadata: { name, namespace, annotations: { [slot]: o.annotation } },
            spec: { ...renewed, acquireTime: now },
          },
        });
        return;
      }
      const spec = lease.spec ?? {};
      const body: V1Lease = {
        ...lease,
        metadata: {
          ...lease.metadata,
          annotations: { ...lease.metadata?.annotations, [slot]: o.annotation },
        },
        // Lease times must go back in MicroTime format (six fractional digits)
        spec: {
          ...spec,
          ...(spec.acquireTime ? { acquireTime: new MicroTime(spec.acquireTime) } : {}),
          ...(spec.renewTime ? { renewTime: new MicroTime(spec.renewTime) } : {}),
          ...renewed,
        },
      };
      await coord.replaceNamespacedLease({ name, namespace, body });
      return;
    } catch (err) {
      if (code(err) !== 409 || attempt >= 50) throw err;
    }
  }
}

/** Sets the Node's Ready condition to True with fresh times (what a kubelet reports). */
export async function setNodeReady(kc: KubeConfig, node: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  for (let attempt = 1; ; attempt++) {
    const n = await core.readNodeStatus({ name: node });
    const now = new Date();
    const ready = {
      type: "Ready",
      status: "True",
      reason: "KubeletReady",
      message: "kubelet is posting ready status",
      lastHeartbeatTime: now,
      lastTransitionTime: now,
    };
    n.status = {
      ...n.status,
      conditions: [...(n.status?.conditions ?? []).filter((c) => c.type !== "Ready"), ready],
    };
    try {
      await core.replaceNodeStatus({ name: node, body: n });
      return;
    } catch (err) {
      if (code(err) !== 409 || attempt >= 20) throw err;
    }
  }
}
