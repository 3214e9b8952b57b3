// Which other remediators select a node: medik8s NodeHealthChecks (cluster-scoped, select
// Nodes by label) and OpenShift MachineHealthChecks (namespaced, select Machines by label;
// a Machine names its Node in status.nodeRef). Two remediators on one node can undo each
// other (one reprovisions or reboots a node whose workloads the other has released), so
// fastfence refuses a node that one of them selects with a remediation other than
// fastfence's own (docs/operations.md, "Living beside other remediators").
// Self Node Remediation and Fence Agents Remediation have no object that selects nodes:
// they act on remediation CRs that an NHC or MHC creates from their templates, so they
// are seen here as the template an NHC or MHC names.
// Pure: plain data in, plain data out. It never reads the API, the clock or the
// environment, and never decides what fastfence does about a conflict (the stages do).

/** The reason code fastfence records on an incident it refuses because of a conflict. */
export const OTHER_REMEDIATOR_REASON = "OtherRemediator";
/** The API group of fastfence's own objects: a remediation template in it is fastfence's. */
export const FASTFENCE_API_GROUP = "fastfence.io";
/** MHC annotation (machine API): no remediation while present; it can be removed any time. */
export const MHC_PAUSED_ANNOTATION = "cluster.x-k8s.io/paused";
/** MHC annotation selecting the metal3 reboot path instead of machine deletion. */
export const MHC_STRATEGY_ANNOTATION = "machine.openshift.io/remediation-strategy";
export const MHC_STRATEGY_EXTERNAL_BAREMETAL = "external-baremetal";

export type RemediatorKind = "NodeHealthCheck" | "MachineHealthCheck";
export type LabelMap = Readonly<Record<string, string>>;

/** metav1.LabelSelectorRequirement as stored (operator unchecked: the CRDs accept any string). */
export interface SelectorRequirement {
  key: string;
  operator: string;
  values?: readonly string[];
}

/** metav1.LabelSelector. Undefined or empty selects everything (see selectorMatches). */
export interface LabelSelector {
  matchLabels?: LabelMap;
  matchExpressions?: readonly SelectorRequirement[];
}

/** A corev1.ObjectReference to a remediation template (only the fields used). */
export interface TemplateRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

export interface NodeHealthCheckConfig {
  kind: "NodeHealthCheck";
  name: string;
  selector: LabelSelector | undefined;
  /** spec.remediationTemplate, or spec.escalatingRemediations' templates in their order. */
  templates: readonly TemplateRef[];
  /** spec.pauseRequests is not empty: no new remediation starts until it is emptied. */
  paused: boolean;
  /** status condition Disabled=True (e.g. its template is missing): it re-enables by itself. */
  disabled: boolean;
}

export interface MachineHealthCheckConfig {
  kind: "MachineHealthCheck";
  namespace: string;
  name: string;
  selector: LabelSelector | undefined;
  /** spec.remediationTemplate (external remediation); without it the MHC deletes the Machine. */
  template?: TemplateRef;
  /** The external-baremetal strategy annotation (metal3 reboot), used when there is no template. */
  externalBaremetal: boolean;
  /** The cluster.x-k8s.io/paused annotation. */
  paused: boolean;
}

export type RemediatorConfig = NodeHealthCheckConfig | MachineHealthCheckConfig;

/** A Machine as read: its labels are what an MHC selects. */
export interface MachineRef {
  namespace: string;
  name: string;
  labels: LabelMap;
}

/** Machines by the node their status.nodeRef names. */
export type MachinesByNode = Readonly<Record<string, readonly MachineRef[]>>;

export interface NodeLabels {
  name: string;
  labels: LabelMap;
}

/** "active", or why the remediator is idle now (it may resume at any moment: still a conflict). */
export type RemediatorState = "active" | "paused" | "disabled";

/** One other remediator that selects a node. */
export interface Conflict {
  kind: RemediatorKind;
  name: string;
  /** MachineHealthCheck only (NodeHealthChecks are cluster-scoped). */
  namespace?: string;
  /** What it would do, e.g. "SelfNodeRemediationTemplate/self-node-remediation-automatic-strategy-template". */
  remediation: string;
  state: RemediatorState;
  /** MachineHealthCheck only: the Machine ("namespace/name") through which it selects the node. */
  machine?: string;
}

