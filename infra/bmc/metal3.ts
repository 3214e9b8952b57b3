// BMC discovery from metal3 BareMetalHost objects (metal3.io/v1alpha1): which host backs a node, and that
// host's spec.bmc (address, credentialsName, disableCertificateVerification). The mapping never trusts
// what a node can write about itself (issue 13): not its annotations or labels, and not its
// spec.providerID (a kubelet chooses it when it registers its Node, and may delete and re-register its own
// Node). It goes through objects only the machine controllers write: the one Machine whose status.nodeRef
// names the node (OpenShift machine.openshift.io, or Cluster API cluster.x-k8s.io → its Metal3Machine),
// then that object's "metal3.io/BareMetalHost" annotation, or the host whose spec.consumerRef points back
// at it; both must agree when both are there. Also the reboot.metal3.io annotation that keeps the Bare
// Metal Operator from powering a fenced host back on while an incident is open. Pure functions, plus
// KubeMetal3Api: thin reads/patches through infra/kube/client.ts. Names a host's credentials Secret but
// never reads it (that is credentials.ts): no credential in a level, log or error. Plain HTTP or no
// certificate checks need the host's disableCertificateVerification.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { FastfenceError, type ErrorCode } from "../../core/errors.ts";
import { insecureLevelProblem } from "../../core/level-security.ts";
import { FencingLevelSchema, type ResolvedFencingLevel } from "../../core/policy.ts";
import { KubeApiError, type Kube } from "../kube/client.ts";
import type { BmcSettings } from "./settings.ts";
import { parseBmcAddress } from "./settings.ts";

/** Discovery found no usable host for a node (or a read failed); message is secret-free. */
export class Metal3DiscoveryError extends FastfenceError {
  constructor(code: ErrorCode, message: string, cause?: unknown) {
    super(code, message, { cause, retriable: code === "FF_KUBE_UNAVAILABLE" });
  }
}

export interface BareMetalHostLike {
  metadata?: { name?: string; namespace?: string; uid?: string; annotations?: Record<string, string> };
  spec?: {
    bmc?: { address?: string; credentialsName?: string; disableCertificateVerification?: boolean };
    online?: boolean;
    /** Who uses the host (the Machine / Metal3Machine that claimed it); set by the actuator. */
    consumerRef?: { apiVersion?: string; kind?: string; name?: string; namespace?: string };
  };
}

export type HostRef = { namespace: string; name: string };

/** The annotation the machine actuators (OpenShift baremetal, CAPM3) put on the Machine / Metal3Machine: "<namespace>/<name>". */
export const HOST_ANNOTATION = "metal3.io/BareMetalHost";

export function hostFromAnnotation(annotations: Record<string, string> | undefined): HostRef | undefined {
  const v = annotations?.[HOST_ANNOTATION];
  if (!v) return undefined;
  const [namespace, name] = v.split("/", 2);
  return namespace && name ? { namespace, name } : undefined;
}

/** A Machine (OpenShift or Cluster API) or a Metal3Machine, as discovery reads it. */
export interface MachineLike {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; annotations?: Record<string, string> };
  spec?: { infrastructureRef?: { kind?: string; name?: string; namespace?: string; apiVersion?: string } };
  status?: { nodeRef?: { name?: string; uid?: string } };
}

const objText = (o: MachineLike) =>
  `${(o.apiVersion ?? "?").split("/")[0]} ${o.kind ?? "?"} ${o.metadata?.namespace ?? "?"}/${o.metadata?.name ?? "?"}`;

/** Whether a host's spec.consumerRef points at `o` (same kind, API group, namespace, name). */
export function consumedBy(host: BareMetalHostLike, o: MachineLike): boolean {
  const c = host.spec?.consumerRef;
  if (!c?.name || !o.metadata?.name) return false;
  const group = (v: string | undefined) => (v ?? "").split("/")[0];
  return (
    c.kind === o.kind &&
    group(c.apiVersion) === group(o.apiVersion) &&
    (c.namespace ?? host.metadata?.namespace) === o.metadata.namespace &&
    c.name === o.metadata.name
  );
}

/**
 * The node's Machine: the one whose status.nodeRef names it (and, where both carry a uid,
 * the node's uid: a link to an earlier Node of that name does not count). None or more
 * than one is an error: discovery never guesses which host to power off.
 */
export function machineForNode(node: string, uid: string | undefined, machines: MachineLike[]): MachineLike {
  const mine = machines.filter((m) => {
    const ref = m.status?.nodeRef;
    return ref?.name === node && !(ref.uid && uid && ref.uid !== uid);
  });
  if (mine.length === 1) return mine[0]!;
  throw new Metal3DiscoveryError(
    "FF_KUBE_NOT_FOUND",
    mine.length === 0
      ? `node ${node}: no Machine (machine.openshift.io or cluster.x-k8s.io) has status.nodeRef naming it`
      : `node ${node}: ${mine.length} Machines name it in status.nodeRef (${mine.map(objText).join(", ")}): ambiguous`,
  );
}

