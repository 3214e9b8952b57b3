// The BMC health check (infra/fence/health.ts) and the BMC call metrics (infra/bmc/
// metered.ts), with a fake Kube holding the Secrets and fake drivers against fake BMCs: a
// pass reads every node's levels (the policy's, by name and by label), logs in and reads
// the power state with a driver of its own that it closes, never powers anything, and sets
// fastfence_bmc_up and fastfence_bmc_check_result per node and level — auth-failed for a
// rejected password, unreachable for a silent BMC, credentials for a missing Secret — one
// result series per level, replaced when the result changes and removed with the level.
import { describe, expect, it } from "vitest";
import { Registry } from "prom-client";
import { ManualClock } from "../../../core/clock.ts";
import { resolvePolicy } from "../../../core/policy.ts";
import type { BmcCredentials } from "../../../infra/bmc/credentials.ts";
import {
  BmcAuthError,
  BmcUnreachableError,
  type BmcCallOptions,
  type BmcDriver,
} from "../../../infra/bmc/driver.ts";
import { createBmcMetrics, meteredDriver } from "../../../infra/bmc/metered.ts";
import { startBmcHealthCheck } from "../../../infra/fence/health.ts";
import { KubeApiError } from "../../../infra/kube/client.ts";
import { createLogger } from "../../../infra/log.ts";
import { kubeAnswering } from "../../scenarios/memory-adapters.ts";

const NS = "fastfence-system";
const b64 = (s: string) => Buffer.from(s).toString("base64");

interface FakeBmc {
  password: string;
  reachable: boolean;
  commands: string[];
}

class FakeDriver implements BmcDriver {
  readonly kind = "redfish";
  readonly target: string;
  closed = false;
  private readonly bmc: FakeBmc;
  private readonly creds: BmcCredentials;
  constructor(bmc: FakeBmc, creds: BmcCredentials, address: string) {
    this.bmc = bmc;
    this.creds = creds;
    this.target = address;
  }
  private check(): void {
    if (!this.bmc.reachable) throw new BmcUnreachableError(this.target, "no answer");
    if (this.creds.password !== this.bmc.password) throw new BmcAuthError(this.target);
  }
  async prepare(_o: BmcCallOptions) {
    this.bmc.commands.push("login");
    this.check();
  }
  async status(_o: BmcCallOptions) {
    this.bmc.commands.push("status");
    this.check();
    return { state: "on" as const, raw: "On" };
  }
  async off(_o: BmcCallOptions) {
    this.bmc.commands.push("off");
  }
  async on(_o: BmcCallOptions) {
    this.bmc.commands.push("on");
  }
  async close() {
    this.closed = true;
  }
}

function setup() {
  const secrets = new Map<string, string>([
    [`${NS}/bmc-a`, "right"],
    [`${NS}/bmc-b`, "right"],
    [`${NS}/bmc-b-ipmi`, "right"],
  ]);
  const bmcs = new Map<string, FakeBmc>();
  const bmcFor = (address: string) => {
    let b = bmcs.get(address);
    if (!b) bmcs.set(address, (b = { password: "right", reachable: true, commands: [] }));
    return b;
  };
  const kube = kubeAnswering(async (what: string, fn: (apis: unknown) => Promise<unknown>) =>
    fn({
      core: {
        readNamespacedSecret: async ({ name, namespace }: { name: string; namespace: string }) => {
          const pw = secrets.get(`${namespace}/${name}`);
          if (pw === undefined) throw new KubeApiError(404, what, { message: "not found" }, undefined);
          return { data: { username: b64("fence"), password: b64(pw) } };
        },
      },
    }),
  );
  const policy = resolvePolicy({
    fencing: {
      nodes: [
        {
          nodeSelector: { names: ["node-a"] },
          levels: [
            {
              driver: "redfish",
              address: "redfish+http://bmc-a/",
              credentialsSecret: "bmc-a",
              insecure: true,
            },
          ],
        },
        {
          nodeSelector: { matchLabels: { "node-restriction.kubernetes.io/bmc": "b" } },
          levels: [
            {
              driver: "redfish",
              address: "redfish+http://bmc-b/",
              credentialsSecret: "bmc-b",
              insecure: true,
            },
            { driver: "ipmi", address: "ipmi://bmc-b-ipmi", credentialsSecret: "bmc-b-ipmi" },
          ],
        },
      ],
    },
  });
  const nodes: { name: string; labels: Record<string, string> }[] = [
    { name: "node-a", labels: {} },
    { name: "node-b", labels: { "node-restriction.kubernetes.io/bmc": "b" } },
    { name: "node-c", labels: {} }, // no levels: nothing to check
  ];
  const registry = new Registry();
  const metrics = createBmcMetrics(registry);
  const drivers: FakeDriver[] = [];
  const health = startBmcHealthCheck({
    kube,
    secretNamespace: NS,
    nodes: { list: async () => nodes },
    policy: async () => policy,
    intervalMs: 60_000,
    clock: new ManualClock(0),
    log: createLogger("health-test", { level: "silent" }),
    metrics,
    driverFor: (address, creds) => {
      const d = new FakeDriver(bmcFor(address), creds, address);
      drivers.push(d);
      return d;
    },
  });
  const text = async () => registry.metrics();
  return { health, secrets, bmcFor, nodes, drivers, text };
}

const line = (text: string, name: string, labels: string) =>
  text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));