/** One other remediator and every node it selects (for the FencingPolicy condition). */
export interface RemediatorSelection extends Omit<Conflict, "machine"> {
  nodes: readonly string[];
}

const has = (labels: LabelMap, key: string) => Object.hasOwn(labels, key);

/**
 * Why Kubernetes (metav1.LabelSelectorAsSelector) refuses the selector, or undefined when
 * it is valid. NHC and MHC act on no object through a selector it refuses.
 */
export function selectorProblem(sel: LabelSelector | undefined): string | undefined {
  for (const r of sel?.matchExpressions ?? []) {
    const n = r.values?.length ?? 0;
    switch (r.operator) {
      case "In":
      case "NotIn":
        if (n === 0) return `${r.key} ${r.operator}: values must not be empty`;
        break;
      case "Exists":
      case "DoesNotExist":
        if (n > 0) return `${r.key} ${r.operator}: values must be empty`;
        break;
      default:
        return `${r.key}: "${r.operator}" is not a label selector operator`;
    }
  }
  return undefined;
}

/**
 * Kubernetes label selector semantics: every matchLabels pair and every expression must
 * hold (In: the label is set to one of the values; NotIn: it is unset or set to none of
 * them; Exists / DoesNotExist). An undefined or empty selector matches everything, as
 * both remediators read it: NHC's `selector` is a value (an empty one matches all nodes:
 * its webhook refuses new empty selectors, older objects keep working), and the machine
 * API's MHC controller says "if the selector is empty, all machines are considered to
 * match" (of the MHC's namespace). A selector Kubernetes refuses matches nothing.
 */
export function selectorMatches(sel: LabelSelector | undefined, labels: LabelMap): boolean {
  if (selectorProblem(sel) !== undefined) return false;
  for (const [k, v] of Object.entries(sel?.matchLabels ?? {}))
    if (!has(labels, k) || labels[k] !== v) return false;
  for (const r of sel?.matchExpressions ?? []) {
    const set = has(labels, r.key);
    const inValues = set && (r.values ?? []).includes(labels[r.key]!);
    const ok =
      r.operator === "In"
        ? inValues
        : r.operator === "NotIn"
          ? !inValues
          : r.operator === "Exists"
            ? set
            : !set;
    if (!ok) return false;
  }
  return true;
}

/** The API group of an apiVersion ("fastfence.io/v1alpha1" → "fastfence.io", "v1" → ""). */
export function apiGroup(apiVersion: string): string {
  const i = apiVersion.indexOf("/");
  return i < 0 ? "" : apiVersion.slice(0, i);
}

/** Whether a remediation template is fastfence's own (its group is exactly fastfence.io). */
export function isFastfenceTemplate(t: TemplateRef): boolean {
  return apiGroup(t.apiVersion) === FASTFENCE_API_GROUP;
}

const templateName = (t: TemplateRef) => `${t.kind}/${t.name}`;

/**
 * What the remediator would do to a node it selects, or undefined when that is only
 * fastfence's (or nothing: an NHC without a template, which its webhook refuses, creates
 * no remediation). An NHC that escalates from fastfence to another remediator conflicts:
 * the other one acts once fastfence's timeout passes.
 */
export function otherRemediation(r: RemediatorConfig): string | undefined {
  if (r.kind === "NodeHealthCheck") {
    const others = r.templates.filter((t) => !isFastfenceTemplate(t)).map(templateName);
    return others.length ? others.join(" then ") : undefined;
  }
  if (r.template) return isFastfenceTemplate(r.template) ? undefined : templateName(r.template);
  return r.externalBaremetal ? "external-baremetal (metal3 reboot)" : "machine deletion";
}

export function remediatorState(r: RemediatorConfig): RemediatorState {
  if (r.kind === "NodeHealthCheck" && r.disabled) return "disabled";
  return r.paused ? "paused" : "active";
}

