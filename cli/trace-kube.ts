// The Kubernetes side of `fastfence trace`: the Events fastfence recorded about a node, its
// incidents and the FencingPolicy (phase changes, holds, `fastfence fence`, `pause`,
// `resume`, `release-slot`), as extra timeline rows beside the event log. Only Events
// whose reporting component is fastfence's (fastfence.io/*) and that are not older than
// --since, through the client the caller built for --kubeconfig / --context. Reads only;
// a cluster it cannot reach is reported by the caller, never fatal.
import type { CoreV1Event } from "@kubernetes/client-node";
import { CLUSTER_EVENT_NAMESPACE } from "../infra/kube/events.ts";
import type { Kube } from "../infra/kube/client.ts";
import type { ExtraRow } from "../events/trace-format.ts";

export interface KubeEventQuery {
  /** Node names and incident names the trace is about. */
  names: readonly string[];
  /** Where NodeFences (and their Events) live. */
  namespace: string;
  sinceMs?: number;
}

const FASTFENCE = "fastfence.io/";

function eventTime(e: CoreV1Event): string | undefined {
  const t = e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata?.creationTimestamp;
  return t === undefined ? undefined : new Date(t as unknown as string).toISOString();
}

/** fastfence's Events about `q.names` (and the FencingPolicy), as timeline rows. */
export async function kubeEventRows(kube: Kube, q: KubeEventQuery): Promise<ExtraRow[]> {
  const lists = await Promise.all(
    [...new Set([q.namespace, CLUSTER_EVENT_NAMESPACE])].map((namespace) =>
      kube.call(`list events in ${namespace}`, (a) => a.core.listNamespacedEvent({ namespace })),
    ),
  );
  const wanted = new Set(q.names);
  const rows: ExtraRow[] = [];
  for (const e of lists.flatMap((l) => l.items)) {
    const io = e.involvedObject;
    if (!(e.reportingComponent ?? "").startsWith(FASTFENCE)) continue;
    if (!wanted.has(io.name ?? "") && io.kind !== "FencingPolicy") continue;
    const time = eventTime(e);
    if (!time || (q.sinceMs !== undefined && Date.parse(time) < q.sinceMs)) continue;
    rows.push({
      time,
      type: `k8s-event/${e.reason ?? "?"}`,
      source: `${(e.reportingComponent ?? "").slice(FASTFENCE.length)}/${e.reportingInstance ?? ""} on ${io.kind}/${io.name}`,
      summary: e.message ?? "",
    });
  }
  return rows;
}
