// Needs real kube-apiserver, lab Redfish emulator, ipmi_sim: passwords changed on live BMCs.
// Rotated BMC credentials (issue 15 item 5), end to end through the power executor the
// fence and recover stages use (infra/fence/power.ts): credentials Secrets in a real
// kube-apiserver, one BmcPowerExecutor instance for the whole file (no restart), and two
// real BMCs: the lab Redfish emulator (session auth; a password change over its
// AccountService ends its sessions) and OpenIPMI's ipmi_sim (the password changed with
// ipmitool's Set User Password). For each BMC:
// - password A in the BMC and the Secret: prepare + powerOff read back Off (one Secret
//   read for both), powerOn turns it back on;
// - the BMC's password changed to B, then the Secret: the next powerOff and powerOn use B;
// - the Secret set to a wrong password: the next powerOff is an "auth-failed" attempt whose
//   message says the BMC rejected the credentials from Secret <namespace/name>, and the
//   machine stays on; powerOn fails naming the Secret too;
// - the Secret fixed (B again): the next powerOff reads back Off.
// Outcomes are asserted on the BMCs' own power state (the emulator's PowerState and reset
// log; ipmi_sim's simulated node process and ipmitool), never only on the attempts, and no
// password appears in any attempt, error or log line.
import { execFile } from "node:child_process";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { describe, expect, it, vi } from "vitest";
import { systemClock } from "../../core/clock.ts";
import type { Action } from "../../core/decision.ts";
import type { Attempt } from "../../core/incident.ts";
import { levelsForNode, resolvePolicy } from "../../core/policy.ts";
import { BmcPowerExecutor } from "../../infra/fence/power.ts";
import { Kube } from "../../infra/kube/client.ts";
import { createLogger } from "../../infra/log.ts";
import { LabRedfishServer } from "../../harness/emulators/redfish/server.ts";
import { startIpmiSim } from "../../harness/env/bmc-ipmi-sim.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { ipmitoolArgs } from "../../harness/env/ipmi-sim-config.ts";
import { waitUntil } from "../../harness/env/wait.ts";
import { withEnv } from "../../harness/env/with-env.ts";

const pexec = promisify(execFile);
const NS = "fastfence-system";
const USER = "fence";
// ipmi_sim: at most 16 bytes, no spaces or quotes
const PW_A = "RotA-7f3kq2";
const PW_B = "RotB-9zLm4x";
const WRONG = "RotW-0pXv8c";

const logged: string[] = [];
const log = createLogger("bmc-rotation-test", {
  level: "trace",
  destination: new Writable({
    write(chunk, _enc, cb) {
      logged.push(String(chunk));
      cb();
    },
  }),
});

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  for (const name of ["bmc-redfish", "bmc-ipmi"])
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name }, stringData: { username: USER, password: PW_A } },
    });
  const redfish = new LabRedfishServer({
    username: USER,
    password: PW_A,
    systemId: "node-r",
    sessions: true,
  });
  await redfish.start();
  scope.add({ stop: () => redfish.stop() });
  const sim = await startIpmiSim({ username: USER, password: PW_A });
  scope.add({ stop: () => sim.stop() });
  const kube = new Kube(cp.kubeConfig);
  const policy = resolvePolicy({
    fencing: {
      nodes: [
        {
          nodeSelector: { names: ["node-r"] },
          levels: [
            {
              driver: "redfish",
              address: `redfish+http://127.0.0.1:${redfish.port}${redfish.systemPath}`,
              credentialsSecret: "bmc-redfish",
              insecure: true,
            },
          ],
        },
        {
          nodeSelector: { names: ["node-i"] },
          levels: [
            { driver: "ipmi", address: `ipmi://127.0.0.1:${sim.port}`, credentialsSecret: "bmc-ipmi" },
          ],
        },
      ],
    },
  });
  // one executor for the whole file: rotation must work without a restart
  const power = new BmcPowerExecutor(kube, NS, systemClock, undefined, { log });
  const secretReads = vi.spyOn(kube, "read");
  return { core, kube, redfish, sim, policy, power, secretReads };
});

/** Sets the Secret's password as an operator would (kubectl apply of the new value). */
async function setSecret(name: string, password: string): Promise<void> {
  const { core } = env();
  const s = await core.readNamespacedSecret({ namespace: NS, name });
  s.data = { ...s.data, password: Buffer.from(password).toString("base64") };
  await core.replaceNamespacedSecret({ namespace: NS, name, body: s });
}

let round = 0;
function action(node: string): Extract<Action, { kind: "powerOff" }> {
  const { policy } = env();
  return {
    kind: "powerOff",
    node,
    incident: `${node}-rotation`,
    round: ++round,
    holder: "fence-rotation-test",
    levels: levelsForNode(policy, { name: node })!,
    timeoutMs: policy.timeouts.powerOffTimeoutMs,
  };
}

/** One fencing round as the stage executor runs it (prepare, then the power-off); counts Secret reads. */
async function powerOff(node: string): Promise<{ attempts: Attempt[]; secretReads: number }> {
  const { power, policy, secretReads } = env();
  const before = secretReads.mock.calls.filter(([what]) => what.startsWith("read secret")).length;
  const a = action(node);
  const signal = new AbortController().signal;
  void power.prepare(a, signal);
  const attempts = await power.powerOff(a, policy, signal);
  const after = secretReads.mock.calls.filter(([what]) => what.startsWith("read secret")).length;
  return { attempts, secretReads: after - before };
}