function compareConflicts(a: Omit<Conflict, "machine">, b: Omit<Conflict, "machine">): number {
  const ka = `${a.kind}/${a.namespace ?? ""}/${a.name}`;
  const kb = `${b.kind}/${b.namespace ?? ""}/${b.name}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/**
 * The other remediators that select `node`, sorted by kind, namespace and name. An NHC
 * selects the node by its labels; an MHC selects it when one of its Machines (same
 * namespace as the MHC, labels matching its selector) names the node. Without
 * `machinesByNode` no MHC can select anything. Paused or disabled remediators are still
 * conflicts: either can resume without fastfence noticing in time.
 */
export function remediatorConflicts(
  node: NodeLabels,
  remediators: readonly RemediatorConfig[],
  machinesByNode: MachinesByNode = {},
): Conflict[] {
  const out: Conflict[] = [];
  const machines = Object.hasOwn(machinesByNode, node.name) ? machinesByNode[node.name]! : [];
  for (const r of remediators) {
    const remediation = otherRemediation(r);
    if (remediation === undefined) continue;
    const state = remediatorState(r);
    if (r.kind === "NodeHealthCheck") {
      if (selectorMatches(r.selector, node.labels))
        out.push({ kind: r.kind, name: r.name, remediation, state });
      continue;
    }
    const m = machines.find((m) => m.namespace === r.namespace && selectorMatches(r.selector, m.labels));
    if (m)
      out.push({
        kind: r.kind,
        name: r.name,
        namespace: r.namespace,
        remediation,
        state,
        machine: `${m.namespace}/${m.name}`,
      });
  }
  return out.sort(compareConflicts);
}

/** Each other remediator with the nodes (of `nodes`) it selects; those selecting none are left out. */
export function remediatorSelections(
  nodes: readonly NodeLabels[],
  remediators: readonly RemediatorConfig[],
  machinesByNode: MachinesByNode = {},
): RemediatorSelection[] {
  const byRemediator = new Map<string, { sel: Omit<Conflict, "machine">; nodes: string[] }>();
  for (const node of nodes)
    for (const { kind, name, namespace, remediation, state } of remediatorConflicts(
      node,
      remediators,
      machinesByNode,
    )) {
      const c = { kind, name, ...(namespace ? { namespace } : {}), remediation, state };
      const key = `${c.kind}/${c.namespace ?? ""}/${c.name}`;
      const entry = byRemediator.get(key) ?? { sel: c, nodes: [] };
      entry.nodes.push(node.name);
      byRemediator.set(key, entry);
    }
  return [...byRemediator.values()]
    .map(({ sel, nodes }) => ({ ...sel, nodes: [...nodes].sort() }))
    .sort(compareConflicts);
}

/** "NodeHealthCheck/nhc-workers" or "MachineHealthCheck/openshift-machine-api/workers". */
export function remediatorRef(c: Pick<Conflict, "kind" | "name" | "namespace">): string {
  return c.namespace ? `${c.kind}/${c.namespace}/${c.name}` : `${c.kind}/${c.name}`;
}

/** "NodeHealthCheck/nhc-workers (remediation SelfNodeRemediationTemplate/snr; paused)". */
export function describeConflict(c: Omit<Conflict, "machine"> & { machine?: string }): string {
  const notes = [`remediation ${c.remediation}`];
  if (c.machine) notes.push(`via Machine ${c.machine}`);
  if (c.state !== "active") notes.push(c.state);
  return `${remediatorRef(c)} (${notes.join("; ")})`;
}

/**
 * One line naming every conflict of a node, e.g. "NodeHealthCheck/nhc-workers (remediation
 * SelfNodeRemediationTemplate/snr) selects node-b". Empty when there is none.
 */
export function conflictMessage(node: string, conflicts: readonly Conflict[]): string {
  if (!conflicts.length) return "";
  const verb = conflicts.length === 1 ? "selects" : "select";
  return `${conflicts.map(describeConflict).join(" and ")} ${verb} ${node}`;
}

function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/**
 * One message naming each other remediator and the nodes it selects (at most `maxNodes`
 * names each, then a count), bounded to `maxLength` characters. Empty when there is none.
 */
export function selectionsMessage(
  selections: readonly RemediatorSelection[],
  opts: { maxNodes?: number; maxLength?: number } = {},
): string {
  if (!selections.length) return "";
  const maxNodes = opts.maxNodes ?? 5;
  const parts = selections.map((s) => {
    const shown = s.nodes.slice(0, maxNodes).join(", ");
    const more = s.nodes.length > maxNodes ? ` and ${s.nodes.length - maxNodes} more` : "";
    return `${describeConflict(s)} ${s.nodes.length === 1 ? "selects" : "selects nodes"} ${shown}${more}`;
  });
  const text = `${parts.join("; ")}. fastfence refuses to act on these nodes (reason ${OTHER_REMEDIATOR_REASON}) while another remediator selects them`;
  return clip(text, opts.maxLength ?? 1000);
}