/** BMC settings for a node from its BareMetalHost; validates the address form. */
export function settingsFromHost(node: string, host: BareMetalHostLike): BmcSettings {
  const bmc = host.spec?.bmc;
  const ns = host.metadata?.namespace ?? "default";
  if (!bmc?.address) {
    throw new Metal3DiscoveryError(
      "FF_INVALID_CONFIG",
      `BareMetalHost ${ns}/${host.metadata?.name ?? "?"} has no spec.bmc.address`,
    );
  }
  parseBmcAddress(bmc.address);
  return {
    node,
    address: bmc.address,
    ...(bmc.credentialsName ? { credentialsSecret: { name: bmc.credentialsName, namespace: ns } } : {}),
    options: { insecure: bmc.disableCertificateVerification === true },
    source: "baremetalhost",
  };
}

/**
 * The Bare Metal Operator keeps a host powered off while any "reboot.metal3.io/<key>"
 * annotation is present (mode hard: no graceful shutdown); removing it lets the host
 * power on again. One key per incident, so two incidents never clear each other's hold.
 */
export function rebootAnnotationKey(incident: string): string {
  const safe = incident
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, "-")
    .slice(0, 50);
  return `reboot.metal3.io/fastfence-${safe}`;
}

export function holdPoweredOffPatch(incident: string): { metadata: { annotations: Record<string, string> } } {
  return { metadata: { annotations: { [rebootAnnotationKey(incident)]: JSON.stringify({ mode: "hard" }) } } };
}

export function releasePatch(incident: string): { metadata: { annotations: Record<string, null> } } {
  return { metadata: { annotations: { [rebootAnnotationKey(incident)]: null } } };
}

/** Kubernetes-side discovery; the API object is injected so tests can use a fake. */
export interface Metal3Api {
  /** The Node (404: not found); only its uid is used, nothing the node writes about itself. */
  getNode(name: string): Promise<{ metadata?: { uid?: string } }>;
  /** Machines of both APIs (OpenShift and Cluster API; an API that is not installed: none). */
  listMachines(): Promise<MachineLike[]>;
  /** A Cluster API Machine's infrastructure object (spec.infrastructureRef), if it exists. */
  getInfrastructure(machine: MachineLike): Promise<MachineLike | undefined>;
  listHosts(): Promise<BareMetalHostLike[]>;
  /** One host by name (undefined: not found). */
  getHost(namespace: string, name: string): Promise<BareMetalHostLike | undefined>;
}

/** The object the host belongs to: an OpenShift Machine itself, a Cluster API Machine's Metal3Machine. */
async function hostConsumer(api: Metal3Api, node: string, machine: MachineLike): Promise<MachineLike> {
  if (!(machine.apiVersion ?? "").startsWith("cluster.x-k8s.io/")) return machine;
  const infra = machine.spec?.infrastructureRef;
  const m3m = infra?.kind === "Metal3Machine" ? await api.getInfrastructure(machine) : undefined;
  if (!m3m)
    throw new Metal3DiscoveryError(
      "FF_KUBE_NOT_FOUND",
      `node ${node}: ${objText(machine)} has no Metal3Machine (spec.infrastructureRef ${infra?.kind ?? "unset"} ${infra?.name ?? ""})`,
    );
  return m3m;
}

/** The node's BareMetalHost (through its Machine, never the node's own fields) and the BMC settings it gives. */
export async function discoverNodeHost(
  api: Metal3Api,
  node: string,
): Promise<{ host: BareMetalHostLike; settings: BmcSettings }> {
  let n: Awaited<ReturnType<Metal3Api["getNode"]>>;
  try {
    n = await api.getNode(node);
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 404)
      throw new Metal3DiscoveryError("FF_KUBE_NOT_FOUND", `node ${node} not found`, err);
    throw err;
  }
  const machine = machineForNode(node, n.metadata?.uid, await api.listMachines());
  const consumer = await hostConsumer(api, node, machine);
  const ref = hostFromAnnotation(consumer.metadata?.annotations);
  let host: BareMetalHostLike | undefined;
  if (ref) {
    host = await api.getHost(ref.namespace, ref.name);
    if (!host)
      throw new Metal3DiscoveryError(
        "FF_KUBE_NOT_FOUND",
        `node ${node}: BareMetalHost ${ref.namespace}/${ref.name} (${HOST_ANNOTATION} of ${objText(consumer)}) not found`,
      );
    if (host.spec?.consumerRef?.name && !consumedBy(host, consumer))
      throw new Metal3DiscoveryError(
        "FF_INVALID_CONFIG",
        `node ${node}: ${objText(consumer)} names BareMetalHost ${ref.namespace}/${ref.name}, whose spec.consumerRef is ${host.spec.consumerRef.kind ?? "?"} ${host.spec.consumerRef.name}: they disagree`,
      );
  } else {
    const claimed = (await api.listHosts()).filter((h) => consumedBy(h, consumer));
    if (claimed.length !== 1)
      throw new Metal3DiscoveryError(
        "FF_KUBE_NOT_FOUND",
        `node ${node}: ${objText(consumer)} has no ${HOST_ANNOTATION} annotation and ${claimed.length} BareMetalHosts name it in spec.consumerRef`,
      );
    host = claimed[0]!;
  }
  return { host, settings: settingsFromHost(node, host) };
}

