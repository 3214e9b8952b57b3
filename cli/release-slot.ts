// `fastfence release-slot INCIDENT --reason TEXT`: the operator's way to end a final
// FenceFailed incident (every fencing round failed) and free its storm-guard slot. It
// checks the incident is final, records the request as the annotation
// fastfence.io/release-slot (only an identity that is no fastfence stage may set it: the
// NodeFence admission policy), and waits for recover to close the incident (reason
// SlotReleased). It leaves the Event SlotReleaseRequested on the NodeFence (who and why;
// a lost Event is a warning). It never writes status itself and never touches the node,
// its BMC or its workloads: those stay as they are (S1). The cluster: --kubeconfig,
// --context, -n (cli/kube-target.ts).
import { FastfenceError } from "../core/errors.ts";
import {
  isFinalFenceFailed,
  NODE_LABEL,
  NODEFENCE_GROUP,
  NODEFENCE_KIND,
  NODEFENCE_PLURAL,
  NODEFENCE_VERSION,
  RELEASE_SLOT_ANNOTATION,
  statusOf,
  type NodeFence,
} from "../core/incident.ts";
import { KubeApiError, type Kube } from "../infra/kube/client.ts";
import { IncidentStore } from "../infra/kube/incidents.ts";
import { PolicyReader } from "../infra/kube/policy.ts";
import { outputHelp, parseCommand, UsageError } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { fastfenceNamespace } from "./kube-target.ts";
import {
  connect,
  OPERATOR_EVENT_REASONS,
  POLICY_HELP,
  policyOption,
  requesterForEvents,
  tryEvent,
} from "./operator.ts";
import { render } from "./output.ts";
import { kubeTargetHelp, RELEASE_SLOT_ARGS } from "./specs.ts";

export { RELEASE_SLOT_ARGS };

const HELP = `Usage: fastfence release-slot INCIDENT --reason TEXT [options]

Ends a final FenceFailed incident (every fencing round failed) and frees its storm-guard
slot, so other nodes can be fenced again. The node was never read back Off: its workloads
stay where they are. Power it off by hand, or bring it back, before you release them.

Options:
  --reason TEXT           why (kept in the incident's message; required)
${POLICY_HELP}
  --wait SECONDS          how long to wait for recover to close it (default 60; 0: do not wait)
${kubeTargetHelp()}`;

/** What `releaseSlot` did. */
export interface ReleaseSlotResult {
  incident: string;
  node: string;
  /** The incident's phase at the end. */
  phase: string;
  /** Whether recover closed it (SlotReleased) within the wait. */
  released: boolean;
  message: string;
}

/** A request the incident's state refuses (not found, not final): nothing was written. */
export class ReleaseRefusedError extends FastfenceError {
  constructor(message: string) {
    super("FF_INVALID_CONFIG", message);
  }
}

const G = { group: NODEFENCE_GROUP, version: NODEFENCE_VERSION, plural: NODEFENCE_PLURAL };

/**
 * Checks the incident, sets the release annotation (guarded by resourceVersion, re-read on
 * a conflict) and waits up to `waitMs` for recover to close it, calling `progress` on the way.
 */
export async function releaseSlot(
  kube: Kube,
  opts: { incident: string; reason: string; namespace: string; policy: string; waitMs: number },
  progress: (line: string) => void = () => undefined,
): Promise<ReleaseSlotResult> {
  const store = new IncidentStore(kube, opts.namespace);
  const maxRounds = (await new PolicyReader(kube, opts.policy).get(Date.now())).fencing.maxRounds;
  for (let attempt = 1; ; attempt++) {
    const inc = await store.get(opts.incident);
    if (!inc) throw new ReleaseRefusedError(notFound(opts.incident, opts.namespace));
    const st = statusOf(inc);
    if (st.phase === "Closed" && st.reason === "SlotReleased") return result(inc, true, "already released");
    if (!isFinalFenceFailed(st, maxRounds))
      throw new ReleaseRefusedError(
        st.phase === "FenceFailed"
          ? `incident ${opts.incident} is still being retried (round ${st.round} of ${maxRounds}, next not before ${st.retryNotBefore ?? "now"}): release-slot applies to a final FenceFailed incident`
          : `incident ${opts.incident} is ${st.phase}, not a final FenceFailed: release-slot applies only to an incident whose every fencing round failed`,
      );
    const body = {
      ...inc,
      metadata: {
        ...inc.metadata,
        annotations: { ...inc.metadata.annotations, [RELEASE_SLOT_ANNOTATION]: opts.reason },
      },
    };
    try {
      const written = (await kube.call(`annotate nodefence ${opts.incident}`, (a) =>
        a.custom.replaceNamespacedCustomObject({
          ...G,
          namespace: opts.namespace,
          name: opts.incident,
          body,
        }),
      )) as { metadata?: { uid?: string } };
      await requestedEvent(kube, inc, written.metadata?.uid, opts);
      break;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 409 && attempt < 5) continue;
      throw err;
    }
  }
  progress(`requested: ${RELEASE_SLOT_ANNOTATION} set on ${opts.incident}; waiting for recover to close it`);
  const end = Date.now() + opts.waitMs;
  let last: NodeFence | undefined;
  while (Date.now() < end) {
    last = await store.get(opts.incident);
    if (last && statusOf(last).phase === "Closed") return result(last, true, statusOf(last).message ?? "");
    await new Promise((r) => setTimeout(r, 500));
  }
  last ??= await store.get(opts.incident);
  return result(
    last!,
    false,
    opts.waitMs > 0
      ? `not closed within ${opts.waitMs / 1000} s: is recover running? It closes the incident on its next reconcile pass (reconcile.intervalMs)`
      : "requested; recover closes it on its next reconcile pass",
  );
}

