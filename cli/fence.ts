// `fastfence fence NODE --reason TEXT [--wait SECONDS]`: an authorised person asks for a
// node to be fenced. It learns the requester's user name from the API server
// (SelfSubjectReview), reads the node's incarnation (boot ID) and writes the request as
// spec.operatorRequest {by, reason, at} of the NodeFence for that incarnation: a new one
// (named and labelled like confirm's), or added to an open one nobody confirmed yet. The
// API server ties `by` to the requester (knative/base/admission/operator-request-policy.yaml).
// confirm takes the request up on its next reconcile pass, through the pauses, the storm
// guard and the etcd-quorum rule; fence still needs a read-back of Off (S1). With --wait it
// follows the incident and prints each phase change. `fastfence fence NODE --withdraw
// --reason TEXT` withdraws the request on the node's current incident (spec.operatorWithdrawal
// {by, reason, at}, tied to the withdrawer by the same policy): confirm never confirms it, and
// fence powers nothing off on it any more. A request also expires by itself
// (fencing.operatorRequestMaxAgeMs, core/operator-request.ts). It never writes status, never
// talks to a BMC and never confirms anything itself. Leaves the Event OperatorFenceRequested
// (or OperatorFenceWithdrawn) on the Node and on the NodeFence.
import { PatchStrategy, setHeaderOptions, type V1Node } from "@kubernetes/client-node";
import { FastfenceError } from "../core/errors.ts";
import {
  emptyStatus,
  incidentName,
  newIncident,
  NODEFENCE_GROUP,
  NODEFENCE_KIND,
  NODEFENCE_PLURAL,
  NODEFENCE_VERSION,
  statusOf,
  type NodeFence,
  type OperatorRequest,
} from "../core/incident.ts";
import { PAUSE_ANNOTATION } from "../core/planned.ts";
import { DEFAULT_POLICY, type FencingPolicySpec } from "../core/policy.ts";
import { KubeApiError, type Kube } from "../infra/kube/client.ts";
import { IncidentStore } from "../infra/kube/incidents.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { whoAmI } from "../infra/kube/whoami.ts";
import { existingVerdict } from "./fence-state.ts";
import { waitForFence, type WaitResult } from "./fence-wait.ts";
import { outputHelp, parseCommand, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import {
  ActionRefusedError,
  connect,
  failed,
  MAX_REASON,
  OPERATOR_EVENT_REASONS,
  POLICY_HELP,
  policyOption,
  readNode,
  tryEvent,
} from "./operator.ts";
import { fastfenceNamespace } from "./kube-target.ts";
import { withdrawRequest } from "./fence-withdraw.ts";
import { render } from "./output.ts";
import { FENCE_ARGS, kubeTargetHelp } from "./specs.ts";

export { FENCE_ARGS };

const HELP = `Usage: fastfence fence NODE --reason TEXT [options]

Asks fastfence to fence NODE now, as you (your user name as the API server knows it is
recorded; nobody can request fencing in someone else's name). The request stands in for
the observers' evidence and nothing else: confirm still applies the pauses, another
remediator's claim on the node, the storm guard and the etcd-quorum rule, and the node's
workloads move only after its power-off is read back. It is tied to the node's current
boot: a node that reboots first is not fenced. A repeat writes nothing. The request
expires: confirm refuses it once it is older than the FencingPolicy's
fencing.operatorRequestMaxAgeMs (default 10 minutes; Blocked, OperatorRequestExpired).
Every round takes fence's last look: a node that answers its probe or renews its heartbeat
is not powered off. Leaves the Event OperatorFenceRequested on the Node and the NodeFence.

fastfence fence NODE --withdraw --reason TEXT withdraws the request on the node's current
incident (anyone who may patch NodeFences, in their own name): it is never confirmed, and a
confirmed one is closed before its next round (OperatorRequestWithdrawn). A round already
running is not stopped. Leaves the Event OperatorFenceWithdrawn.

Options:
  --reason TEXT           why (in the incident, its Events and its trace; required)
  --withdraw              withdraw the request instead of making one
  --wait SECONDS          follow the incident, printing each phase change, until its workloads
                          are released (exit 0), it is Blocked or every round failed (exit 1),
                          or SECONDS pass (exit 4); default 0: do not wait
${POLICY_HELP}
${kubeTargetHelp()}`;

/** What `requestFence` did. */
export interface FenceResult {
  node: string;
  bootId: string;
  incident: string;
  namespace: string;
  /** created: a new incident; requested: the request added to an open one; already-*: nothing written. */
  action: "created" | "requested" | "already-requested" | "already-fencing" | "already-fenced";
  /** Who asked now (the API server's name for the caller). */
  requestedBy: string;
  /** The request in force on the incident (someone else's when it was there first). */
  request?: OperatorRequest;
  /** The incident's phase when the command wrote or found it ("" when no stage has written one). */
  phase: string;
  message: string;
  /** What will hold the request or what to know (pauses, Observe mode, a Ready node). */
  notes: string[];
  wait?: WaitResult;
}

const uidOf = (o: NodeFence): { uid?: string } => (o.metadata.uid ? { uid: o.metadata.uid } : {});

const G = { group: NODEFENCE_GROUP, version: NODEFENCE_VERSION, plural: NODEFENCE_PLURAL };

/** The request's NodeFence: newIncident's name and labels, no status, spec.operatorRequest. Pure. */
export function requestedIncident(node: string, bootId: string, request: OperatorRequest): NodeFence {
  const { status: _none, ...inc } = newIncident(node, bootId, emptyStatus());
  return { ...inc, spec: { ...inc.spec, operatorRequest: request } };
}

/** Asks for the node to be fenced; idempotent (a repeat writes nothing and says what it found). */
export async function requestFence(
  kube: Kube,
  o: { node: string; reason: string; namespace: string; policy: string; command: string },
): Promise<FenceResult & { maxRounds: number }> {
  const me = (await whoAmI(kube)).username;
  const node = await readNode(kube, o.node);
  const bootId = node.status?.nodeInfo?.bootID ?? "";
  if (!bootId)
    throw new ActionRefusedError(
      `node ${o.node} has no boot ID (status.nodeInfo.bootID): its kubelet never reported one, and an incident is tied to it`,
    );
  const name = incidentName(o.node, bootId);
  const request: OperatorRequest = { by: me, reason: o.reason, at: new Date().toISOString() };
  const base = { node: o.node, bootId, incident: name, namespace: o.namespace, requestedBy: me };
  const { result, written } = await writeRequest(new IncidentStore(kube, o.namespace), kube, base, request);
  if (written) {
    const where = `incident ${name} in ${o.namespace}`;
    result.message =
      result.action === "created"
        ? `requested fencing of ${o.node} (boot ${bootId}) as ${me}: ${where} created; confirm takes it up on its next reconcile pass`
        : `requested fencing of ${o.node} (boot ${bootId}) as ${me} on the open ${where} (${result.phase || "not taken up yet"}); confirm takes it up on its next reconcile pass`;
    const text = `${me} requested fencing of ${o.node} (boot ${bootId}, incident ${name}): ${o.reason}`;
    const e = { type: "Normal" as const, reason: OPERATOR_EVENT_REASONS.fenceRequested, message: text };
    await tryEvent(
      kube,
      o.command,
      {
        apiVersion: `${NODEFENCE_GROUP}/${NODEFENCE_VERSION}`,
        kind: NODEFENCE_KIND,
        name,
        namespace: o.namespace,
        ...uidOf(written),
      },
      e,
    );
    await tryEvent(
      kube,
      o.command,
      {
        apiVersion: "v1",
        kind: "Node",
        name: o.node,
        ...(node.metadata?.uid ? { uid: node.metadata.uid } : {}),
      },
      e,
    );
  }
  const { policy, note } = await readPolicy(kube, o.policy);
  result.notes = [...(note ? [note] : []), ...requestNotes(node, policy)];
  return { ...result, maxRounds: policy.fencing.maxRounds };
}

/**
 * Creates the incident with the request, or adds the request to the open one (merge patch
 * guarded by its resourceVersion), or finds there is nothing to write; re-reads on a race.
 */
async function writeRequest(
  store: IncidentStore,
  kube: Kube,
  base: Pick<FenceResult, "node" | "bootId" | "incident" | "namespace" | "requestedBy">,
  request: OperatorRequest,
): Promise<{ result: FenceResult; written?: NodeFence }> {
  const name = base.incident;
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      const written = await store.create(requestedIncident(base.node, base.bootId, request));
      return { result: { ...base, action: "created", request, phase: "", message: "", notes: [] }, written };
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 409)) throw err;
    }
    const cur = await store.get(name);
    if (!cur) continue; // deleted since: create it again
    const v = existingVerdict(cur);
    if (v.action === "ended") throw new ActionRefusedError(v.message);
    const phase = cur.status ? statusOf(cur).phase : "";
    if (v.action === "none") {
      const req = cur.spec.operatorRequest;
      return {
        result: {
          ...base,
          action: v.state,
          ...(req ? { request: req } : {}),
          phase,
          message: v.message,
          notes: [],
        },
      };
    }
    try {
      const written = (await kube.call(`request fencing on nodefence ${name}`, (a) =>
        a.custom.patchNamespacedCustomObject(
          {
            ...G,
            namespace: base.namespace,
            name,
            body: {
              metadata: { resourceVersion: cur.metadata.resourceVersion },
              spec: { operatorRequest: request },
            },
          },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        ),
      )) as NodeFence;
      return { result: { ...base, action: "requested", request, phase, message: "", notes: [] }, written };
    } catch (err) {
      // 409: it changed since the read (e.g. confirm wrote it); 404: deleted. Look again.
      if (!(err instanceof KubeApiError && (err.status === 409 || err.status === 404))) throw err;
    }
  }
  throw new FastfenceError("FF_KUBE_CONFLICT", `nodefence ${name}: too many concurrent changes; try again`, {
    retriable: true,
  });
}

