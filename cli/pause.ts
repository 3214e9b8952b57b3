// `fastfence pause [NODE] --reason TEXT` and `fastfence resume [NODE]`: the operator's
// switch for planned work. Without NODE, cluster-wide: the FencingPolicy's spec.paused and
// spec.pausedReason (a merge patch; a missing policy is created with only those fields,
// and the output says so). With NODE, that node: its annotation fastfence.io/paused, whose
// value is the reason. confirm and fence read both from the API (core/planned.ts holdOf)
// and hold every incident they cover. Idempotent: the current state is read first and an
// action that changes nothing writes nothing. Each change leaves an Event (FencingPaused,
// FencingResumed on the FencingPolicy; NodeFencingPaused, NodeFencingResumed on the Node)
// naming who and why. It never touches any other field of the policy or the node, never
// an incident, and never a BMC.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { PAUSE_ANNOTATION } from "../core/planned.ts";
import { FENCING_POLICY_GROUP, FENCING_POLICY_KIND, FENCING_POLICY_VERSION } from "../core/policy.ts";
import { KubeApiError, type Kube } from "../infra/kube/client.ts";
import { outputHelp, parseCommand, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import {
  connect,
  failed,
  MAX_REASON,
  NotFoundError,
  OPERATOR_EVENT_REASONS,
  POLICY_HELP,
  policyOption,
  requesterForEvents,
  tryEvent,
} from "./operator.ts";
import { render } from "./output.ts";
import { kubeTargetHelp, PAUSE_ARGS, RESUME_ARGS } from "./specs.ts";

export { PAUSE_ARGS, RESUME_ARGS };

/** pause and resume write cluster-scoped objects only: -n is taken, as kubectl takes it, and changes nothing. */
const NS_UNUSED = "accepted like every command's; pause and resume write only cluster-scoped objects";

const PAUSE_HELP = `Usage: fastfence pause [NODE] --reason TEXT [options]

Stops fastfence from fencing. Without NODE: every node (FencingPolicy spec.paused; a
missing FencingPolicy is created with only that). With NODE: that node only (annotation
${PAUSE_ANNOTATION} on the Node, the reason as its value). While paused, a node that looks
dead is not confirmed or fenced: its incident is Blocked (FencingPaused, NodePaused), and
an operator's fence request waits too. A round already sending its power command finishes.
"fastfence resume [NODE]" ends it. Leaves an Event (FencingPaused, NodeFencingPaused).

Options:
  --reason TEXT           why (in every held incident's message and the Event; required)
${POLICY_HELP}
${kubeTargetHelp(NS_UNUSED)}`;

const RESUME_HELP = `Usage: fastfence resume [NODE] [--reason TEXT] [options]

Ends "fastfence pause": without NODE, the cluster-wide pause (FencingPolicy spec.paused
false, spec.pausedReason removed); with NODE, that node's pause (annotation
${PAUSE_ANNOTATION} removed). Held incidents are taken up again on the stages' next pass.
Leaves an Event (FencingResumed, NodeFencingResumed).

Options:
  --reason TEXT           why (in the Event; optional)
${POLICY_HELP}
${kubeTargetHelp(NS_UNUSED)}`;

export type PauseScope = { kind: "cluster"; policy: string } | { kind: "node"; node: string };

/** What is paused now. `exists`: the FencingPolicy object exists (always true for a node). */
export interface PauseState {
  exists: boolean;
  paused: boolean;
  reason?: string;
}

/** What pause/resume writes: nothing, a merge patch, or (cluster pause only) a new FencingPolicy. */
export interface PausePlan {
  write: "none" | "patch" | "create";
  message: string;
}

/** "fencing <verb> cluster-wide" or "fencing of NODE <verb>". Pure. */
const say = (s: PauseScope, verb: string) =>
  s.kind === "cluster" ? `fencing ${verb} cluster-wide` : `fencing of ${s.node} ${verb}`;

/** The plan for reaching `want` from `cur`. Pure. */
export function planPause(
  scope: PauseScope,
  cur: PauseState,
  want: { paused: boolean; reason?: string },
): PausePlan {
  if (want.paused) {
    const reason = want.reason ?? "";
    if (cur.paused && cur.reason === reason)
      return { write: "none", message: `${say(scope, "was already paused")}: ${reason}; nothing changed` };
    if (cur.paused)
      return {
        write: "patch",
        message: `${say(scope, "was already paused")} (reason was: ${cur.reason || "none"}); its reason is now: ${reason}`,
      };
    if (scope.kind === "cluster" && !cur.exists)
      return {
        write: "create",
        message: `${say(scope, "paused")}: ${reason}. FencingPolicy ${scope.policy} did not exist: created it with only spec.paused and spec.pausedReason (every other setting is its default)`,
      };
    return { write: "patch", message: `${say(scope, "paused")}: ${reason}` };
  }
  if (cur.paused)
    return { write: "patch", message: `${say(scope, "resumed")} (reason was: ${cur.reason || "none"})` };
  if (scope.kind === "cluster" && !cur.exists)
    return {
      write: "none",
      message: `${say(scope, "was not paused")} (no FencingPolicy ${scope.policy}: the defaults apply, which do not pause); nothing changed`,
    };
  return { write: "none", message: `${say(scope, "was not paused")}; nothing changed` };
}

/** The merge patch for the plan. Pure. */
export function pausePatch(scope: PauseScope, want: { paused: boolean; reason?: string }): object {
  if (scope.kind === "node")
    return { metadata: { annotations: { [PAUSE_ANNOTATION]: want.paused ? (want.reason ?? "") : null } } };
  return {
    spec: want.paused
      ? { paused: true, pausedReason: want.reason ?? "" }
      : { paused: false, pausedReason: null },
  };
}

/** What `setPause` did. */
export interface PauseResult {
  scope: "cluster" | "node";
  /** The FencingPolicy (cluster) or the Node (node). */
  target: string;
  /** Paused at the end. */
  paused: boolean;
  changed: boolean;
  /** The FencingPolicy did not exist and was created (cluster pause). */
  createdPolicy: boolean;
  /** The reason given. */
  reason?: string;
  /** The pause reason before (when it was paused). */
  previousReason?: string;
  /** Who asked (the API server's name for the caller). */
  by: string;
  message: string;
  notes: string[];
}

/** A FencingPolicy or Node as read or written (only the fields used here). */
interface WrittenObject {
  metadata?: { uid?: string; resourceVersion?: string };
  spec?: { paused?: unknown; pausedReason?: unknown };
}

const P = { group: FENCING_POLICY_GROUP, version: FENCING_POLICY_VERSION, plural: "fencingpolicies" };
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

async function readPolicy(kube: Kube, name: string): Promise<WrittenObject | undefined> {
  try {
    return (await kube.call(`read fencingpolicy ${name}`, (a) =>
      a.custom.getClusterCustomObject({ ...P, name }),
    )) as WrittenObject;
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 404) return undefined;
    throw err;
  }
}

