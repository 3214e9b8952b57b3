// Where a node's BMC settings come from and what they mean: an address URL (metal3
// BareMetalHost forms: ipmi://, redfish://, redfish+http(s)://, idrac-redfish://,
// ilo5-redfish://, ... plus fastfence's fence-agent://host:port?agent=fence_xyz&k=v),
// a credentials Secret (keys "username" and "password", like metal3; read and checked by
// credentials.ts) and driver options. parseBmcAddress is pure; driverForAddress constructs
// the driver an address names from credentials and options (no I/O: nothing is opened
// until the driver's first call). Never logs or returns the credentials in anything but
// the driver it constructs.
import { InvalidInputError } from "../../core/errors.ts";
import type { BmcCredentials } from "./credentials.ts";
import type { BmcDriver } from "./driver.ts";
import { FenceAgentDriver } from "./fence-agent.ts";
import { IpmiDriver } from "./ipmi/driver.ts";
import { RedfishDriver, type RedfishOffType } from "./redfish.ts";

export type BmcProtocol = "redfish" | "ipmi" | "fence-agent";

export interface ParsedBmcAddress {
  protocol: BmcProtocol;
  /** The address as metal3 wrote it, minus any userinfo. */
  address: string;
  /** Vendor flavour from the scheme (idrac, ilo5, ...) for information. */
  vendor?: string;
  host: string;
  port: number;
  /** redfish: http or https base URL, and the system path when the address names one. */
  baseUrl?: string;
  systemPath?: string;
  /** fence-agent: the agent and its parameters from the query string. */
  agent?: string;
  params?: Record<string, string>;
}

const REDFISH_SCHEMES: Record<string, string | undefined> = {
  redfish: undefined,
  "redfish-virtualmedia": undefined,
  "redfish-uefihttp": undefined,
  "idrac-redfish": "idrac",
  "idrac-virtualmedia": "idrac",
  "idrac-redfish-virtualmedia": "idrac",
  "ilo5-redfish": "ilo5",
  "ilo5-virtualmedia": "ilo5",
  "ilo6-redfish": "ilo6",
};

/** metal3 schemes whose native protocol we do not speak; a fence agent can cover them. */
const AGENT_HINTS: Record<string, string> = {
  idrac: "fence_idrac (IPMI) or an idrac-redfish:// address",
  ilo4: "fence_ilo4",
  ilo5: "fence_ilo5 or an ilo5-redfish:// address",
  irmc: "fence_ipmilan",
  ibmc: "fence_ipmilan",
  libvirt: "fence_virsh",
};

function bad(address: string, why: string): InvalidInputError {
  return new InvalidInputError("FF_INVALID_CONFIG", `BMC address "${redactAddress(address)}": ${why}`);
}

/** Drops userinfo from an address string before it is shown anywhere. */
export function redactAddress(address: string): string {
  return address.replace(/^([a-z0-9+.-]+:\/\/)[^@/]*@/i, "$1");
}

