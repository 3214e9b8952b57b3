// Node-level reads and the release actions of fence, remediate-workloads and recover: read a
// node's incarnation (boot ID), readiness, labels, cordon and planned-work annotations; set or remove the out-of-service
// taint (resourceVersion-guarded replace, retried on conflict with a fresh read); write the
// fenced-off fact (fence, core/fenced-off.ts); force-
// delete the node's pods, its VolumeAttachments and the KubeVirt virt-launcher pods that ran
// there (never the VMIs: KubeVirt fails them and restarts their VMs, docs/safety.md).
// It never decides whether releasing is safe: callers do that from incident state (S1).
import {
  PatchStrategy,
  setHeaderOptions,
  type V1Node,
  type V1Pod,
  type V1Taint,
} from "@kubernetes/client-node";
import { FastfenceError } from "../../core/errors.ts";
import { FENCED_OFF_ANNOTATION } from "../../core/fenced-off.ts";
import { PLANNED_ANNOTATIONS } from "../../core/planned.ts";
import { probeTargetOf, type ProbeTarget } from "../../core/probe-address.ts";
import { KubeApiError, type Kube } from "./client.ts";

export const OUT_OF_SERVICE_TAINT: V1Taint = {
  key: "node.kubernetes.io/out-of-service",
  value: "nodeshutdown",
  effect: "NoExecute",
};

export interface NodeInfo {
  name: string;
  bootId: string;
  /** The Ready condition's status ("Unknown" when absent). */
  ready: "True" | "False" | "Unknown";
  /** Roles are read from these by policy (controlPlane.roleLabels, core/rules.ts isControlPlane). */
  labels: Record<string, string>;
  taints: V1Taint[];
  resourceVersion: string;
  /** spec.unschedulable (cordoned). */
  unschedulable: boolean;
  /** Only the annotations that say planned work (core/planned.ts PLANNED_ANNOTATIONS). */
  annotations: Record<string, string>;
  /** Where the node is probed (core/probe-address.ts); absent: no address. */
  probeAddress?: ProbeTarget;
  /** The fenced-off fact (core/fenced-off.ts FENCED_OFF_ANNOTATION); absent: none. */
  fencedOff?: string;
}

export function nodeInfo(n: V1Node): NodeInfo {
  const status = n.status?.conditions?.find((c) => c.type === "Ready")?.status;
  const ready = status === "True" || status === "False" ? status : "Unknown";
  const labels = n.metadata?.labels ?? {};
  const probe = probeTargetOf(n);
  const fencedOff = n.metadata?.annotations?.[FENCED_OFF_ANNOTATION];
  return {
    name: n.metadata?.name ?? "",
    bootId: n.status?.nodeInfo?.bootID ?? "",
    ready,
    labels,
    taints: n.spec?.taints ?? [],
    resourceVersion: n.metadata?.resourceVersion ?? "",
    unschedulable: n.spec?.unschedulable === true,
    annotations: plannedAnnotations(n.metadata?.annotations),
    ...(probe ? { probeAddress: probe } : {}),
    ...(fencedOff !== undefined ? { fencedOff } : {}),
  };
}

function plannedAnnotations(all: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of PLANNED_ANNOTATIONS) if (all?.[k] !== undefined) out[k] = all[k];
  return out;
}

export interface Released {
  pods: string[];
  volumeAttachments: string[];
  /** virt-launcher pods (namespace/name), one per VMI that ran on the node. */
  vmLaunchers: string[];
}

/** The label KubeVirt puts on every virt-launcher pod (services/template.go podLabels). */
export const VIRT_LAUNCHER_LABEL = { key: "kubevirt.io", value: "virt-launcher" } as const;

const sameTaint = (a: V1Taint, b: V1Taint) => a.key === b.key && a.effect === b.effect;

export class NodeOps {
  private readonly kube: Kube;
  constructor(kube: Kube) {
    this.kube = kube;
  }

