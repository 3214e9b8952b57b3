// BMC discovery from metal3 BareMetalHost objects (metal3.io/v1alpha1): which host backs
// a node (the node's spec.providerID, the node's own "metal3.io/BareMetalHost" annotation,
// or that annotation on the node's Machine: OpenShift machine.openshift.io/machine, or
// Cluster API cluster.x-k8s.io/machine → its Metal3Machine), and that host's spec.bmc
// (address, credentialsName, disableCertificateVerification). Also the reboot.metal3.io
// annotation that keeps the Bare Metal Operator from powering a fenced host back on while
// an incident is open. Pure functions, plus KubeMetal3Api: thin reads/patches through
// infra/kube/client.ts. Names a host's credentials Secret but never reads it (that is
// credentials.ts, for whoever builds the driver): no credential in a level, log or error.
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { FastfenceError, type ErrorCode } from "../../core/errors.ts";
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
  };
}

export type HostRef = { namespace: string; name: string } | { uid: string };

/**
 * Parses a node's providerID. CAPM3 forms: "metal3://<namespace>/<bmh-name>/<m3m-name>"
 * (current) and "metal3://<bmh-uid>" (legacy). Anything else: undefined.
 */
export function hostFromProviderId(providerId: string | undefined): HostRef | undefined {
  if (!providerId?.startsWith("metal3://")) return undefined;
  const parts = providerId.slice("metal3://".length).split("/").filter(Boolean);
  if (parts.length >= 2) return { namespace: parts[0]!, name: parts[1]! };
  if (parts.length === 1) return { uid: parts[0]! };
  return undefined;
}

/** The Metal3Machine annotation "metal3.io/BareMetalHost": "<namespace>/<name>". */
export const HOST_ANNOTATION = "metal3.io/BareMetalHost";

export function hostFromAnnotation(annotations: Record<string, string> | undefined): HostRef | undefined {
  const v = annotations?.[HOST_ANNOTATION];
  if (!v) return undefined;
  const [namespace, name] = v.split("/", 2);
  return namespace && name ? { namespace, name } : undefined;
}

