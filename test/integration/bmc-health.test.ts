// Needs real kube-apiserver, lab Redfish emulator: the hosted fence function's BMC checks.
// The BMC health check end to end (issue 17 item 2): a fence function hosted as in
// production (app/host.ts, HTTP runtime) against a real kube-apiserver with the FencingPolicy
// and a credentials Secret, and the lab Redfish emulator as node-r's BMC; node-u's level
// names a port where nothing answers. Its /metrics endpoint, scraped over HTTP, says:
// - with the right password, node-r's level is up (result ok) and node-u's unreachable;
// - once the Secret holds a wrong password, result="auth-failed" within one check interval
//   (FASTFENCE_BMC_HEALTH_INTERVAL_MS), with fastfence_bmc_up 0 — the alert's metric;
// - with the Secret fixed, ok again.
// The BMC is only ever read: no reset reaches it, it stays On, and no password appears
// on /metrics.
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { hostFunction, type HostedFunction } from "../../app/host.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { createLogger } from "../../infra/log.ts";
import { LabRedfishServer } from "../../harness/emulators/redfish/server.ts";
import { applyFastfenceCrds } from "../../harness/env/apply.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { freePort } from "../../harness/env/ports.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import {
  FASTFENCE_NAMESPACE as NS,
  createBmcSecret,
  createFencingPolicy,
  redfishLevel,
} from "../../harness/kube/fencing-policy.ts";

const INTERVAL_MS = 1500;
const RIGHT = `pw-right-${Math.random().toString(36).slice(2)}`;
const WRONG = `pw-wrong-${Math.random().toString(36).slice(2)}`;

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  const core = kc.makeApiClient(CoreV1Api);
  await applyFastfenceCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  for (const name of ["node-r", "node-u"]) await core.createNode({ body: { metadata: { name } } });
  const bmc = new LabRedfishServer({
    username: "fence",
    password: RIGHT,
    systemId: "node-r",
    sessions: true,
  });
  await bmc.start();
  scope.add({ stop: () => bmc.stop() });
  await createBmcSecret(core, "node-r", "fence", RIGHT);
  await createBmcSecret(core, "node-u", "fence", RIGHT);
  const silent = await freePort(); // nothing listens here
  await createFencingPolicy(kc.makeApiClient(CustomObjectsApi), {
    timeouts: { bmcCallTimeoutMs: 1000 },
    fencing: {
      nodes: [
        { nodeSelector: { names: ["node-r"] }, levels: [redfishLevel("127.0.0.1", bmc.port, "node-r")] },
        { nodeSelector: { names: ["node-u"] }, levels: [redfishLevel("127.0.0.1", silent, "node-u")] },
      ],
    },
  });
  const port = await freePort();
  const fence: HostedFunction = await hostFunction({
    name: "fence",
    mode: { http: port, host: "127.0.0.1" },
    config: loadRuntimeConfig({
      FASTFENCE_NAMESPACE: NS,
      FASTFENCE_REPLICA: "fence-health-test",
      FASTFENCE_HTTP_AUTH: "none",
      FASTFENCE_BMC_HEALTH_INTERVAL_MS: String(INTERVAL_MS),
    }),
    kubeConfig: kc,
    log: createLogger("fence", { level: process.env.FASTFENCE_TEST_LOG ?? "warn" }),
  });
  scope.add({ stop: () => fence.stop() });
  return { core, bmc, port };
});

/** GET /metrics of the hosted fence function. */
async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${env().port}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

/** The value of one series, or undefined when /metrics has none. */
function value(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function waitForSeries(series: string, want: number, withinMs: number): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (value(await scrape(), series) === want) return Date.now() - start;
    if (Date.now() - start > withinMs) throw new Error(`${series} not ${want} within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const R = 'node="node-r",level="0",driver="redfish"';
const U = 'node="node-u",level="0",driver="redfish"';

async function setPassword(password: string): Promise<void> {
  const { core } = env();
  const s = await core.readNamespacedSecret({ namespace: NS, name: "bmc-node-r" });
  s.data = { ...s.data, password: Buffer.from(password).toString("base64") };
  await core.replaceNamespacedSecret({ namespace: NS, name: "bmc-node-r", body: s });
}

// One story in three steps, in the order written also under --sequence.shuffle: the BMC up,
// then a wrong password in the Secret (auth-failed), then the Secret fixed (ok again).
describe("BMC health check of a hosted fence function", { shuffle: false }, () => {
  it("reports node-r's BMC up and node-u's unreachable", async () => {
    // the first pass starts within one interval of the start
    await waitForSeries(`fastfence_bmc_check_result{${R},result="ok"}`, 1, 2 * INTERVAL_MS + 5000);
    await waitForSeries(`fastfence_bmc_check_result{${U},result="unreachable"}`, 1, 2 * INTERVAL_MS + 5000);
    const t = await scrape();
    expect(value(t, `fastfence_bmc_up{${R}}`)).toBe(1);
    expect(value(t, `fastfence_bmc_up{${U}}`)).toBe(0);
    expect(
      value(t, `fastfence_bmc_calls_total{driver="redfish",operation="status",result="ok"}`),
    ).toBeGreaterThan(0);
  });

  it("says auth-failed within one check interval of a wrong password in the Secret", async () => {
    await setPassword(WRONG);
    // one interval (±10 % jitter) plus the check itself, which answers at once here
    const tookMs = await waitForSeries(
      `fastfence_bmc_check_result{${R},result="auth-failed"}`,
      1,
      1.1 * INTERVAL_MS + 1500,
    );
    console.log(`auth-failed on /metrics ${tookMs} ms after the Secret changed (interval ${INTERVAL_MS} ms)`);
    const t = await scrape();
    expect(value(t, `fastfence_bmc_up{${R}}`)).toBe(0);
    expect(value(t, `fastfence_bmc_check_result{${R},result="ok"}`)).toBe(undefined);
    expect(
      value(t, `fastfence_bmc_calls_total{driver="redfish",operation="prepare",result="auth-failed"}`),
    ).toBeGreaterThan(0);
    expect(t).not.toContain(WRONG);
    expect(t).not.toContain(RIGHT);
    expect(env().bmc.stats.authFailures).toBeGreaterThan(0);
  });

  it("is ok again once the Secret is fixed, and never powered anything", async () => {
    await setPassword(RIGHT);
    await waitForSeries(`fastfence_bmc_check_result{${R},result="ok"}`, 1, 1.1 * INTERVAL_MS + 1500);
    expect(value(await scrape(), `fastfence_bmc_up{${R}}`)).toBe(1);
    expect(env().bmc.stats.resets).toEqual([]);
    expect(env().bmc.power).toBe("On");
  });
});
