// What the operator actions (`fastfence pause`, `resume`, `fence`, `release-slot`) share:
// the cluster connection (cli/kube-target.ts: --kubeconfig, --context, -n), the
// requester's user name (from the API server, never guessed), the best-effort Event each
// action leaves (a lost Event is a warning on stderr, never a failure of the action), the typed errors they end with and how each is shown and mapped
// to an exit code. An API refusal (RBAC, an admission policy) is shown as the API server's
// own message, which names the policy, never as a stack trace. It changes nothing in the
// cluster itself but Events.
import { hostname } from "node:os";
import type { V1Node } from "@kubernetes/client-node";
import { FastfenceError } from "../core/errors.ts";
import { KubeApiError, type Kube } from "../infra/kube/client.ts";
import { recordEvent, type EventSpec, type EventSubject } from "../infra/kube/events.ts";
import { whoAmI } from "../infra/kube/whoami.ts";
import { EXIT, type ExitCode } from "./exit-codes.ts";
import { connectKube, type KubeTargetFlags } from "./kube-target.ts";

/** The Events' reportingComponent: fastfence.io/cli. */
export const CLI_COMPONENT = "cli";
/** Stable reasons of the Events the operator actions leave. */
export const OPERATOR_EVENT_REASONS = {
  paused: "FencingPaused",
  resumed: "FencingResumed",
  nodePaused: "NodeFencingPaused",
  nodeResumed: "NodeFencingResumed",
  fenceRequested: "OperatorFenceRequested",
  fenceWithdrawn: "OperatorFenceWithdrawn",
  slotReleaseRequested: "SlotReleaseRequested",
} as const;
/** Longest reason kept (FencingPolicy spec.pausedReason, NodeFence operatorRequest.reason). */
export const MAX_REASON = 1024;
/** Said instead of a user name when the API server would not tell it (Events only). */
export const UNKNOWN_USER = "(unknown user)";

/** The help line of --policy, shared by every operator command. */
export const POLICY_HELP =
  "  --policy NAME           the FencingPolicy (default $FASTFENCE_POLICY or default)";

export function policyOption(v: string | undefined): string {
  return v ?? process.env.FASTFENCE_POLICY ?? "default";
}

/** The object the command names does not exist; nothing was written (exit code notFound). */
export class NotFoundError extends FastfenceError {
  constructor(message: string) {
    super("FF_KUBE_NOT_FOUND", message);
  }
}

/** The object's state refuses the action (e.g. the incident ended); nothing was written. */
export class ActionRefusedError extends FastfenceError {
  constructor(message: string) {
    super("FF_INVALID_CONFIG", message);
  }
}

/**
 * A client for the cluster of --kubeconfig / --context (else $KUBECONFIG, ~/.kube/config or
 * in-cluster); a kubeconfig it cannot use is a UsageError (exit 2) that says why.
 */
export function connect(command: string, flags: KubeTargetFlags): Kube {
  return connectKube(command, flags, { requestTimeoutMs: 10_000 });
}

/** The requester's user name for an Event's message; a warning and UNKNOWN_USER when the API will not say. */
export async function requesterForEvents(kube: Kube, command: string): Promise<string> {
  try {
    return (await whoAmI(kube)).username;
  } catch (err) {
    const fe = err instanceof FastfenceError ? err : undefined;
    console.error(`fastfence ${command}: warning: ${fe?.message ?? String(err)}; the Event names no user`);
    return UNKNOWN_USER;
  }
}

/**
 * Records an Event from the CLI; when that fails, says so on stderr and returns false.
 * The action it reports on was made either way.
 */
export async function tryEvent(
  kube: Kube,
  command: string,
  subject: EventSubject,
  e: Omit<EventSpec, "component" | "instance">,
): Promise<boolean> {
  try {
    await recordEvent(kube, subject, { ...e, component: CLI_COMPONENT, instance: hostname() });
    return true;
  } catch (err) {
    const fe = err instanceof FastfenceError ? err : undefined;
    const where = subject.namespace ? ` in ${subject.namespace}` : "";
    console.error(
      `fastfence ${command}: warning: the Event ${e.reason} on ${subject.kind} ${subject.name} was not recorded${where} (${fe?.message ?? String(err)}); the action itself was done`,
    );
    return false;
  }
}

/** Whether the API server refused the request (RBAC 403, an admission policy 403 or 422). */
export function isDenial(err: unknown): err is KubeApiError {
  return err instanceof KubeApiError && (err.status === 403 || err.status === 422);
}

/** The one line an error is shown as (after "fastfence <command>: "). */
export function describeError(err: unknown): string {
  if (isDenial(err))
    return `denied by the API server (HTTP ${err.status}): ${err.message}. Who may do what: RBAC (docs/rbac.md, "People") and the admission policies (knative/base/admission)`;
  if (err instanceof FastfenceError) return `${err.code}: ${err.message}`;
  return `FF_INTERNAL: ${err instanceof Error ? err.message : String(err)}`;
}

/** The exit code an error ends a command with. */
export function exitCodeOf(err: unknown): ExitCode {
  return err instanceof NotFoundError ? EXIT.notFound : EXIT.failed;
}

/** Shows the error on stderr (a stack only with FASTFENCE_DEBUG=1) and returns its exit code. */
export function failed(command: string, err: unknown): ExitCode {
  console.error(`fastfence ${command}: ${describeError(err)}`);
  if (process.env.FASTFENCE_DEBUG === "1") console.error(err);
  return exitCodeOf(err);
}

/** The Node, or NotFoundError (exit 3) when the cluster has none of that name. */
export async function readNode(kube: Kube, name: string): Promise<V1Node> {
  try {
    return await kube.call(`read node ${name}`, (a) => a.core.readNode({ name }));
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 404)
      throw new NotFoundError(`no node ${name} in the cluster (kubectl get nodes lists them)`);
    throw err;
  }
}
