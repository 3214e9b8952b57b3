// Which ClusterLabs fence-agent parameters turn a level's security off, for
// core/level-security.ts: TLS without certificate checks (ssl_insecure), SSL 3.0 (notls),
// IPMI 1.5 without encryption (lanplus off, explicitly or by the agent's default; cipher
// suite 0), telnet instead of SSH, SNMP v1/v2c or v3 without privacy, and HTTP where the agent
// needs ssl for HTTPS. The defaults are those the agents' own metadata states (fence-agents
// 4.12.1, `fence_X -o metadata`); an agent not listed is judged on its explicit parameters
// only. Parameter names are read as fencing.py reads stdin: case as given, "-" and "_" alike,
// booleans 1/yes/on/true and 0/no/off/false. Pure: it reads the level's address only, never
// connects and never sees a credential.

/** No encryption on the wire (IPMI 1.5, telnet, SNMP community, HTTP), TLS without checks, or SSL 3.0. */
export type AgentInsecureMode = "plaintext" | "no-cert-check" | "weak-tls";

/** One reason a fence-agent level is insecure, naming the parameter. */
export interface AgentFinding {
  mode: AgentInsecureMode;
  /** e.g. "lanplus=0: IPMI 1.5, no encryption". */
  why: string;
}

/** IPMI agents and their lanplus default (metadata). */
const LANPLUS_DEFAULT: Readonly<Record<string, boolean>> = {
  fence_ipmilan: false,
  fence_idrac: false,
  fence_imm: false,
  fence_ilo3: true,
  fence_ilo4: true,
  fence_ilo5: true,
  fence_ipmilanplus: true,
};
/** Agents that speak telnet unless ssh (alias secure) is set. */
const TELNET_UNLESS_SSH = new Set([
  "fence_apc",
  "fence_bladecenter",
  "fence_brocade",
  "fence_drac5",
  "fence_hds_cb",
  "fence_hpblade",
  "fence_ilo3_ssh",
  "fence_ilo4_ssh",
  "fence_ilo5_ssh",
  "fence_ilo_mp",
  "fence_ilo_ssh",
  "fence_raritan_px3",
  "fence_rsa",
  "fence_rsb",
  "fence_wti",
]);
/** Agents that speak telnet only. */
const TELNET_ONLY = new Set(["fence_cdu", "fence_drac", "fence_netio", "fence_raritan", "fence_sanbox2"]);
/** SNMP agents and their snmp_version default ("1" where the metadata names none: net-snmp's). */
const SNMP_DEFAULT: Readonly<Record<string, string>> = {
  fence_apc_snmp: "1",
  fence_cisco_mds: "1",
  fence_eaton_snmp: "1",
  fence_emerson: "1",
  fence_ibmblade: "1",
  fence_ifmib: "2c",
  fence_intelmodular: "1",
  fence_ipdu: "3",
  fence_lindypdu: "1",
  fence_tripplite_snmp: "1",
};
/** Web agents whose ssl is off unless set (metadata default none): plain HTTP. */
const HTTP_UNLESS_SSL = new Set([
  "fence_cisco_ucs",
  "fence_rhevm",
  "fence_skalar",
  "fence_vmware_rest",
  "fence_vmware_soap",
  "fence_vmware_vcloud",
]);

const TRUE = new Set(["1", "yes", "on", "true"]);
const FALSE = new Set(["0", "no", "off", "false"]);

/** The agent's parameters from a fence-agent:// address; undefined: not a fence-agent address. */
function agentParams(address: string): Map<string, string> | undefined {
  const a = address.trim();
  if (!/^fence-agent:\/\//i.test(a)) return undefined;
  const q = a.indexOf("?");
  const params = new Map<string, string>();
  if (q < 0) return params;
  for (const [k, v] of new URLSearchParams(a.slice(q + 1))) params.set(k.replace(/-/g, "_"), v);
  return params;
}

/** Every way the fence-agent level at `address` is insecure (empty: none, or not a fence agent). */
export function agentFindings(address: string): AgentFinding[] {
  const p = agentParams(address);
  if (!p) return [];
  const agent = p.get("agent") ?? "";
  const on = (k: string) => TRUE.has((p.get(k) ?? "").toLowerCase());
  const off = (k: string) => FALSE.has((p.get(k) ?? "").toLowerCase());
  const shown = (k: string) => `${k}=${p.get(k)}`;
  const out: AgentFinding[] = [];
  if (on("ssl_insecure")) out.push({ mode: "no-cert-check", why: shown("ssl_insecure") });
  if (on("notls")) out.push({ mode: "weak-tls", why: `${shown("notls")}: SSL 3.0` });
  const lanplusDefault = LANPLUS_DEFAULT[agent];
  if (p.has("lanplus") ? off("lanplus") : lanplusDefault === false)
    out.push({
      mode: "plaintext",
      why: p.has("lanplus")
        ? `${shown("lanplus")}: IPMI 1.5, no encryption`
        : `lanplus unset: ${agent} defaults to IPMI 1.5, no encryption`,
    });
  if (p.get("cipher") === "0")
    out.push({ mode: "plaintext", why: "cipher=0: no authentication or encryption" });
  const ssh = on("ssh") || on("secure");
  if (off("ssh") || off("secure") || (TELNET_UNLESS_SSH.has(agent) && !ssh))
    out.push({
      mode: "plaintext",
      why: `${p.has("ssh") || p.has("secure") ? "ssh off" : "ssh unset"}: telnet`,
    });
  if (TELNET_ONLY.has(agent)) out.push({ mode: "plaintext", why: `${agent} speaks telnet only` });
  const snmp = p.get("snmp_version") ?? SNMP_DEFAULT[agent];
  if (snmp !== undefined && snmp !== "3")
    out.push({ mode: "plaintext", why: `snmp_version ${snmp}: community string in clear` });
  else if (snmp === "3" && (p.get("snmp_sec_level") ?? "") !== "authPriv")
    out.push({
      mode: "plaintext",
      why: `snmp_sec_level ${p.get("snmp_sec_level") ?? "unset"}: SNMPv3 without privacy`,
    });
  const tls = on("ssl") || on("ssl_secure") || on("ssl_insecure");
  if (off("ssl") && !tls) out.push({ mode: "plaintext", why: `${shown("ssl")}: HTTP` });
  else if (HTTP_UNLESS_SSL.has(agent) && !tls && !p.has("ssl"))
    out.push({ mode: "plaintext", why: `ssl unset: ${agent} speaks HTTP` });
  return out;
}