  async get(name: string): Promise<NodeInfo | undefined> {
    try {
      return nodeInfo(await this.kube.read(`read node ${name}`, (a) => a.core.readNode({ name })));
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  async list(): Promise<NodeInfo[]> {
    const l = await this.kube.read("list nodes", (a) => a.core.listNode());
    return l.items.map(nodeInfo);
  }

  /**
   * Writes the fenced-off fact (fence, after a proven power-off): one merge patch of the
   * annotation; knative/base/admission/node-writers-policy.yaml admits nothing else from fence.
   */
  async setFencedOff(name: string, value: string): Promise<void> {
    await this.kube.call(`mark node ${name} fenced off`, (a) =>
      a.core.patchNode(
        { name, body: { metadata: { annotations: { [FENCED_OFF_ANNOTATION]: value } } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
  }

  /** Adds (present=true) or removes the taint; a conflicting write is retried on a fresh read. */
  async setTaint(name: string, taint: V1Taint, present: boolean): Promise<boolean> {
    if (present) {
      // One request on the release path: append to the list without reading the node.
      // The API server refuses it (422) when the node has no taints list yet or already
      // carries a taint with this key and effect; then the read-modify-write below decides.
      try {
        await this.kube.call(`add taint ${taint.key} to node ${name}`, (a) =>
          a.core.patchNode(
            {
              name,
              body: [{ op: "add", path: "/spec/taints/-", value: { ...taint, timeAdded: new Date() } }],
            },
            setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
          ),
        );
        return true;
      } catch (err) {
        if (!(err instanceof KubeApiError && err.status === 422)) throw err;
      }
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const node = await this.kube.read(`read node ${name}`, (a) => a.core.readNode({ name }));
      const taints = node.spec?.taints ?? [];
      const has = taints.some((t) => sameTaint(t, taint));
      if (has === present) return false;
      const next = present
        ? [...taints, { ...taint, timeAdded: new Date() }]
        : taints.filter((t) => !sameTaint(t, taint));
      try {
        await this.kube.call(`update taints of node ${name}`, (a) =>
          a.core.replaceNode({ name, body: { ...node, spec: { ...node.spec, taints: next } } }),
        );
        return true;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 409) continue;
        throw err;
      }
    }
    throw new FastfenceError("FF_KUBE_CONFLICT", `taint of node ${name}: too many concurrent updates`, {
      retriable: true,
    });
  }

  /**
   * Force-deletes (grace period 0) every pod bound to the node; with `exceptVmLaunchers`,
   * all but KubeVirt's virt-launcher pods, which deleteVmLaunchers releases beside it (each
   * pod then counted once, by the call that deleted it, not by whichever listed first).
   */
  async forceDeletePods(node: string, o: { exceptVmLaunchers?: boolean } = {}): Promise<string[]> {
    const pods = await this.kube.read(`list pods on ${node}`, (a) =>
      a.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` }),
    );
    const launcher = (p: V1Pod) =>
      p.metadata?.labels?.[VIRT_LAUNCHER_LABEL.key] === VIRT_LAUNCHER_LABEL.value;
    // All at once: the node is off (S1 was checked by the caller); every second counts.
    return Promise.all(
      pods.items.filter((p) => !(o.exceptVmLaunchers && launcher(p))).map((p) => this.forceDeletePod(p)),
    );
  }

  /** Deletes every VolumeAttachment of the node, so RWO volumes can attach elsewhere. */
  async deleteVolumeAttachments(node: string): Promise<string[]> {
    const vas = await this.kube.read("list volumeattachments", (a) => a.storage.listVolumeAttachment());
    return Promise.all(
      vas.items
        .filter((v) => v.spec?.nodeName === node)
        .map(async (va) => {
          const name = va.metadata?.name ?? "";
          try {
            if (va.metadata?.finalizers?.length)
              await this.kube.call(`clear finalizers of volumeattachment ${name}`, (a) =>
                a.storage.replaceVolumeAttachment({
                  name,
                  body: { ...va, metadata: { ...va.metadata, finalizers: [] } },
                }),
              );
            await this.kube.call(`delete volumeattachment ${name}`, (a) =>
              a.storage.deleteVolumeAttachment({ name, gracePeriodSeconds: 0 }),
            );
          } catch (err) {
            if (!(err instanceof KubeApiError && err.status === 404)) throw err;
          }
          return name;
        }),
    );
  }

  /**
   * Force-deletes (grace period 0) the KubeVirt virt-launcher pods bound to the node, one per
   * VirtualMachineInstance that ran there. It never touches a VMI: KubeVirt's virt-controller
   * sees the launcher gone, fails the VMI, and its VM controller restarts the VM for both
   * run strategies Always and RerunOnFailure (docs/safety.md "Releasing KubeVirt VMs");
   * a deleted VMI would leave a RerunOnFailure VM stopped. Without KubeVirt: no such pods.
   */
  async deleteVmLaunchers(node: string): Promise<string[]> {
    const pods = await this.kube.read(`list virt-launcher pods on ${node}`, (a) =>
      a.core.listPodForAllNamespaces({
        fieldSelector: `spec.nodeName=${node}`,
        labelSelector: `${VIRT_LAUNCHER_LABEL.key}=${VIRT_LAUNCHER_LABEL.value}`,
      }),
    );
    return Promise.all(pods.items.map((p) => this.forceDeletePod(p)));
  }

  /** Force-deletes one pod (grace 0); gone already is done. Returns "namespace/name". */
  private async forceDeletePod(p: V1Pod): Promise<string> {
    const name = p.metadata?.name ?? "";
    const namespace = p.metadata?.namespace ?? "default";
    try {
      await this.kube.call(`delete pod ${namespace}/${name}`, (a) =>
        a.core.deleteNamespacedPod({
          name,
          namespace,
          gracePeriodSeconds: 0,
          body: { gracePeriodSeconds: 0 },
        }),
      );
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 404)) throw err;
    }
    return `${namespace}/${name}`;
  }
}
