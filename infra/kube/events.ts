// Records one Kubernetes Event (core/v1) about one object, the way every fastfence writer
// does: in the object's namespace, or in `default` for a cluster-scoped object (Node,
// FencingPolicy: where the API server files such Events and `kubectl describe` finds
// them), from fastfence.io/<component>, with the reason and message clipped to what the
// API accepts. It only creates Events: it never reads, updates or deletes one, never
// retries, and throws the client's typed error (KubeApiError, FastfenceError) for the
// caller to decide whether a lost Event matters. Never put secrets in a message.
import type { Kube } from "./client.ts";

/** Where Events about a cluster-scoped object go. */
export const CLUSTER_EVENT_NAMESPACE = "default";

/** The object an Event is about. `namespace` absent: a cluster-scoped object. */
export interface EventSubject {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

export interface EventSpec {
  type: "Normal" | "Warning";
  /** A stable UpperCamelCase code (e.g. FencingPaused); at most 128 characters. */
  reason: string;
  /** For people: who and why. Clipped to 1024 characters. */
  message: string;
  /** Who records it: reportingComponent fastfence.io/<component>, source fastfence-<component>. */
  component: string;
  /** Which replica or host. Clipped to 128 characters. */
  instance: string;
  /** Epoch ms; default now. */
  nowMs?: number;
}

export function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/** The namespace an Event about `subject` belongs in. Pure. */
export function eventNamespace(subject: EventSubject): string {
  return subject.namespace || CLUSTER_EVENT_NAMESPACE;
}

/** The Event object for `subject`. Pure. */
export function eventBody(subject: EventSubject, e: EventSpec) {
  const namespace = eventNamespace(subject);
  const at = new Date(e.nowMs ?? Date.now());
  return {
    metadata: { generateName: `${subject.name}.`, namespace },
    involvedObject: {
      apiVersion: subject.apiVersion,
      kind: subject.kind,
      name: subject.name,
      ...(subject.namespace ? { namespace: subject.namespace } : {}),
      ...(subject.uid ? { uid: subject.uid } : {}),
      ...(subject.resourceVersion ? { resourceVersion: subject.resourceVersion } : {}),
    },
    type: e.type,
    reason: clip(e.reason, 128),
    message: clip(e.message, 1024),
    source: { component: `fastfence-${e.component}` },
    reportingComponent: `fastfence.io/${e.component}`,
    reportingInstance: clip(e.instance, 128),
    firstTimestamp: at,
    lastTimestamp: at,
    count: 1,
  };
}

/** Creates the Event. Throws the client's typed error when the API refuses or does not answer. */
export async function recordEvent(kube: Kube, subject: EventSubject, e: EventSpec): Promise<void> {
  const namespace = eventNamespace(subject);
  await kube.call(`record event ${e.reason} on ${subject.kind.toLowerCase()} ${subject.name}`, (a) =>
    a.core.createNamespacedEvent({ namespace, body: eventBody(subject, e) }),
  );
}
