// Whether a fencing level reaches its BMC insecurely, and whether it is allowed to: a
// Redfish (or any "+http") address over plain HTTP, certificate checks turned off (the
// level option insecure "true"), or a fence agent's parameters that turn its security off
// (core/fence-agent-security.ts: ssl_insecure, notls, lanplus off, telnet, SNMP without
// privacy, ...) is allowed only on a level that says so itself with `insecure: true` (issue 18,
// Build 3). Pure: it reads the level's address and options only, never connects and never
// sees a credential.
import { agentFindings } from "./fence-agent-security.ts";

/**
 * How a level is insecure: plain HTTP (everything readable and changeable on the wire), TLS
 * without certificate checks, a fence agent's plaintext protocol (IPMI 1.5, telnet, SNMP
 * community, HTTP) or its SSL 3.0.
 */
export type InsecureMode = "plain-http" | "no-cert-check" | "plaintext" | "weak-tls";

const MODE_TEXT: Record<InsecureMode, string> = {
  "plain-http": "plain HTTP",
  "no-cert-check": "TLS without certificate checks",
  plaintext: "plaintext",
  "weak-tls": "SSL 3.0",
};

/** The parts of a level this reads (a policy level, a discovered one, a CLI target). */
export interface LevelTransport {
  address: string;
  options?: Readonly<Record<string, string>> | undefined;
  insecure?: boolean | undefined;
}

/** The ways `level` is insecure (empty: HTTPS with certificate checks, or not an HTTP protocol). */
export function insecureModes(level: LevelTransport): InsecureMode[] {
  // plain HTTP has no certificates to check: one mode, not two
  if (/^[a-z][a-z0-9.-]*\+http:\/\//i.test(level.address.trim())) return ["plain-http"];
  const modes = new Set<InsecureMode>(level.options?.insecure === "true" ? ["no-cert-check"] : []);
  for (const f of agentFindings(level.address)) modes.add(f.mode);
  return [...modes];
}

/** "plain HTTP and TLS without certificate checks", for messages. */
export function describeModes(modes: readonly InsecureMode[]): string {
  return modes.map((m) => MODE_TEXT[m]).join(" and ");
}

/**
 * Why `level` is refused (undefined: allowed). `where` names the level in the message, e.g.
 * `fencing.nodes[0].levels[1]`. The address is shown without userinfo (a policy cannot hold
 * one anyway).
 */
export function insecureLevelProblem(level: LevelTransport, where: string): string | undefined {
  const modes = insecureModes(level);
  if (!modes.length || level.insecure === true) return undefined;
  const shown = level.address.replace(/^([a-z0-9+.-]+:\/\/)[^@/]*@/i, "$1");
  const params = agentFindings(level.address).map((f) => f.why);
  const detail = params.length ? ` (${params.join("; ")})` : "";
  return `${where} (${shown}) uses ${describeModes(modes)}${detail}: refused unless the level sets insecure: true`;
}