export function parseBmcAddress(address: string): ParsedBmcAddress {
  const raw = address.trim();
  if (!raw) throw bad(raw, "empty");
  if (/^[a-z0-9+.-]+:\/\/[^/]*@/i.test(raw))
    throw bad(raw, "credentials belong in the credentials Secret, not the address");
  // metal3: an address without a scheme is IPMI
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `ipmi://${raw}`;
  let u: URL;
  try {
    u = new URL(withScheme);
  } catch {
    throw bad(raw, "not a URL");
  }
  const scheme = u.protocol.slice(0, -1).toLowerCase();
  const host = u.hostname.replace(/^\[|\]$/g, "");
  if (!host) throw bad(raw, "no host");
  const portOf = (def: number) => {
    const p = u.port ? Number(u.port) : def;
    if (!Number.isInteger(p) || p < 1 || p > 65535) throw bad(raw, "bad port");
    return p;
  };

  if (scheme === "ipmi") {
    return { protocol: "ipmi", address: redactAddress(raw), host, port: portOf(623) };
  }

  const [base, transport] = scheme.split("+", 2) as [string, string | undefined];
  if (base in REDFISH_SCHEMES) {
    if (transport !== undefined && transport !== "http" && transport !== "https")
      throw bad(raw, `unknown transport "${transport}"`);
    const proto = transport ?? "https";
    const port = portOf(proto === "https" ? 443 : 80);
    const path = u.pathname.replace(/\/+$/, "");
    const hostPart = host.includes(":") ? `[${host}]` : host;
    const vendor = REDFISH_SCHEMES[base];
    return {
      protocol: "redfish",
      address: redactAddress(raw),
      ...(vendor ? { vendor } : {}),
      host,
      port,
      baseUrl: `${proto}://${hostPart}:${port}`,
      ...(path && path !== "/redfish/v1" ? { systemPath: path } : {}),
    };
  }

  if (scheme === "fence-agent") {
    const agent = u.searchParams.get("agent") ?? "";
    if (!/^fence_[a-z0-9_]+$/.test(agent)) throw bad(raw, "fence-agent:// needs ?agent=fence_<name>");
    const params: Record<string, string> = {};
    for (const [k, v] of u.searchParams) {
      if (/^(password|passwd|username|login|password_script)$/.test(k))
        throw bad(raw, `"${k}" belongs in the credentials Secret`);
      if (k !== "agent") params[k] = v;
    }
    params.ip = host;
    if (u.port) params.ipport = u.port;
    return {
      protocol: "fence-agent",
      address: redactAddress(raw),
      host,
      port: u.port ? Number(u.port) : 0,
      agent,
      params,
    };
  }

  const hint = AGENT_HINTS[base];
  throw bad(
    raw,
    hint ? `scheme ${scheme}:// is not supported natively; use ${hint}` : `unknown scheme ${scheme}://`,
  );
}

export interface BmcOptions {
  /** Skip TLS verification (metal3 disableCertificateVerification). */
  insecure?: boolean;
  /** PEM CA bundle for Redfish. */
  ca?: string;
  redfishOffType?: RedfishOffType;
  ipmiCipherSuite?: 3 | 17;
  ipmiPrivilege?: "operator" | "admin";
  /** Per-call timeout and power-off confirmation budget. */
  timeoutMs?: number;
  pollMs?: number;
}

/** Per-node BMC settings (from the policy CRD, a Secret, or a BareMetalHost). */
export interface BmcSettings {
  node: string;
  address: string;
  credentialsSecret?: { name: string; namespace: string };
  options?: BmcOptions;
  /** Where these settings came from, for the incident record. */
  source: "policy" | "secret" | "baremetalhost" | "cli";
}

/**
 * The driver for a BMC address (Redfish, IPMI or a fence agent, by its scheme), holding
 * these credentials and options. Throws FF_INVALID_CONFIG for an address it cannot use.
 */
export function driverForAddress(
  address: string,
  creds: BmcCredentials,
  options: BmcOptions = {},
): BmcDriver {
  const p = parseBmcAddress(address);
  switch (p.protocol) {
    case "redfish":
      return new RedfishDriver({
        url: p.baseUrl!,
        ...(p.systemPath ? { systemId: p.systemPath } : {}),
        username: creds.username,
        password: creds.password,
        insecure: options.insecure,
        ca: options.ca,
        offType: options.redfishOffType,
      });
    case "ipmi":
      return new IpmiDriver({
        host: p.host,
        port: p.port,
        username: creds.username,
        password: creds.password,
        cipherSuite: options.ipmiCipherSuite,
        privilege: options.ipmiPrivilege,
      });
    case "fence-agent":
      return new FenceAgentDriver({
        agent: p.agent!,
        username: creds.username,
        password: creds.password,
        params: { ...p.params!, ...(options.insecure ? { ssl_insecure: "1" } : {}) },
      });
  }
}