export function findHost(hosts: BareMetalHostLike[], ref: HostRef): BareMetalHostLike | undefined {
  return hosts.find((h) =>
    "uid" in ref
      ? h.metadata?.uid === ref.uid
      : h.metadata?.namespace === ref.namespace && h.metadata?.name === ref.name,
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

/** A Machine that may carry the host annotation (OpenShift) or point at a Metal3Machine (CAPI). */
export type MachineRef = {
  api: "machine.openshift.io" | "cluster.x-k8s.io";
  namespace: string;
  name: string;
};

/** Node annotation of OpenShift's Machine API: "<namespace>/<machine>". */
export const OPENSHIFT_MACHINE_ANNOTATION = "machine.openshift.io/machine";
/** Node annotations of Cluster API: the Machine's name and namespace. */
export const CAPI_MACHINE_ANNOTATION = "cluster.x-k8s.io/machine";
export const CAPI_NAMESPACE_ANNOTATION = "cluster.x-k8s.io/cluster-namespace";

export function machineFromNodeAnnotations(a: Record<string, string> | undefined): MachineRef | undefined {
  const os = a?.[OPENSHIFT_MACHINE_ANNOTATION];
  if (os) {
    const [namespace, name] = os.split("/", 2);
    if (namespace && name) return { api: "machine.openshift.io", namespace, name };
  }
  const capi = a?.[CAPI_MACHINE_ANNOTATION];
  const capiNs = a?.[CAPI_NAMESPACE_ANNOTATION];
  if (capi && capiNs) return { api: "cluster.x-k8s.io", namespace: capiNs, name: capi };
  return undefined;
}

/** Kubernetes-side discovery; the API object is injected so tests can use a fake. */
export interface Metal3Api {
  getNode(
    name: string,
  ): Promise<{ spec?: { providerID?: string }; metadata?: { annotations?: Record<string, string> } }>;
  listHosts(): Promise<BareMetalHostLike[]>;
  /** One host by name (undefined: not found); saves listing every host. */
  getHost?(namespace: string, name: string): Promise<BareMetalHostLike | undefined>;
  /** Annotations of the object that carries metal3.io/BareMetalHost for a Machine. */
  machineAnnotations?(ref: MachineRef): Promise<Record<string, string> | undefined>;
}

function refText(ref: HostRef): string {
  return "uid" in ref ? `uid ${ref.uid}` : `${ref.namespace}/${ref.name}`;
}

export async function discoverNodeBmc(api: Metal3Api, node: string): Promise<BmcSettings> {
  return (await discoverNodeHost(api, node)).settings;
}

/** The node's BareMetalHost and the BMC settings it gives. */
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
  let ref = hostFromProviderId(n.spec?.providerID) ?? hostFromAnnotation(n.metadata?.annotations);
  const machine = ref ? undefined : machineFromNodeAnnotations(n.metadata?.annotations);
  if (!ref && machine && api.machineAnnotations) {
    ref = hostFromAnnotation(await api.machineAnnotations(machine));
    if (!ref)
      throw new Metal3DiscoveryError(
        "FF_KUBE_NOT_FOUND",
        `node ${node}: ${machine.api} Machine ${machine.namespace}/${machine.name} has no ${HOST_ANNOTATION} annotation`,
      );
  }
  if (!ref)
    throw new Metal3DiscoveryError(
      "FF_KUBE_NOT_FOUND",
      `node ${node}: no metal3:// providerID, ${HOST_ANNOTATION} annotation or Machine annotation`,
    );
  const host =
    "uid" in ref || !api.getHost
      ? findHost(await api.listHosts(), ref)
      : await api.getHost(ref.namespace, ref.name);
  if (!host)
    throw new Metal3DiscoveryError(
      "FF_KUBE_NOT_FOUND",
      `node ${node}: BareMetalHost ${refText(ref)} not found`,
    );
  return { host, settings: settingsFromHost(node, host) };
}

/** The fencing level a discovered host gives (driver from its address; default level timeout). */
export function levelFromHost(settings: BmcSettings, host: BareMetalHostLike): ResolvedFencingLevel {
  const ns = host.metadata?.namespace ?? "default";
  const name = host.metadata?.name ?? "?";
  if (!settings.credentialsSecret)
    throw new Metal3DiscoveryError(
      "FF_INVALID_CONFIG",
      `BareMetalHost ${ns}/${name} has no spec.bmc.credentialsName`,
    );
  const level = FencingLevelSchema.parse({
    driver: parseBmcAddress(settings.address).protocol,
    address: settings.address,
    credentialsSecret: settings.credentialsSecret.name,
    ...(settings.options?.insecure ? { options: { insecure: "true" } } : {}),
  });
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

const GROUP = "metal3.io";
const VERSION = "v1alpha1";
const PLURAL = "baremetalhosts";

/**
 * metal3 through the Kubernetes API (infra/kube/client.ts): nodes, BareMetalHosts,
 * Machines, and the hold annotation
 * (JSON merge patches on metadata.annotations only). With `namespaces` (the runtime
 * setting FASTFENCE_METAL3_NAMESPACES) every BareMetalHost list goes namespace by
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
    return this.kube.call(`read node ${name}`, (a) => a.core.readNode({ name }));
  }

  /** The list scopes: each configured namespace, or [undefined] for one cluster-wide list. */
  private scopes(): (string | undefined)[] {
    return this.namespaces ? [...this.namespaces] : [undefined];
  }

  /** BareMetalHosts of one namespace, or of the whole cluster (namespace undefined). */
  private async listIn(namespace: string | undefined): Promise<BareMetalHostLike[]> {
    const list = (await (namespace === undefined
      ? this.kube.call("list baremetalhosts", (a) =>
          a.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL }),
        )
      : this.kube.call(`list baremetalhosts in ${namespace}`, (a) =>
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
      return (await this.kube.call(`read baremetalhost ${namespace}/${name}`, (a) =>
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

  async machineAnnotations(ref: MachineRef): Promise<Record<string, string> | undefined> {
    type Obj = {
      metadata?: { annotations?: Record<string, string> };
      spec?: {
        infrastructureRef?: { kind?: string; name?: string; namespace?: string; apiVersion?: string };
      };
    };
    const read = async (group: string, version: string, plural: string, namespace: string, name: string) => {
      try {
        return (await this.kube.call(`read ${plural}.${group} ${namespace}/${name}`, (a) =>
          a.custom.getNamespacedCustomObject({ group, version, plural, namespace, name }),
        )) as Obj;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) return undefined;
        throw err;
      }
    };
    if (ref.api === "machine.openshift.io")
      return (await read("machine.openshift.io", "v1beta1", "machines", ref.namespace, ref.name))?.metadata
        ?.annotations;
    const m = await read("cluster.x-k8s.io", "v1beta1", "machines", ref.namespace, ref.name);
    const infra = m?.spec?.infrastructureRef;
    if (!infra?.name || infra.kind !== "Metal3Machine") return m?.metadata?.annotations;
    const [group, version] = (infra.apiVersion ?? "infrastructure.cluster.x-k8s.io/v1beta1").split("/", 2);
    const m3m = await read(
      group!,
      version ?? "v1beta1",
      "metal3machines",
      infra.namespace ?? ref.namespace,
      infra.name,
    );
    return m3m?.metadata?.annotations;
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