async function readPolicy(kube: Kube, name: string): Promise<{ policy: FencingPolicySpec; note?: string }> {
  try {
    return { policy: await new PolicyReader(kube, name, 0).get(Date.now(), { fresh: true }) };
  } catch (err) {
    const fe = err instanceof FastfenceError ? err : undefined;
    return {
      policy: DEFAULT_POLICY,
      note: `could not read FencingPolicy ${name} (${fe?.message ?? String(err)}); --wait assumes the default fencing.maxRounds`,
    };
  }
}

/** What will hold the request, or what the requester should know. Pure. */
export function requestNotes(node: V1Node, policy: FencingPolicySpec): string[] {
  const name = node.metadata?.name ?? "";
  const out: string[] = [];
  if (policy.paused)
    out.push(
      `fencing is paused cluster-wide (${policy.pausedReason || "no reason given"}): the request is held (Blocked, FencingPaused) until "fastfence resume"`,
    );
  const pause = node.metadata?.annotations?.[PAUSE_ANNOTATION];
  if (pause !== undefined)
    out.push(
      `fencing of ${name} is paused (${pause || "no reason given"}): the request is held (Blocked, NodePaused) until "fastfence resume ${name}"`,
    );
  if (policy.mode === "Observe")
    out.push(
      `the FencingPolicy is in Observe mode: fence records what it would do and closes the incident (reason Observed) without powering ${name} off`,
    );
  if (node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
    out.push(
      `${name} is Ready (its kubelet reports): fencing powers off a node that may be running; its workloads move only after the power-off is read back`,
    );
  return out;
}

export async function fenceCommand(argv: string[]): Promise<number> {
  const args = parseCommand(FENCE_ARGS, argv);
  if (args.help) {
    console.log(`${HELP}\n${outputHelp(FENCE_ARGS)}\n  -h, --help              this help`);
    return EXIT.ok;
  }
  const v = args.values;
  const node = args.positionals[0];
  if (!node) throw new UsageError("fence", "which node? fastfence fence NODE --reason TEXT");
  const reason = v.reason?.trim();
  if (!reason) throw new UsageError("fence", "--reason is required: say why the node must be fenced");
  if (reason.length > MAX_REASON)
    throw new UsageError("fence", `--reason is ${reason.length} characters long; at most ${MAX_REASON}`);
  const waitS = Number(v.wait ?? 0);
  if (v.wait?.trim() === "" || !Number.isFinite(waitS) || waitS < 0)
    throw new UsageError("fence", `--wait takes seconds (0 or more), not "${v.wait}"`);
  const namespace = fastfenceNamespace("fence", v.namespace);
  if (v.withdraw && v.wait !== undefined)
    throw new UsageError("fence", "--wait cannot be used with --withdraw");
  const kube = connect("fence", v);
  const text = args.output === "text";
  if (v.withdraw) {
    try {
      const r = await withdrawRequest(kube, { node, reason, namespace, command: "fence" });
      console.log(text ? r.message : render(args.output, r));
      return EXIT.ok;
    } catch (err) {
      return failed(`fence ${node} --withdraw`, err);
    }
  }
  try {
    const { maxRounds, ...r } = await requestFence(kube, {
      node,
      reason,
      namespace,
      policy: policyOption(v.policy),
      command: "fence",
    });
    for (const n of r.notes) console.error(`fastfence fence: note: ${n}`);
    if (text) console.log(r.message);
    if (waitS === 0) {
      if (!text) console.log(render(args.output, r));
      return EXIT.ok;
    }
    const w = await waitForFence(
      kube,
      { incident: r.incident, namespace, maxRounds, waitMs: waitS * 1000 },
      (line) => console.error(line),
    );
    console.log(render(args.output, { ...r, wait: w }, () => w.message));
    return w.ok ? EXIT.ok : w.outcome === "timeout" ? EXIT.timeout : EXIT.failed;
  } catch (err) {
    return failed(`fence ${node}`, err);
  }
}
