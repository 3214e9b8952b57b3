// Reads the other remediators fastfence lives beside: NodeHealthChecks
// (remediation.medik8s.io/v1alpha1, cluster-scoped), MachineHealthChecks
// (machine.openshift.io/v1beta1) and, in the namespaces that hold an MHC, the Machines
// whose status.nodeRef links them to a Node. Returns them in core/remediators.ts's shapes
// (the raw objects stay here). A kind whose CRD is not installed (API discovery or the
// list answers 404: a vanilla cluster has neither) means none of that kind; any other
// error is thrown as the client's typed error (KubeApiError 403 when the CRD is installed
// but RBAC is missing, FF_KUBE_UNAVAILABLE), never read as "no remediator". Cached for a
// short TTL, like policy.ts, since the confirm stage asks per decision; concurrent reads
// share one request.
// Read-only: it never writes, and it never decides what fastfence does about a conflict.
import {
  remediatorConflicts,
  remediatorSelections,
  type Conflict,
  type LabelSelector,
  type MachineHealthCheckConfig,
  type MachineRef,
  type MachinesByNode,
  type NodeHealthCheckConfig,
  type NodeLabels,
  type RemediatorConfig,
  type RemediatorSelection,
  type SelectorRequirement,
  type TemplateRef,
  MHC_PAUSED_ANNOTATION,
  MHC_STRATEGY_ANNOTATION,
  MHC_STRATEGY_EXTERNAL_BAREMETAL,
} from "../../core/remediators.ts";
import { KubeApiError, type Kube, type KubeApis } from "./client.ts";

type Api = { group: string; version: string; plural: string };
export const NHC_API: Api = {
  group: "remediation.medik8s.io",
  version: "v1alpha1",
  plural: "nodehealthchecks",
};
export const MHC_API: Api = {
  group: "machine.openshift.io",
  version: "v1beta1",
  plural: "machinehealthchecks",
};
export const MACHINE_API: Api = { group: "machine.openshift.io", version: "v1beta1", plural: "machines" };
/**
 * Where the machine API's MHC controller works: OpenShift runs it with
 * --namespace=openshift-machine-api, so an MHC elsewhere remediates nothing.
 */
export const DEFAULT_MACHINE_API_NAMESPACES: readonly string[] = ["openshift-machine-api"];

export interface RemediatorReaderOptions {
  /**
   * How long a read is reused, ms. Default 5000: a new or edited NHC/MHC is seen within
   * this time; longer saves API reads during an incident.
   */
  ttlMs?: number;
  /** Namespaces whose MachineHealthChecks (and Machines) are read. Default: openshift-machine-api. */
  machineApiNamespaces?: readonly string[];
  /** Items per list request (the rest comes in further pages). Default 500. */
  pageSize?: number;
}

