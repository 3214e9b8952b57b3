// BMC discovery from metal3 BareMetalHost objects (metal3.io/v1alpha1): which host backs
// a node (the node's spec.providerID, or the Metal3Machine's "metal3.io/BareMetalHost"
// annotation), and that host's spec.bmc (address, credentialsName,
// disableCertificateVerification). Also the reboot.metal3.io annotation that keeps the
// Bare Metal Operator from powering a fenced host back on while an incident is open.
// Pure functions, plus thin reads/patches through @kubernetes/client-node. Never reads
// the credentials Secret's values into anything but the returned credentials.
import type { BmcSettings } from "./settings.ts";
import { parseBmcAddress } from "./settings.ts";

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
    throw new Error(`BareMetalHost ${ns}/${host.metadata?.name ?? "?"} has no spec.bmc.address`);
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
  getNode(
    name: string,
  ): Promise<{ spec?: { providerID?: string }; metadata?: { annotations?: Record<string, string> } }>;
  listHosts(): Promise<BareMetalHostLike[]>;
}

export async function discoverNodeBmc(api: Metal3Api, node: string): Promise<BmcSettings> {
  const n = await api.getNode(node);
  const ref = hostFromProviderId(n.spec?.providerID) ?? hostFromAnnotation(n.metadata?.annotations);
  if (!ref) throw new Error(`node ${node}: no metal3 providerID or ${HOST_ANNOTATION} annotation`);
  const host = findHost(await api.listHosts(), ref);
  if (!host)
    throw new Error(
      `node ${node}: BareMetalHost ${"uid" in ref ? ref.uid : `${ref.namespace}/${ref.name}`} not found`,
    );
  return settingsFromHost(node, host);
}