describe("BMC health check", () => {
  it("reads every node's levels with a driver of its own, closes it, and never powers anything", async () => {
    const s = setup();
    const reports = await s.health.pass();
    await s.health.stop();
    expect(reports.map((r) => `${r.node}/${r.level}/${r.driver}/${r.result}`).sort()).toEqual([
      "node-a/0/redfish/ok",
      "node-b/0/redfish/ok",
      "node-b/1/ipmi/ok",
    ]);
    expect(s.drivers).toHaveLength(3);
    expect(s.drivers.every((d) => d.closed)).toBe(true);
    for (const a of ["redfish+http://bmc-a/", "redfish+http://bmc-b/", "ipmi://bmc-b-ipmi"])
      expect(s.bmcFor(a).commands).toEqual(["login", "status"]);
    const t = await s.text();
    expect(line(t, "fastfence_bmc_up", 'node="node-a",level="0",driver="redfish"')).toMatch(/ 1$/);
    expect(line(t, "fastfence_bmc_up", 'node="node-b",level="1",driver="ipmi"')).toMatch(/ 1$/);
    expect(
      line(t, "fastfence_bmc_check_result", 'node="node-a",level="0",driver="redfish",result="ok"'),
    ).toMatch(/ 1$/);
    expect(t).not.toContain("node-c");
    // the plain-HTTP Redfish levels (allowed by insecure: true) are exported as insecure, IPMI is not
    expect(
      line(t, "fastfence_bmc_insecure", 'node="node-a",level="0",driver="redfish",mode="plain-http"'),
    ).toMatch(/ 1$/);
    expect(t).not.toMatch(/fastfence_bmc_insecure\{[^}]*driver="ipmi"/);
    expect(reports.find((r) => r.driver === "ipmi")?.insecure).toEqual([]);
    // every status read and login is counted by driver, operation and result
    expect(line(t, "fastfence_bmc_calls_total", 'driver="redfish",operation="status",result="ok"')).toMatch(
      / 2$/,
    );
    expect(line(t, "fastfence_bmc_calls_total", 'driver="ipmi",operation="prepare",result="ok"')).toMatch(
      / 1$/,
    );
    expect(t).toContain('fastfence_bmc_call_duration_seconds_count{driver="ipmi",operation="status"} 1');
  });

  it("tells a rejected password from a silent BMC and a missing Secret, one result series per level", async () => {
    const s = setup();
    await s.health.pass();
    s.secrets.set(`${NS}/bmc-a`, "wrong"); // an operator's typo
    s.bmcFor("redfish+http://bmc-b/").reachable = false;
    s.secrets.delete(`${NS}/bmc-b-ipmi`);
    const reports = await s.health.pass();
    await s.health.stop();
    expect(reports.map((r) => `${r.node}/${r.level}/${r.result}`).sort()).toEqual([
      "node-a/0/auth-failed",
      "node-b/0/unreachable",
      "node-b/1/credentials",
    ]);
    const t = await s.text();
    expect(line(t, "fastfence_bmc_up", 'node="node-a",level="0",driver="redfish"')).toMatch(/ 0$/);
    expect(
      line(t, "fastfence_bmc_check_result", 'node="node-a",level="0",driver="redfish",result="auth-failed"'),
    ).toMatch(/ 1$/);
    // the ok series of that level is gone: one result per level at a time
    expect(
      line(t, "fastfence_bmc_check_result", 'node="node-a",level="0",driver="redfish",result="ok"'),
    ).toBe(undefined);
    expect(
      line(t, "fastfence_bmc_check_result", 'node="node-b",level="0",driver="redfish",result="unreachable"'),
    ).toMatch(/ 1$/);
    expect(
      line(t, "fastfence_bmc_check_result", 'node="node-b",level="1",driver="ipmi",result="credentials"'),
    ).toMatch(/ 1$/);
    expect(
      line(t, "fastfence_bmc_calls_total", 'driver="redfish",operation="prepare",result="auth-failed"'),
    ).toMatch(/ 1$/);
    // no password in any series
    expect(t).not.toMatch(/right|wrong/);
  });

  it("drops the series of a node that no longer has levels", async () => {
    const s = setup();
    await s.health.pass();
    s.nodes.splice(0, 1); // node-a deleted
    await s.health.pass();
    await s.health.stop();
    const t = await s.text();
    expect(t).not.toMatch(/fastfence_bmc_(up|check_result)\{node="node-a"/);
    expect(t).toMatch(/fastfence_bmc_up\{node="node-b"/);
  });
});

describe("meteredDriver", () => {
  it("passes every outcome through unchanged and counts it", async () => {
    const registry = new Registry();
    const m = createBmcMetrics(registry);
    const bmc = { password: "x", reachable: true, commands: [] as string[] };
    const d = meteredDriver(new FakeDriver(bmc, { username: "u", password: "y" }, "t"), "redfish", m);
    await expect(d.status({ timeoutMs: 10 })).rejects.toBeInstanceOf(BmcAuthError);
    await d.off({ timeoutMs: 10 });
    const t = await registry.metrics();
    expect(t).toContain(
      'fastfence_bmc_calls_total{driver="redfish",operation="status",result="auth-failed"} 1',
    );
    expect(t).toContain('fastfence_bmc_calls_total{driver="redfish",operation="off",result="ok"} 1');
    expect(bmc.commands).toEqual(["status", "off"]);
  });
});