/** What one read found. */
export interface RemediatorSnapshot {
  remediators: readonly RemediatorConfig[];
  machinesByNode: MachinesByNode;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const strMap = (v: unknown): Record<string, string> =>
  isObj(v)
    ? Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string"))
    : {};
const metadata = (o: unknown): Obj => (isObj(o) && isObj(o.metadata) ? o.metadata : {});
const spec = (o: unknown): Obj => (isObj(o) && isObj(o.spec) ? o.spec : {});

function selectorFrom(v: unknown): LabelSelector | undefined {
  if (!isObj(v)) return undefined;
  const exprs: SelectorRequirement[] = (Array.isArray(v.matchExpressions) ? v.matchExpressions : [])
    .filter(isObj)
    .map((e) => ({
      key: typeof e.key === "string" ? e.key : "",
      operator: typeof e.operator === "string" ? e.operator : "",
      values: Array.isArray(e.values) ? e.values.filter((x): x is string => typeof x === "string") : [],
    }));
  return { matchLabels: strMap(v.matchLabels), matchExpressions: exprs };
}

function templateFrom(v: unknown): TemplateRef | undefined {
  if (!isObj(v)) return undefined;
  const namespace = str(v.namespace);
  return {
    apiVersion: typeof v.apiVersion === "string" ? v.apiVersion : "",
    kind: str(v.kind) ?? "(no kind)",
    name: str(v.name) ?? "(no name)",
    ...(namespace ? { namespace } : {}),
  };
}

/** A NodeHealthCheck object as fastfence reads it; undefined without a name. Pure. */
export function nodeHealthCheckFrom(o: unknown): NodeHealthCheckConfig | undefined {
  const name = str(metadata(o).name);
  if (!name) return undefined;
  const s = spec(o);
  const single = templateFrom(s.remediationTemplate);
  const escalating = (Array.isArray(s.escalatingRemediations) ? s.escalatingRemediations : [])
    .filter(isObj)
    .map((e) => ({
      order: typeof e.order === "number" ? e.order : 0,
      t: templateFrom(e.remediationTemplate),
    }))
    .sort((a, b) => a.order - b.order)
    .flatMap((e) => (e.t ? [e.t] : []));
  const status = isObj(o) && isObj(o.status) ? o.status : {};
  const disabled = (Array.isArray(status.conditions) ? status.conditions : []).some(
    (c) => isObj(c) && c.type === "Disabled" && c.status === "True",
  );
  return {
    kind: "NodeHealthCheck",
    name,
    selector: selectorFrom(s.selector),
    templates: single ? [single, ...escalating] : escalating,
    paused: Array.isArray(s.pauseRequests) && s.pauseRequests.length > 0,
    disabled,
  };
}

/** A MachineHealthCheck object as fastfence reads it; undefined without a name or namespace. Pure. */
export function machineHealthCheckFrom(o: unknown): MachineHealthCheckConfig | undefined {
  const m = metadata(o);
  const name = str(m.name);
  const namespace = str(m.namespace);
  if (!name || !namespace) return undefined;
  const s = spec(o);
  const annotations = strMap(m.annotations);
  const template = templateFrom(s.remediationTemplate);
  return {
    kind: "MachineHealthCheck",
    namespace,
    name,
    selector: selectorFrom(s.selector),
    ...(template ? { template } : {}),
    externalBaremetal: annotations[MHC_STRATEGY_ANNOTATION] === MHC_STRATEGY_EXTERNAL_BAREMETAL,
    paused: Object.hasOwn(annotations, MHC_PAUSED_ANNOTATION),
  };
}

/** A Machine and the node its status.nodeRef names; undefined without both. Pure. */
export function machineFrom(o: unknown): { node: string; machine: MachineRef } | undefined {
  const m = metadata(o);
  const name = str(m.name);
  const namespace = str(m.namespace);
  const status = isObj(o) && isObj(o.status) ? o.status : {};
  const node = isObj(status.nodeRef) ? str(status.nodeRef.name) : undefined;
  if (!name || !namespace || !node) return undefined;
  return { node, machine: { namespace, name, labels: strMap(m.labels) } };
}

/** Groups Machines by node. Pure. */
export function machinesByNodeFrom(objects: readonly unknown[]): MachinesByNode {
  const out: Record<string, MachineRef[]> = {};
  for (const o of objects) {
    const m = machineFrom(o);
    if (m) (Object.hasOwn(out, m.node) ? out[m.node]! : (out[m.node] = [])).push(m.machine);
  }
  return out;
}

type ListPage = { items?: unknown[]; metadata?: { continue?: string } };

export class RemediatorReader {
  private readonly kube: Kube;
  private readonly ttlMs: number;
  private readonly namespaces: readonly string[];
  private readonly pageSize: number;
  private cached: { at: number; snapshot: RemediatorSnapshot } | undefined;
  private inflight: Promise<RemediatorSnapshot> | undefined;

