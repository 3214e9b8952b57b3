// Fence-agent parameters that turn security off make a level insecure (core/level-security.ts,
// core/fence-agent-security.ts): TLS without certificate checks (ssl_insecure), SSL 3.0
// (notls), plain IPMI 1.5 (lanplus off, also by the agent's own default; cipher 0), telnet
// instead of SSH, SNMP v1/v2c or v3 without privacy, HTTP where the agent speaks HTTPS only
// with ssl. Such a level is refused by the policy without `insecure: true`, with a message
// naming the parameter. On 6f7efbe every one of these counted as secure. Plain data.
import { describe, expect, it } from "vitest";
import { insecureLevelProblem, insecureModes } from "../../../core/level-security.ts";
import { FencingPolicySpecSchema } from "../../../core/policy.ts";

const fa = (q: string) => `fence-agent://10.0.0.5?${q}`;

describe("insecure fence-agent parameters", () => {
  it.each([
    // TLS without certificate checks
    [fa("agent=fence_redfish&ssl_insecure=1"), ["no-cert-check"]],
    [fa("agent=fence_redfish&ssl-insecure=yes"), ["no-cert-check"]],
    [fa("agent=fence_ilo&notls=1"), ["weak-tls"]],
    // plain IPMI 1.5: lanplus off, explicitly or by the agent's default
    [fa("agent=fence_ipmilan&lanplus=0"), ["plaintext"]],
    [fa("agent=fence_ipmilan"), ["plaintext"]],
    [fa("agent=fence_idrac"), ["plaintext"]],
    [fa("agent=fence_ilo4&lanplus=off"), ["plaintext"]],
    [fa("agent=fence_ipmilan&lanplus=1&cipher=0"), ["plaintext"]],
    // telnet instead of SSH
    [fa("agent=fence_apc&plug=3"), ["plaintext"]],
    [fa("agent=fence_apc&plug=3&ssh=0"), ["plaintext"]],
    [fa("agent=fence_raritan&plug=3"), ["plaintext"]],
    // SNMP without privacy
    [fa("agent=fence_apc_snmp&plug=3"), ["plaintext"]],
    [fa("agent=fence_ifmib&plug=3&snmp_version=2c"), ["plaintext"]],
    [fa("agent=fence_apc_snmp&plug=3&snmp_version=3&snmp_sec_level=authNoPriv"), ["plaintext"]],
    // HTTP: ssl turned off, or an agent that needs ssl to speak HTTPS
    [fa("agent=fence_redfish&ssl=0"), ["plaintext"]],
    [fa("agent=fence_vmware_rest&plug=vm1"), ["plaintext"]],
    // both
    [fa("agent=fence_ipmilan&lanplus=0&ssl_insecure=1"), ["no-cert-check", "plaintext"]],
  ] as const)("%s → %j", (address, want) => {
    expect(insecureModes({ address })).toEqual(want);
  });

  it.each([
    fa("agent=fence_ipmilan&lanplus=1"),
    fa("agent=fence_ipmilan&lanplus=true&cipher=17"),
    fa("agent=fence_ilo3"),
    fa("agent=fence_redfish"),
    fa("agent=fence_redfish&ssl_insecure=0"),
    fa("agent=fence_apc&plug=3&ssh=1"),
    fa("agent=fence_apc&plug=3&secure=on"),
    fa("agent=fence_apc_snmp&plug=3&snmp_version=3&snmp_sec_level=authPriv"),
    fa("agent=fence_vmware_rest&plug=vm1&ssl=1"),
    fa("agent=fence_vmware_rest&plug=vm1&ssl_secure=1"),
    fa("agent=fence_virsh&plug=vm1"),
  ])("%s is secure", (address) => {
    expect(insecureModes({ address })).toEqual([]);
  });

  it("the refusal names the parameter", () => {
    expect(insecureLevelProblem({ address: fa("agent=fence_ipmilan&lanplus=0") }, "level 1")).toBe(
      `level 1 (${fa("agent=fence_ipmilan&lanplus=0")}) uses plaintext (lanplus=0: IPMI 1.5, no encryption): refused unless the level sets insecure: true`,
    );
    expect(insecureLevelProblem({ address: fa("agent=fence_ipmilan") }, "level 1")).toContain(
      "lanplus unset: fence_ipmilan defaults to IPMI 1.5",
    );
    expect(insecureLevelProblem({ address: fa("agent=fence_redfish&ssl_insecure=1") }, "x")).toContain(
      "ssl_insecure=1",
    );
    expect(
      insecureLevelProblem({ address: fa("agent=fence_ipmilan&lanplus=0"), insecure: true }, "x"),
    ).toBeUndefined();
  });

  it("the FencingPolicy refuses such a level without insecure: true, naming the parameter", () => {
    const spec = (level: Record<string, unknown>) => ({
      fencing: {
        nodes: [
          {
            nodeSelector: { names: ["b"] },
            levels: [{ driver: "fence-agent", credentialsSecret: "s", ...level }],
          },
        ],
      },
    });
    const issues = (s: unknown) =>
      (FencingPolicySpecSchema.safeParse(s).error?.issues ?? []).map(
        (i) => `${i.path.join(".")}: ${i.message}`,
      );
    const address = fa("agent=fence_redfish&ssl_insecure=1");
    expect(issues(spec({ address }))).toEqual([
      `fencing.nodes.0.levels.0.insecure: this fencing level (${address}) uses TLS without certificate checks (ssl_insecure=1): refused unless the level sets insecure: true`,
    ]);
    expect(issues(spec({ address, insecure: true }))).toEqual([]);
    expect(issues(spec({ address: fa("agent=fence_ipmilan&lanplus=1") }))).toEqual([]);
  });
});