/** The Event SlotReleaseRequested on the NodeFence (a lost Event is a warning on stderr). */
async function requestedEvent(
  kube: Kube,
  inc: NodeFence,
  uid: string | undefined,
  opts: { incident: string; reason: string; namespace: string },
): Promise<void> {
  const by = await requesterForEvents(kube, "release-slot");
  await tryEvent(
    kube,
    "release-slot",
    {
      apiVersion: `${NODEFENCE_GROUP}/${NODEFENCE_VERSION}`,
      kind: NODEFENCE_KIND,
      name: opts.incident,
      namespace: opts.namespace,
      ...(uid ? { uid } : {}),
    },
    {
      type: "Normal",
      reason: OPERATOR_EVENT_REASONS.slotReleaseRequested,
      message: `${by} asked to end the final FenceFailed incident ${opts.incident} of ${inc.spec.nodeName} and free its storm-guard slot: ${opts.reason}`,
    },
  );
}

function result(inc: NodeFence, released: boolean, message: string): ReleaseSlotResult {
  return {
    incident: inc.metadata.name,
    node: inc.spec.nodeName,
    phase: statusOf(inc).phase,
    released,
    message,
  };
}

function notFound(name: string, ns: string): string {
  return `no NodeFence ${name} in namespace ${ns} (a node's incidents: kubectl -n ${ns} get nodefences -l ${NODE_LABEL}=NODE)`;
}

export async function releaseSlotCommand(argv: string[]): Promise<number> {
  const args = parseCommand(RELEASE_SLOT_ARGS, argv);
  if (args.help) {
    console.log(`${HELP}\n${outputHelp(RELEASE_SLOT_ARGS)}\n  -h, --help              this help`);
    return EXIT.ok;
  }
  const v = args.values;
  const incident = args.positionals[0];
  if (!incident)
    throw new UsageError("release-slot", "which incident? fastfence release-slot INCIDENT --reason TEXT");
  if (!v.reason?.trim())
    throw new UsageError("release-slot", "--reason is required: say why the slot is released");
  const waitS = Number(v.wait ?? 60);
  if (!Number.isFinite(waitS) || waitS < 0)
    throw new UsageError("release-slot", `--wait takes seconds (0 or more), not "${v.wait}"`);
  const namespace = fastfenceNamespace("release-slot", v.namespace);
  const kube = connect("release-slot", v);
  const text = args.output === "text";
  try {
    const r = await releaseSlot(
      kube,
      {
        incident,
        reason: v.reason.trim(),
        namespace,
        policy: policyOption(v.policy),
        waitMs: waitS * 1000,
      },
      (line) => text && console.error(line),
    );
    console.log(
      render(args.output, r, () =>
        r.released
          ? `${r.incident} (${r.node}): slot released, phase ${r.phase}: ${r.message}`
          : `${r.incident} (${r.node}): ${r.message}`,
      ),
    );
    return r.released || waitS === 0 ? EXIT.ok : EXIT.failed;
  } catch (err) {
    const fe = err instanceof FastfenceError ? err : undefined;
    console.error(
      `fastfence release-slot ${incident}: ${fe?.code ?? "FF_INTERNAL"}: ${fe?.message ?? String(err)}`,
    );
    return EXIT.failed;
  }
}
