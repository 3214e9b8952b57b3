// `fastfence fence NODE --withdraw --reason TEXT`: withdraws the request to fence NODE on
// the incident of its current boot, in the caller's name (SelfSubjectReview): a merge patch
// of spec.operatorWithdrawal {by, reason, at} guarded by the resourceVersion; the request
// stays as the record. The API server ties `by` to the caller and keeps the withdrawal
// unchanged once set (knative/base/admission/operator-request-policy.yaml). confirm never
// confirms a withdrawn request, and fence closes a confirmed one before its next round
// (core/operator-request.ts). It never writes status and never talks to a BMC. Leaves the
// Event OperatorFenceWithdrawn on the Node and the NodeFence.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { FastfenceError } from "../core/errors.ts";
import {
  incidentName,
  NODEFENCE_GROUP,
  NODEFENCE_KIND,
  NODEFENCE_PLURAL,
  NODEFENCE_VERSION,
  statusOf,
  type NodeFence,
  type OperatorRequest,
  type OperatorWithdrawal,
} from "../core/incident.ts";
import { KubeApiError, type Kube } from "../infra/kube/client.ts";
import { IncidentStore } from "../infra/kube/incidents.ts";
import { whoAmI } from "../infra/kube/whoami.ts";
import { ActionRefusedError, OPERATOR_EVENT_REASONS, readNode, tryEvent } from "./operator.ts";

const G = { group: NODEFENCE_GROUP, version: NODEFENCE_VERSION, plural: NODEFENCE_PLURAL };
const uidOf = (o: NodeFence): { uid?: string } => (o.metadata.uid ? { uid: o.metadata.uid } : {});

/** What `withdrawRequest` did. */
export interface WithdrawResult {
  node: string;
  bootId: string;
  incident: string;
  namespace: string;
  /** withdrawn: written now; already-withdrawn: nothing written. */
  action: "withdrawn" | "already-withdrawn";
  withdrawal: OperatorWithdrawal;
  request: OperatorRequest;
  phase: string;
  message: string;
}

/** What withdrawing the request on `inc` means: write it, nothing to write, or refuse. Pure. */
export function withdrawVerdict(
  inc: NodeFence | undefined,
  node: string,
): { action: "patch" } | { action: "none"; message: string } | { action: "refuse"; message: string } {
  if (!inc?.spec.operatorRequest)
    return {
      action: "refuse",
      message: `no request to fence ${node} on its current boot${inc ? ` (incident ${inc.metadata.name} was not requested by anyone)` : ""}: nothing to withdraw`,
    };
  const w = inc.spec.operatorWithdrawal;
  if (w)
    return {
      action: "none",
      message: `the request was already withdrawn by ${w.by} at ${w.at}: ${w.reason}`,
    };
  const phase = inc.status ? statusOf(inc).phase : "";
  if (["FencedOff", "Released", "Recovered", "Closed"].includes(phase))
    return {
      action: "refuse",
      message: `incident ${inc.metadata.name} is ${phase}: too late to withdraw (nothing more is fenced for it)`,
    };
  return { action: "patch" };
}

/** Withdraws the request on the node's current incident; idempotent. */
export async function withdrawRequest(
  kube: Kube,
  o: { node: string; reason: string; namespace: string; command: string },
): Promise<WithdrawResult> {
  const me = (await whoAmI(kube)).username;
  const node = await readNode(kube, o.node);
  const bootId = node.status?.nodeInfo?.bootID ?? "";
  const name = incidentName(o.node, bootId);
  const store = new IncidentStore(kube, o.namespace);
  const withdrawal: OperatorWithdrawal = { by: me, reason: o.reason, at: new Date().toISOString() };
  for (let attempt = 1; attempt <= 5; attempt++) {
    const cur = bootId ? await store.get(name) : undefined;
    const v = withdrawVerdict(cur, o.node);
    if (v.action === "refuse") throw new ActionRefusedError(v.message);
    const inc = cur!;
    const base = {
      node: o.node,
      bootId,
      incident: name,
      namespace: o.namespace,
      request: inc.spec.operatorRequest!,
      phase: inc.status ? statusOf(inc).phase : "",
    };
    if (v.action === "none")
      return {
        ...base,
        action: "already-withdrawn",
        withdrawal: inc.spec.operatorWithdrawal!,
        message: v.message,
      };
    try {
      const written = (await kube.call(`withdraw the request on nodefence ${name}`, (a) =>
        a.custom.patchNamespacedCustomObject(
          {
            ...G,
            namespace: o.namespace,
            name,
            body: {
              metadata: { resourceVersion: inc.metadata.resourceVersion },
              spec: { operatorWithdrawal: withdrawal },
            },
          },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        ),
      )) as NodeFence;
      const text = `${me} withdrew the request by ${base.request.by} to fence ${o.node} (boot ${bootId}, incident ${name}): ${o.reason}`;
      const e = { type: "Normal" as const, reason: OPERATOR_EVENT_REASONS.fenceWithdrawn, message: text };
      const nf = { apiVersion: `${NODEFENCE_GROUP}/${NODEFENCE_VERSION}`, kind: NODEFENCE_KIND, name };
      await tryEvent(kube, o.command, { ...nf, namespace: o.namespace, ...uidOf(written) }, e);
      const nodeRef = { apiVersion: "v1", kind: "Node", name: o.node };
      await tryEvent(
        kube,
        o.command,
        { ...nodeRef, ...(node.metadata?.uid ? { uid: node.metadata.uid } : {}) },
        e,
      );
      return {
        ...base,
        action: "withdrawn",
        withdrawal,
        message: `withdrew the request to fence ${o.node} (incident ${name}, ${base.phase || "not taken up yet"}) as ${me}: it is not confirmed, and no new round starts on it`,
      };
    } catch (err) {
      if (!(err instanceof KubeApiError && (err.status === 409 || err.status === 404))) throw err;
    }
  }
  throw new FastfenceError("FF_KUBE_CONFLICT", `nodefence ${name}: too many concurrent changes; try again`, {
    retriable: true,
  });
}
