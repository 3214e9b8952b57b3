// Whether a fencing level reaches its BMC insecurely, and whether it is allowed to: a
// Redfish (or any "+http") address over plain HTTP, or certificate checks turned off (the
// level option insecure "true"), is allowed only on a level that says so itself with
// `insecure: true` (issue 18, Build 3). Pure: it reads the level's address and options
// only, never connects and never sees a credential.

/** How a level is insecure: plain HTTP (everything readable and changeable on the wire), or TLS without certificate checks. */
export type InsecureMode = "plain-http" | "no-cert-check";

const MODE_TEXT: Record<InsecureMode, string> = {
  "plain-http": "plain HTTP",
  "no-cert-check": "TLS without certificate checks",
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
  return level.options?.insecure === "true" ? ["no-cert-check"] : [];
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
  return `${where} (${shown}) uses ${describeModes(modes)}: refused unless the level sets insecure: true`;
}