function powerOn(node: string): Promise<void> {
  const { power, policy } = env();
  const levels = levelsForNode(policy, { name: node })!;
  return power.powerOn(
    { kind: "powerOn", node, incident: `${node}-rotation`, levels },
    policy,
    new AbortController().signal,
  );
}

async function expectRejected(node: string, secret: string, machineOn: () => Promise<boolean>) {
  const r = await powerOff(node);
  expect(r.attempts).toHaveLength(1);
  expect(r.attempts[0]).toMatchObject({ result: "auth-failed", errorCode: "FF_BMC_AUTH_FAILED" });
  expect(r.attempts[0]!.message).toMatch(
    new RegExp(`^BMC \\S+ rejected the credentials from Secret ${NS}/${secret}$`),
  );
  expect(await machineOn()).toBe(true);
  const err = await powerOn(node).then(
    () => new Error("powerOn succeeded with a wrong password"),
    (e: unknown) => e as Error,
  );
  expect(err.message).toContain(`rejected the credentials from Secret ${NS}/${secret}`);
  for (const text of [JSON.stringify(r.attempts), err.message, JSON.stringify(err)])
    for (const pw of [PW_A, PW_B, WRONG]) expect(text).not.toContain(pw);
}

const ROTATION = "rotated BMC credentials are used by the next power action, without a restart";
// In the order written, also under --sequence.shuffle: the last case reads the log the two
// rotations before it wrote.
describe(ROTATION, { shuffle: false }, () => {
  it("Redfish (lab emulator, session auth, password changed over AccountService)", async () => {
    const { redfish } = env();
    const isOn = async () => redfish.power === "On";

    let r = await powerOff("node-r");
    expect(r.attempts).toMatchObject([{ result: "off-confirmed", readBackState: "Off" }]);
    expect(redfish.power).toBe("Off");
    expect(r.secretReads).toBe(1); // the prepare and its power-off share one read
    await powerOn("node-r");
    await waitUntil("redfish on", isOn, 5000);

    // the BMC's password changes (its sessions end), then the Secret follows
    const basic = `Basic ${Buffer.from(`${USER}:${PW_A}`).toString("base64")}`;
    const patched = await fetch(`${redfish.url}/redfish/v1/AccountService/Accounts/1`, {
      method: "PATCH",
      headers: { Authorization: basic, "Content-Type": "application/json" },
      body: JSON.stringify({ Password: PW_B }),
    });
    expect(patched.status).toBe(204);
    await setSecret("bmc-redfish", PW_B);
    r = await powerOff("node-r");
    expect(r.attempts).toMatchObject([{ result: "off-confirmed", readBackState: "Off" }]);
    expect(redfish.power).toBe("Off");
    await powerOn("node-r");
    await waitUntil("redfish on", isOn, 5000);

    // a wrong password in the Secret: reported, the machine untouched
    await setSecret("bmc-redfish", WRONG);
    const resets = redfish.stats.resets.length;
    await expectRejected("node-r", "bmc-redfish", isOn);
    expect(redfish.stats.resets.length).toBe(resets);

    // fixed: the next action fences
    await setSecret("bmc-redfish", PW_B);
    r = await powerOff("node-r");
    expect(r.attempts).toMatchObject([{ result: "off-confirmed", readBackState: "Off" }]);
    expect(redfish.power).toBe("Off");
  });

  it("IPMI (ipmi_sim, password changed with Set User Password)", async () => {
    const { sim } = env();
    const ipmitool = async (password: string, args: string[]) =>
      (
        await pexec("ipmitool", [...ipmitoolArgs(sim.host, sim.port, USER, 3), ...args], {
          env: { ...process.env, IPMI_PASSWORD: password },
          timeout: 15_000,
        })
      ).stdout;
    const isOn = async () => sim.nodeRunning();

    let r = await powerOff("node-i");
    expect(r.attempts).toMatchObject([{ result: "off-confirmed", readBackState: "Off" }]);
    expect(r.secretReads).toBe(1);
    await waitUntil("simulated node gone", async () => !sim.nodeRunning(), 10_000);
    await powerOn("node-i");
    await waitUntil("simulated node running", isOn, 10_000);

    await ipmitool(PW_A, ["user", "set", "password", "2", PW_B]);
    await expect(ipmitool(PW_A, ["chassis", "power", "status"])).rejects.toThrow();
    await setSecret("bmc-ipmi", PW_B);
    r = await powerOff("node-i");
    expect(r.attempts).toMatchObject([{ result: "off-confirmed", readBackState: "Off" }]);
    await waitUntil("simulated node gone", async () => !sim.nodeRunning(), 10_000);
    expect(await ipmitool(PW_B, ["chassis", "power", "status"])).toMatch(/Power is off/);
    await powerOn("node-i");
    await waitUntil("simulated node running", isOn, 10_000);

    await setSecret("bmc-ipmi", WRONG);
    await expectRejected("node-i", "bmc-ipmi", isOn);
    expect(await ipmitool(PW_B, ["chassis", "power", "status"])).toMatch(/Power is on/);

    await setSecret("bmc-ipmi", PW_B);
    r = await powerOff("node-i");
    expect(r.attempts).toMatchObject([{ result: "off-confirmed", readBackState: "Off" }]);
    await waitUntil("simulated node gone", async () => !sim.nodeRunning(), 10_000);
    expect(await ipmitool(PW_B, ["chassis", "power", "status"])).toMatch(/Power is off/);
  });

  it("the log says when a driver was replaced, and holds no credential", () => {
    const all = logged.join("\n");
    expect(all).toContain("BMC credentials Secret changed");
    for (const pw of [PW_A, PW_B, WRONG]) expect(all).not.toContain(pw);
  });
});