/** The fencing level a discovered host gives (driver from its address; default level timeout). */
export function levelFromHost(settings: BmcSettings, host: BareMetalHostLike): ResolvedFencingLevel {
  const ns = host.metadata?.namespace ?? "default";
  const name = host.metadata?.name ?? "?";
  const bad = (why: string) =>
    new Metal3DiscoveryError("FF_INVALID_CONFIG", `BareMetalHost ${ns}/${name} ${why}`);
  if (!settings.credentialsSecret) throw bad("has no spec.bmc.credentialsName");
  const insecure = settings.options?.insecure === true; // disableCertificateVerification
  const candidate = {
    driver: parseBmcAddress(settings.address).protocol,
    address: settings.address,
    credentialsSecret: settings.credentialsSecret.name,
    ...(insecure ? { options: { insecure: "true" }, insecure: true } : {}),
  };
  const problem = insecureLevelProblem(candidate, "spec.bmc.address");
  if (problem) throw bad(`${problem} (set spec.bmc.disableCertificateVerification)`);
  const level = FencingLevelSchema.parse(candidate);
  return { ...level, discovered: { kind: "BareMetalHost", namespace: ns, name } };
}

/**
 * Discovered levels for a node, as the fence/recover stages take them: `discoveredLevels`
 * or, when nothing usable was found, `discoveryError` (secret-free). A read that fails
 * for a transient reason (API unavailable) throws, so the event is redelivered.
 */
export async function discoverLevels(
  api: Metal3Api,
  node: string,
): Promise<{ discoveredLevels: ResolvedFencingLevel[] } | { discoveryError: string }> {
  try {
    const { host, settings } = await discoverNodeHost(api, node);
    return { discoveredLevels: [levelFromHost(settings, host)] };
  } catch (err) {
    if (err instanceof FastfenceError && err.retriable) throw err;
    if (err instanceof FastfenceError) return { discoveryError: err.message };
    throw err;
  }
}

/** The Machine APIs whose status.nodeRef links a Node to its machine: OpenShift, Cluster API. */
const MACHINE_APIS = [
  ["machine.openshift.io", "v1beta1"],
  ["cluster.x-k8s.io", "v1beta1"],
] as const;

const GROUP = "metal3.io";
const VERSION = "v1alpha1";
const PLURAL = "baremetalhosts";

/**
 * metal3 through the Kubernetes API (infra/kube/client.ts): nodes (their uid only),
 * Machines and Metal3Machines, BareMetalHosts, and the hold annotation
 * (JSON merge patches on metadata.annotations only). With `namespaces` (the runtime
 * setting FASTFENCE_METAL3_NAMESPACES) every BareMetalHost and Machine list goes namespace by
 * namespace, so a namespaced Role is enough; without it, one cluster-wide list. Reading
 * or patching one host by namespace/name is the same either way.
 */
export class KubeMetal3Api implements Metal3Api {
  private readonly kube: Kube;
  /** Namespaces to list BareMetalHosts in; undefined: cluster-wide. */
  readonly namespaces: readonly string[] | undefined;

  constructor(kube: Kube, opts: { namespaces?: readonly string[] | undefined } = {}) {
    this.kube = kube;
    this.namespaces = opts.namespaces?.length ? [...opts.namespaces] : undefined;
  }

  getNode(name: string): ReturnType<Metal3Api["getNode"]> {
    return this.kube.read(`read node ${name}`, (a) => a.core.readNode({ name }));
  }

  /** The list scopes: each configured namespace, or [undefined] for one cluster-wide list. */
  private scopes(): (string | undefined)[] {
    return this.namespaces ? [...this.namespaces] : [undefined];
  }

