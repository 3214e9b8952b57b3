// Needs real kube-apiserver, lab Redfish emulator: the timeout chain against really slow answers.
// Slow BMCs and the timeout chain (core/policy.ts, docs/tuning.md), end to end through the
// power executor the fence stage uses (infra/fence/power.ts: credentials from a real
// Secret in a real kube-apiserver, the Redfish driver, levels and read-back), against the
// lab Redfish emulator with every answer delayed (its `slow` fault), each round on a cold
// driver (discovery and session login included, the worst case):
// - every call 3 s late: the default policy fences (off read back Off);
// - every call 8 s late: the default policy does not (the attempt records a timeout, the
//   BMC never got the off command), and a policy whose call/level/round/lease timeouts are
//   set for it fences.
// Each round runs as the stage executor runs it: the BMC head start (prepare), then the
// round under its own deadline (start + powerOffTimeoutMs + ROUND_RECORD_MARGIN_MS).
import { CoreV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { systemClock } from "../../core/clock.ts";
import type { Action } from "../../core/decision.ts";
import type { Attempt } from "../../core/incident.ts";
import {
  levelsForNode,
  resolvePolicy,
  roundDeadline,
  type FencingPolicySpecInput,
} from "../../core/policy.ts";
import { BmcPowerExecutor } from "../../infra/fence/power.ts";
import { Kube } from "../../infra/kube/client.ts";
import { LabRedfishServer } from "../../harness/emulators/redfish/server.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const NS = "fastfence-system";
const NODE = "node-0";
const USER = "fence";
const PASS = "slow-bmc-pw-4x9";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: `bmc-${NODE}` }, stringData: { username: USER, password: PASS } },
  });
  const bmc = new LabRedfishServer({ username: USER, password: PASS, systemId: NODE, sessions: true });
  await bmc.start();
  scope.add({ stop: () => bmc.stop() });
  return { kube: new Kube(cp.kubeConfig), bmc };
});

/** One fencing round of `spec` (levelMs: the Redfish level's timeoutMs, else its default) with every BMC answer `latencyMs` late. */
async function round(
  latencyMs: number,
  timeouts: FencingPolicySpecInput["timeouts"],
  levelMs?: number,
): Promise<{ attempts: Attempt[]; ms: number; deadlineMs: number }> {
  const { kube, bmc } = env();
  bmc.power = "On";
  bmc.faults.latencyMs = latencyMs;
  const policy = resolvePolicy({
    timeouts,
    fencing: {
      nodes: [
        {
          nodeSelector: { names: [NODE] },
          levels: [
            {
              driver: "redfish",
              address: `redfish+http://127.0.0.1:${bmc.port}${bmc.systemPath}`,
              credentialsSecret: `bmc-${NODE}`,
              insecure: true,
              ...(levelMs !== undefined ? { timeoutMs: levelMs } : {}),
            },
          ],
        },
      ],
    },
  });
  // the action as functions/fence/decide.pure.ts builds it
  const action: Extract<Action, { kind: "powerOff" }> = {
    kind: "powerOff",
    node: NODE,
    incident: `${NODE}-slow`,
    round: 1,
    holder: "fence-slow-test",
    levels: levelsForNode(policy, { name: NODE })!,
    timeoutMs: policy.timeouts.powerOffTimeoutMs,
  };
  const power = new BmcPowerExecutor(kube, NS, systemClock); // a cold driver: nothing cached
  const ac = new AbortController();
  const t0 = Date.now();
  const deadlineMs = roundDeadline(t0, action.timeoutMs) - t0;
  const timer = setTimeout(() => ac.abort(new Error("round deadline")), deadlineMs);
  try {
    void power.prepare(action, ac.signal);
    const attempts = await power.powerOff(action, policy, ac.signal);
    return { attempts, ms: Date.now() - t0, deadlineMs };
  } finally {
    clearTimeout(timer);
    bmc.faults.latencyMs = 0;
  }
}

describe("slow Redfish BMCs and the timeout chain", () => {
  it("every answer 3 s late: the default policy fences within its round", async () => {
    const r = await round(3000, undefined);
    expect(r.attempts).toHaveLength(1);
    expect(r.attempts[0]).toMatchObject({ result: "off-confirmed", readBackState: "Off", level: 0 });
    expect(env().bmc.power).toBe("Off");
    expect(r.ms).toBeGreaterThan(4 * 3000); // discovery, login, off and read-back really waited
    expect(r.ms).toBeLessThan(20_000); // within the default level's timeoutMs
  });

  it("every answer 8 s late: the default policy records a timeout, the off command never sent", async () => {
    const resets = env().bmc.stats.resets.length;
    const r = await round(8000, undefined);
    expect(r.attempts).toHaveLength(1);
    expect(r.attempts[0]).toMatchObject({ result: "timeout", errorCode: "FF_BMC_TIMEOUT", level: 0 });
    expect(env().bmc.power).toBe("On");
    expect(env().bmc.stats.resets.length).toBe(resets);
    expect(r.ms).toBeLessThan(r.deadlineMs); // ended by the level's budget, not by the deadline
  });

  it("every answer 8 s late: a policy set for it (call 10 s, level 45 s, round 60 s, lease 70 s) fences", async () => {
    const timeouts = { bmcCallTimeoutMs: 10_000, powerOffTimeoutMs: 60_000, leaseDurationMs: 70_000 };
    const r = await round(8000, timeouts, 45_000);
    expect(r.attempts).toHaveLength(1);
    expect(r.attempts[0]).toMatchObject({ result: "off-confirmed", readBackState: "Off" });
    expect(env().bmc.power).toBe("Off");
    expect(r.ms).toBeGreaterThan(3 * 8000); // discovery, login, off and read-back really waited
    expect(r.ms).toBeLessThan(45_000);
  });
});
