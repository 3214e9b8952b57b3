// Where a node is probed over TCP: the annotation fastfence.io/probe-address ("host:port",
// e.g. a management network) when it is well formed, else the node's InternalIP (or first
// address) at the policy's probe port. One rule for the observers (source/event-source.ts)
// and fence's last look before a power-off (functions/fence/last-look.pure.ts). Pure: it
// never resolves a name or opens a connection.

/** Annotation overriding where a node is probed ("host:port"), e.g. a management network. */
export const PROBE_ADDRESS_ANNOTATION = "fastfence.io/probe-address";

/** The parts of a Node the rule reads (a V1Node fits). */
export interface ProbeAddressSource {
  metadata?: { annotations?: Record<string, string> };
  status?: { addresses?: readonly { type: string; address: string }[] };
}

/** The node's probe target; port undefined means the policy's probe port. */
export interface ProbeTarget {
  host: string;
  port?: number;
}

/** The annotation's target when well formed, else the node's address (port left to the policy). */
export function probeTargetOf(n: ProbeAddressSource): ProbeTarget | undefined {
  const override = n.metadata?.annotations?.[PROBE_ADDRESS_ANNOTATION];
  if (override) {
    const i = override.lastIndexOf(":");
    const port = Number(override.slice(i + 1));
    if (i > 0 && Number.isInteger(port) && port > 0 && port < 65536)
      return { host: override.slice(0, i), port };
  }
  const host =
    n.status?.addresses?.find((a) => a.type === "InternalIP")?.address ?? n.status?.addresses?.[0]?.address;
  return host ? { host } : undefined;
}

/** Host and port to probe, the policy's port filling in; undefined when the node has no address. */
export function probeAddress(
  n: ProbeAddressSource,
  defaultPort: number,
): { host: string; port: number } | undefined {
  const t = probeTargetOf(n);
  return t && { host: t.host, port: t.port ?? defaultPort };
}
