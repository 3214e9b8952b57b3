// Insecure BMC transports only by a level's own explicit setting (issue 18, Build 3): which
// levels are insecure, the policy refusing one without `insecure: true` with an error naming
// the level, a discovered host needing disableCertificateVerification, and the power
// executor refusing such a level even if it got past the reader.
import { describe, expect, it } from "vitest";
import { insecureLevelProblem, insecureModes } from "../../../core/level-security.ts";
import { FencingPolicySpecSchema, resolvePolicy, type ResolvedFencingLevel } from "../../../core/policy.ts";
import { levelFromHost, settingsFromHost } from "../../../infra/bmc/metal3.ts";
import { BmcPowerExecutor } from "../../../infra/fence/power.ts";
import { ManualClock } from "../../../core/clock.ts";
import { kubeAnswering } from "../../scenarios/memory-adapters.ts";

const HTTP = "redfish+http://10.0.0.1/redfish/v1/Systems/1";
const HTTPS = "redfish://10.0.0.1/redfish/v1/Systems/1";

describe("insecureModes", () => {
  it.each([
    [HTTP, undefined, ["plain-http"]],
    ["idrac-redfish+http://10.0.0.1", undefined, ["plain-http"]],
    ["REDFISH+HTTP://10.0.0.1", undefined, ["plain-http"]],
    [HTTP, { insecure: "true" }, ["plain-http"]],
    [HTTPS, { insecure: "true" }, ["no-cert-check"]],
    ["redfish+https://10.0.0.1", undefined, []],
    [HTTPS, { insecure: "false" }, []],
    ["ipmi://10.0.0.1", undefined, []],
    ["fence-agent://10.0.0.1?agent=fence_apc&ssh=1", { insecure: "true" }, ["no-cert-check"]],
    ["fence-agent://10.0.0.1?agent=fence_apc", { insecure: "true" }, ["no-cert-check", "plaintext"]],
  ] as const)("%s %j → %j", (address, options, want) => {
    expect(insecureModes({ address, ...(options ? { options } : {}) })).toEqual(want);
  });
  it("allowed only with insecure: true", () => {
    expect(insecureLevelProblem({ address: HTTP }, "level 1")).toBe(
      `level 1 (${HTTP}) uses plain HTTP: refused unless the level sets insecure: true`,
    );
    expect(insecureLevelProblem({ address: HTTP, insecure: false }, "x")).toBeDefined();
    expect(insecureLevelProblem({ address: HTTP, insecure: true }, "x")).toBeUndefined();
    expect(insecureLevelProblem({ address: HTTPS }, "x")).toBeUndefined();
  });
});

const policyWith = (level: Record<string, unknown>) => ({
  fencing: {
    nodes: [
      {
        nodeSelector: { names: ["a"] },
        levels: [{ driver: "ipmi", address: "ipmi://10.0.0.9", credentialsSecret: "s" }],
      },
      { nodeSelector: { names: ["b"] }, levels: [{ driver: "redfish", credentialsSecret: "s", ...level }] },
    ],
  },
});

describe("the FencingPolicy", () => {
  it("refuses plain HTTP or no certificate checks without insecure: true, naming the level", () => {
    const issues = (spec: unknown) =>
      (FencingPolicySpecSchema.safeParse(spec).error?.issues ?? []).map(
        (i) => `${i.path.join(".")}: ${i.message}`,
      );
    expect(issues(policyWith({ address: HTTP }))).toEqual([
      `fencing.nodes.1.levels.0.insecure: this fencing level (${HTTP}) uses plain HTTP: refused unless the level sets insecure: true`,
    ]);
    expect(issues(policyWith({ address: HTTPS, options: { insecure: "true" } }))).toEqual([
      `fencing.nodes.1.levels.0.insecure: this fencing level (${HTTPS}) uses TLS without certificate checks: refused unless the level sets insecure: true`,
    ]);
    expect(() => resolvePolicy(policyWith({ address: HTTP }))).toThrow();
  });
  it("allows them with insecure: true, and HTTPS with checks without it", () => {
    expect(
      resolvePolicy(policyWith({ address: HTTP, insecure: true })).fencing.nodes[1]!.levels[0]!.insecure,
    ).toBe(true);
    expect(
      resolvePolicy(policyWith({ address: HTTPS })).fencing.nodes[1]!.levels[0]!.insecure,
    ).toBeUndefined();
  });
});

describe("a level discovered from a BareMetalHost", () => {
  const host = (address: string, disableCertificateVerification?: boolean) => ({
    metadata: { name: "h", namespace: "m3" },
    spec: {
      bmc: {
        address,
        credentialsName: "h-bmc",
        ...(disableCertificateVerification !== undefined ? { disableCertificateVerification } : {}),
      },
    },
  });
  it("plain HTTP needs the host's disableCertificateVerification", () => {
    const h = host(HTTP);
    expect(() => levelFromHost(settingsFromHost("a", h), h)).toThrow(
      /BareMetalHost m3\/h spec\.bmc\.address .* uses plain HTTP.*disableCertificateVerification/,
    );
    const ok = host(HTTP, true);
    expect(levelFromHost(settingsFromHost("a", ok), ok)).toMatchObject({
      insecure: true,
      options: { insecure: "true" },
    });
    const tls = host(HTTPS, false);
    expect(levelFromHost(settingsFromHost("a", tls), tls).insecure).toBeUndefined();
  });
});

describe("the power executor", () => {
  it("refuses an insecure level without insecure: true before reading its Secret", async () => {
    let reads = 0;
    const kube = kubeAnswering(async () => (reads++, { data: {} }));
    const power = new BmcPowerExecutor(kube, "ff", new ManualClock(0));
    const level: ResolvedFencingLevel = {
      driver: "redfish",
      address: HTTP,
      credentialsSecret: "s",
      timeoutMs: 1000,
    };
    const attempts = await power.powerOff(
      {
        kind: "powerOff",
        node: "b",
        incident: "i",
        round: 1,
        holder: "fence-0",
        levels: [level],
        timeoutMs: 5000,
      },
      resolvePolicy({}),
      new AbortController().signal,
    );
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ result: "error", errorCode: "FF_INVALID_CONFIG" });
    expect(attempts[0]!.message).toContain("uses plain HTTP: refused unless the level sets insecure: true");
    expect(reads).toBe(0);
  });
});