  constructor(kube: Kube, opts: RemediatorReaderOptions = {}) {
    this.kube = kube;
    this.ttlMs = opts.ttlMs ?? 5000;
    this.namespaces = [...(opts.machineApiNamespaces ?? DEFAULT_MACHINE_API_NAMESPACES)];
    this.pageSize = opts.pageSize ?? 500;
  }

  /** The remediators and Machines, from the cache when younger than the TTL (`refresh`: read anyway). */
  async snapshot(now: number, refresh = false): Promise<RemediatorSnapshot> {
    if (!refresh && this.cached && now - this.cached.at < this.ttlMs) return this.cached.snapshot;
    this.inflight ??= this.read().finally(() => (this.inflight = undefined));
    const snapshot = await this.inflight;
    this.cached = { at: now, snapshot };
    return snapshot;
  }

  /** The other remediators that select `node` (core/remediators.ts remediatorConflicts). */
  async conflictsFor(node: NodeLabels, now: number): Promise<Conflict[]> {
    const s = await this.snapshot(now);
    return remediatorConflicts(node, s.remediators, s.machinesByNode);
  }

  /** Each other remediator with the nodes of `nodes` it selects (for the policy condition). */
  async selections(nodes: readonly NodeLabels[], now: number): Promise<RemediatorSelection[]> {
    const s = await this.snapshot(now);
    return remediatorSelections(nodes, s.remediators, s.machinesByNode);
  }

  private async read(): Promise<RemediatorSnapshot> {
    const nhcs = (await this.served(NHC_API)) ? ((await this.listOrNone(NHC_API, undefined)) ?? []) : [];
    const mhcs: MachineHealthCheckConfig[] = [];
    const machines: unknown[] = [];
    if (await this.served(MHC_API))
      for (const ns of this.namespaces) {
        const found = await this.listOrNone(MHC_API, ns);
        if (found === undefined) break; // uninstalled since the discovery call
        const here = found.map(machineHealthCheckFrom).filter((m) => m !== undefined);
        if (!here.length) continue;
        mhcs.push(...here);
        machines.push(...((await this.listOrNone(MACHINE_API, ns)) ?? []));
      }
    return {
      remediators: [...nhcs.map(nodeHealthCheckFrom).filter((n) => n !== undefined), ...mhcs],
      machinesByNode: machinesByNodeFrom(machines),
    };
  }

  /**
   * Whether the API server serves the resource (discovery, which every authenticated
   * identity may read). Asked before the list, because RBAC answers a list of a resource
   * the identity has no grant for with 403 whether or not its CRD is installed: without
   * this, a cluster without the machine API and without the openshift overlay's Role would
   * look like an RBAC error instead of "no MachineHealthCheck".
   */
  private async served(api: Api): Promise<boolean> {
    try {
      const list = await this.kube.call(`discover ${api.group}/${api.version}`, (a) =>
        a.custom.getAPIResources({ group: api.group, version: api.version }),
      );
      return (list.resources ?? []).some((r) => r.name === api.plural);
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return false;
      throw err;
    }
  }

  /** Every item of a list (all pages), or undefined when the API is not installed (404). */
  private async listOrNone(api: Api, namespace: string | undefined): Promise<unknown[] | undefined> {
    const items: unknown[] = [];
    let cont: string | undefined;
    do {
      const call = (a: KubeApis) => {
        const page = { ...api, limit: this.pageSize, ...(cont ? { _continue: cont } : {}) };
        return namespace === undefined
          ? a.custom.listClusterCustomObject(page)
          : a.custom.listNamespacedCustomObject({ ...page, namespace });
      };
      let page: ListPage;
      try {
        page = (await this.kube.call(
          `list ${api.plural}.${api.group}${namespace ? ` in ${namespace}` : ""}`,
          call,
        )) as ListPage;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404 && cont === undefined) return undefined;
        throw err;
      }
      items.push(...(page.items ?? []));
      cont = page.metadata?.continue || undefined;
    } while (cont);
    return items;
  }
}