function policyState(obj: WrittenObject | undefined): PauseState {
  const r = obj?.spec?.pausedReason;
  return {
    exists: obj !== undefined,
    paused: obj?.spec?.paused === true,
    ...(typeof r === "string" ? { reason: r } : {}),
  };
}

/** Target state, the current one read, the plan's write, its Event. Idempotent. */
export async function setPause(
  kube: Kube,
  o: { scope: PauseScope; paused: boolean; reason?: string; command: string; policy?: string },
): Promise<PauseResult> {
  const by = await requesterForEvents(kube, o.command);
  const want = { paused: o.paused, ...(o.reason !== undefined ? { reason: o.reason } : {}) };
  const base = {
    scope: o.scope.kind,
    target: o.scope.kind === "cluster" ? o.scope.policy : o.scope.node,
    paused: o.paused,
    ...(o.reason !== undefined ? { reason: o.reason } : {}),
    by,
  };
  for (let attempt = 1; ; attempt++) {
    const { state, uid } = await readState(kube, o.scope);
    const plan = planPause(o.scope, state, want);
    const done = (changed: boolean, notes: string[] = []): PauseResult => ({
      ...base,
      changed,
      createdPolicy: changed && plan.write === "create",
      ...(state.paused ? { previousReason: state.reason ?? "" } : {}),
      message: plan.message,
      notes,
    });
    if (plan.write === "none") return done(false, await notes(kube, o.scope, o.paused, o.policy));
    let written: WrittenObject;
    try {
      written = await write(kube, o.scope, plan, want);
    } catch (err) {
      // 409: the policy was created meanwhile; 404: it (or the node) went away. Look again.
      const again = err instanceof KubeApiError && (err.status === 409 || err.status === 404);
      if (again && attempt < 3) continue;
      throw err;
    }
    await event(kube, o, by, written.metadata?.uid ?? uid, state);
    return done(true, await notes(kube, o.scope, o.paused, o.policy));
  }
}

async function readState(kube: Kube, scope: PauseScope): Promise<{ state: PauseState; uid?: string }> {
  if (scope.kind === "cluster") {
    const obj = await readPolicy(kube, scope.policy);
    return { state: policyState(obj), ...(obj?.metadata?.uid ? { uid: obj.metadata.uid } : {}) };
  }
  let node;
  try {
    node = await kube.call(`read node ${scope.node}`, (a) => a.core.readNode({ name: scope.node }));
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 404)
      throw new NotFoundError(`no node ${scope.node} in the cluster (kubectl get nodes lists them)`);
    throw err;
  }
  const value = node.metadata?.annotations?.[PAUSE_ANNOTATION];
  return {
    state: { exists: true, paused: value !== undefined, ...(value !== undefined ? { reason: value } : {}) },
    ...(node.metadata?.uid ? { uid: node.metadata.uid } : {}),
  };
}

