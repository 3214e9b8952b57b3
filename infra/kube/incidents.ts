// NodeFence incidents in the Kubernetes API: read by name, find a node's open incident,
// list open incidents, create, write status guarded by resourceVersion, and delete a Closed
// one a new failure supersedes (guarded the same way). A 409 is
// returned as KubeApiError(FF_KUBE_CONFLICT) for the caller to re-read and re-decide;
// this module never retries a conflicting write itself and never edits status fields
// it was not given, except status.conditions, which it derives from the status it writes
// (core/incident-conditions.ts).
import {
  isTerminal,
  NODE_LABEL,
  NODEFENCE_GROUP,
  NODEFENCE_KIND,
  NODEFENCE_PLURAL,
  NODEFENCE_VERSION,
  type NodeFence,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import { incidentConditions } from "../../core/incident-conditions.ts";
import { KubeApiError, type Kube } from "./client.ts";

const G = { group: NODEFENCE_GROUP, version: NODEFENCE_VERSION, plural: NODEFENCE_PLURAL };

export class IncidentStore {
  private readonly kube: Kube;
  readonly namespace: string;
  constructor(kube: Kube, namespace: string) {
    this.kube = kube;
    this.namespace = namespace;
  }

  async get(name: string): Promise<NodeFence | undefined> {
    try {
      return (await this.kube.read(`read nodefence ${name}`, (a) =>
        a.custom.getNamespacedCustomObject({ ...G, namespace: this.namespace, name }),
      )) as NodeFence;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  async list(labelSelector?: string): Promise<NodeFence[]> {
    const l = (await this.kube.read("list nodefences", (a) =>
      a.custom.listNamespacedCustomObject({
        ...G,
        namespace: this.namespace,
        ...(labelSelector ? { labelSelector } : {}),
      }),
    )) as { items?: NodeFence[] };
    return l.items ?? [];
  }

  async listOpen(): Promise<NodeFence[]> {
    return (await this.list()).filter((i) => !isTerminal(i.status?.phase ?? "Suspected"));
  }

  /** The node's newest incident that is not in a terminal phase. */
  async openForNode(node: string, exceptBootId?: string): Promise<NodeFence | undefined> {
    const open = (await this.list(`${NODE_LABEL}=${node}`)).filter(
      (i) => !isTerminal(i.status?.phase ?? "Suspected") && i.spec.bootId !== exceptBootId,
    );
    open.sort((a, b) =>
      (b.metadata.creationTimestamp ?? "").localeCompare(a.metadata.creationTimestamp ?? ""),
    );
    return open[0];
  }

  /** Creates the incident, then writes its status (the status subresource ignores status on create). */
  async create(incident: NodeFence): Promise<NodeFence> {
    const { status, ...rest } = incident;
    const created = (await this.kube.write(`create nodefence ${incident.metadata.name}`, (a) =>
      a.custom.createNamespacedCustomObject({
        ...G,
        namespace: this.namespace,
        body: { ...rest, metadata: { ...rest.metadata, namespace: this.namespace } },
      }),
    )) as NodeFence;
    if (!status) return created;
    return this.writeStatus(incident.metadata.name, created.metadata.resourceVersion ?? "", status);
  }

  /**
   * Deletes the incident if it is still at `resourceVersion` (else 409); one already gone
   * counts as deleted. Only for a Closed incident a new failure supersedes (its history stays
   * in the event log and in its Kubernetes Events).
   */
  async removeClosed(name: string, resourceVersion: string): Promise<void> {
    try {
      await this.kube.write(`delete nodefence ${name}`, (a) =>
        a.custom.deleteNamespacedCustomObject({
          ...G,
          namespace: this.namespace,
          name,
          body: { preconditions: { resourceVersion } },
        }),
      );
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return;
      throw err;
    }
  }

  /**
   * Replaces the status if the object is still at `resourceVersion` (else 409), in one round
   * trip: the status subresource keeps everything but the status from the stored object, so
   * the body carries only the identity, the precondition and the new status.
   */
  async writeStatus(name: string, resourceVersion: string, status: NodeFenceStatus): Promise<NodeFence> {
    const conditions = incidentConditions(status, new Date().toISOString(), status.conditions);
    const body = {
      apiVersion: `${NODEFENCE_GROUP}/${NODEFENCE_VERSION}`,
      kind: NODEFENCE_KIND,
      metadata: { name, namespace: this.namespace, resourceVersion },
      status: { ...status, conditions },
    };
    return (await this.kube.write(`write status of nodefence ${name}`, (a) =>
      a.custom.replaceNamespacedCustomObjectStatus({ ...G, namespace: this.namespace, name, body }),
    )) as NodeFence;
  }
}