  /** BareMetalHosts of one namespace, or of the whole cluster (namespace undefined). */
  private async listIn(namespace: string | undefined): Promise<BareMetalHostLike[]> {
    const list = (await (namespace === undefined
      ? this.kube.read("list baremetalhosts", (a) =>
          a.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }),
        )
      : this.kube.read(`list baremetalhosts in ${namespace}`, (a) =>
          a.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace }),
        ))) as { items?: BareMetalHostLike[] };
    return list.items ?? [];
  }

  async listHosts(): Promise<BareMetalHostLike[]> {
    const hosts: BareMetalHostLike[] = [];
    for (const ns of this.scopes()) hosts.push(...(await this.listIn(ns)));
    return hosts;
  }

  async getHost(namespace: string, name: string): Promise<BareMetalHostLike | undefined> {
    try {
      return (await this.kube.read(`read baremetalhost ${namespace}/${name}`, (a) =>
        a.custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          plural: PLURAL,
          namespace,
          name,
        }),
      )) as BareMetalHostLike;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  /** A custom object, or undefined when it (or its API) does not exist. */
  private async read(group: string, version: string, plural: string, namespace: string, name: string) {
    try {
      return (await this.kube.read(`read ${plural}.${group} ${namespace}/${name}`, (a) =>
        a.custom.getNamespacedCustomObject({ group, version, plural, namespace, name }),
      )) as MachineLike;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  /** Machines of both APIs in the list scopes; an API that is not installed (404) gives none. */
  async listMachines(): Promise<MachineLike[]> {
    const out: MachineLike[] = [];
    for (const [group, version] of MACHINE_APIS)
      for (const namespace of this.scopes()) {
        const what = `list machines.${group}${namespace ? ` in ${namespace}` : ""}`;
        try {
          const l = (await this.kube.call(what, (a) =>
            namespace === undefined
              ? a.custom.listClusterCustomObject({ group, version, plural: "machines" })
              : a.custom.listNamespacedCustomObject({ group, version, plural: "machines", namespace }),
          )) as { items?: MachineLike[] };
          for (const m of l.items ?? [])
            out.push({ apiVersion: `${group}/${version}`, kind: "Machine", ...m });
        } catch (err) {
          if (err instanceof KubeApiError && err.status === 404) break; // API not installed
          throw err;
        }
      }
    return out;
  }

  async getInfrastructure(machine: MachineLike): Promise<MachineLike | undefined> {
    const infra = machine.spec?.infrastructureRef;
    if (!infra?.name || infra.kind !== "Metal3Machine") return undefined;
    const [group, version] = (infra.apiVersion ?? "infrastructure.cluster.x-k8s.io/v1beta1").split("/", 2);
    const ns = infra.namespace ?? machine.metadata?.namespace ?? "default";
    const m3m = await this.read(group!, version ?? "v1beta1", "metal3machines", ns, infra.name);
    return m3m && { apiVersion: `${group}/${version ?? "v1beta1"}`, kind: "Metal3Machine", ...m3m };
  }

  private async patchHost(namespace: string, name: string, body: object, what: string): Promise<void> {
    await this.kube.call(`${what} baremetalhost ${namespace}/${name}`, (a) =>
      a.custom.patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, plural: PLURAL, namespace, name, body },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
  }

  /** Sets reboot.metal3.io/fastfence-<incident> (mode hard): the operator keeps the host off. */
  hold(host: { namespace: string; name: string }, incident: string): Promise<void> {
    return this.patchHost(host.namespace, host.name, holdPoweredOffPatch(incident), "hold");
  }

  /** Removes this incident's hold from one host. */
  release(host: { namespace: string; name: string }, incident: string): Promise<void> {
    return this.patchHost(host.namespace, host.name, releasePatch(incident), "release");
  }

  /**
   * Removes this incident's hold from every host that carries it (in the configured
   * namespaces, else cluster-wide); returns "ns/name" of each. Per list scope: no metal3
   * CRD (404) means nothing to release there; so does a 403 unless `strict`.
   */
  async releaseIncident(incident: string, strict: boolean): Promise<string[]> {
    const key = rebootAnnotationKey(incident);
    const released: string[] = [];
    for (const scope of this.scopes()) {
      let hosts: BareMetalHostLike[];
      try {
        hosts = await this.listIn(scope);
      } catch (err) {
        if (err instanceof KubeApiError && (err.status === 404 || (!strict && err.status === 403))) continue;
        throw err;
      }
      for (const h of hosts) {
        const { namespace, name, annotations } = h.metadata ?? {};
        if (!namespace || !name || annotations?.[key] === undefined) continue;
        await this.release({ namespace, name }, incident);
        released.push(`${namespace}/${name}`);
      }
    }
    return released;
  }
}