async function write(
  kube: Kube,
  scope: PauseScope,
  plan: PausePlan,
  want: { paused: boolean; reason?: string },
): Promise<WrittenObject> {
  const body = pausePatch(scope, want);
  if (scope.kind === "node")
    return (await kube.call(`annotate node ${scope.node}`, (a) =>
      a.core.patchNode({ name: scope.node, body }, merge),
    )) as WrittenObject;
  if (plan.write === "create")
    return (await kube.call(`create fencingpolicy ${scope.policy}`, (a) =>
      a.custom.createClusterCustomObject({
        ...P,
        body: {
          apiVersion: `${FENCING_POLICY_GROUP}/${FENCING_POLICY_VERSION}`,
          kind: FENCING_POLICY_KIND,
          metadata: { name: scope.policy },
          ...body,
        },
      }),
    )) as WrittenObject;
  return (await kube.call(`patch fencingpolicy ${scope.policy}`, (a) =>
    a.custom.patchClusterCustomObject({ ...P, name: scope.policy, body }, merge),
  )) as WrittenObject;
}

async function event(
  kube: Kube,
  o: { scope: PauseScope; paused: boolean; reason?: string; command: string },
  by: string,
  uid: string | undefined,
  before: PauseState,
): Promise<void> {
  const R = OPERATOR_EVENT_REASONS;
  const why = o.reason ? `: ${o.reason}` : "";
  const was = !o.paused && before.reason ? ` (paused for: ${before.reason})` : "";
  const text = `${say(o.scope, o.paused ? "paused" : "resumed")} by ${by}${why}${was}`;
  const type = o.paused ? "Warning" : "Normal";
  const uidField = uid ? { uid } : {};
  if (o.scope.kind === "cluster")
    await tryEvent(
      kube,
      o.command,
      {
        apiVersion: `${FENCING_POLICY_GROUP}/${FENCING_POLICY_VERSION}`,
        kind: FENCING_POLICY_KIND,
        name: o.scope.policy,
        ...uidField,
      },
      { type, reason: o.paused ? R.paused : R.resumed, message: text },
    );
  else
    await tryEvent(
      kube,
      o.command,
      { apiVersion: "v1", kind: "Node", name: o.scope.node, ...uidField },
      { type, reason: o.paused ? R.nodePaused : R.nodeResumed, message: text },
    );
}

/** After resuming a node: whether the cluster-wide pause still holds it. Never fails the command. */
async function notes(kube: Kube, scope: PauseScope, paused: boolean, policy = "default"): Promise<string[]> {
  if (scope.kind !== "node" || paused) return [];
  try {
    const cluster = policyState(await readPolicy(kube, policy));
    return cluster.paused
      ? [
          `fencing is still paused cluster-wide (${cluster.reason || "no reason given"}): "fastfence resume" ends that`,
        ]
      : [];
  } catch {
    return [];
  }
}

async function pauseOrResume(argv: string[], paused: boolean): Promise<number> {
  const spec = paused ? PAUSE_ARGS : RESUME_ARGS;
  const command = spec.command;
  const args = parseCommand(spec, argv);
  if (args.help) {
    console.log(
      `${paused ? PAUSE_HELP : RESUME_HELP}\n${outputHelp(spec)}\n  -h, --help              this help`,
    );
    return EXIT.ok;
  }
  const v = args.values;
  const reason = v.reason?.trim();
  if (paused && !reason)
    throw new UsageError(
      command,
      "--reason is required: say why fencing is paused (fastfence pause [NODE] --reason TEXT)",
    );
  if (v.reason !== undefined && !reason) throw new UsageError(command, "--reason needs some text");
  if (reason && reason.length > MAX_REASON)
    throw new UsageError(command, `--reason is ${reason.length} characters long; at most ${MAX_REASON}`);
  const node = args.positionals[0];
  const policy = policyOption(v.policy);
  const scope: PauseScope = node ? { kind: "node", node } : { kind: "cluster", policy };
  const kube = connect(command, v);
  try {
    const r = await setPause(kube, { scope, paused, ...(reason ? { reason } : {}), command, policy });
    for (const n of r.notes) console.error(`fastfence ${command}: note: ${n}`);
    console.log(render(args.output, r, () => r.message));
    return EXIT.ok;
  } catch (err) {
    return failed(node ? `${command} ${node}` : command, err);
  }
}

export const pauseCommand = (argv: string[]): Promise<number> => pauseOrResume(argv, true);
export const resumeCommand = (argv: string[]): Promise<number> => pauseOrResume(argv, false);
