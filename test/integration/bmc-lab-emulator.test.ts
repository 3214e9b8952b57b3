// Needs real lab Redfish emulator, ipmi_sim, ipmitool: power-off really kills a process group.
// The lab Redfish emulator's own behaviour (its power-off really kills the simulated node;
// the "lying" and "unreachable" switches), and the native IPMI driver's every reading
// cross-checked with ipmitool against ipmi_sim.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FastfenceError } from "../../core/errors.ts";
import { powerOffAndConfirm } from "../../infra/bmc/driver.ts";
import { IpmiDriver } from "../../infra/bmc/ipmi/driver.ts";
import { RedfishDriver } from "../../infra/bmc/redfish.ts";
import { startIpmiSim, type IpmiSim } from "../../harness/env/bmc-ipmi-sim.ts";
import { startLabRedfish, type LabRedfish } from "../../harness/env/bmc-redfish-lab.ts";

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "resolved";
  } catch (err) {
    return err instanceof FastfenceError ? err.code : "untyped";
  }
}

describe("lab Redfish emulator", () => {
  let lab: LabRedfish;
  beforeAll(async () => {
    lab = await startLabRedfish({ name: "labtest" });
  });
  afterAll(async () => {
    await lab?.stop();
  });

  it("ForceOff kills the node's process group; On starts it again", async () => {
    const d = new RedfishDriver({ url: lab.url, ca: lab.ca, username: lab.username, password: lab.password });
    const pid = lab.node.pid;
    expect(lab.node.running()).toBe(true);
    await powerOffAndConfirm(d, { timeoutMs: 5000, pollMs: 20, now: Date.now });
    expect(lab.node.running()).toBe(false);
    expect(lab.server.stats.offHookCalls).toBeGreaterThan(0);
    await d.on({ timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 200));
    expect(lab.node.running()).toBe(true);
    expect(lab.node.pid).not.toBe(pid);
    await d.close();
  });

  it("lying mode reports Off while the node keeps running (what no driver can detect)", async () => {
    const d = new RedfishDriver({ url: lab.url, ca: lab.ca, username: lab.username, password: lab.password });
    lab.server.faults.lie = true;
    const hooks = lab.server.stats.offHookCalls;
    await powerOffAndConfirm(d, { timeoutMs: 5000, pollMs: 20, now: Date.now });
    expect(lab.server.power).toBe("Off");
    expect(lab.node.running()).toBe(true);
    expect(lab.server.stats.offHookCalls).toBe(hooks);
    lab.server.resetFaults();
    lab.server.power = "On";
    await d.close();
  });

  it("auth failure switch and unreachable switch", async () => {
    const d = new RedfishDriver({ url: lab.url, ca: lab.ca, username: lab.username, password: lab.password });
    lab.server.faults.authFail = true;
    expect(await codeOf(d.status({ timeoutMs: 3000 }))).toBe("FF_BMC_AUTH_FAILED");
    lab.server.faults.authFail = false;
    expect((await d.status({ timeoutMs: 3000 })).state).toBe("on");
    await lab.server.setUnreachable(true);
    expect(await codeOf(d.status({ timeoutMs: 3000 }))).toBe("FF_BMC_UNREACHABLE");
    await lab.server.setUnreachable(false);
    expect((await d.status({ timeoutMs: 3000 })).state).toBe("on");
    await d.close();
  });

  it("refuses an unverified certificate unless insecure is configured", async () => {
    const strict = new RedfishDriver({ url: lab.url, username: lab.username, password: lab.password });
    expect(await codeOf(strict.status({ timeoutMs: 3000 }))).toBe("FF_BMC_PROTOCOL");
    await strict.close();
    const loose = new RedfishDriver({
      url: lab.url,
      username: lab.username,
      password: lab.password,
      insecure: true,
    });
    expect((await loose.status({ timeoutMs: 3000 })).state).toBe("on");
    await loose.close();
  });
});

describe("native IPMI vs ipmitool on ipmi_sim", () => {
  let sim: IpmiSim;
  beforeAll(async () => {
    sim = await startIpmiSim();
  });
  afterAll(async () => {
    await sim?.stop();
  });

  it("every status reading agrees with ipmitool -C 3; off kills the simulated node", async () => {
    const d = new IpmiDriver({
      host: sim.host,
      port: sim.port,
      username: sim.username,
      password: sim.password,
    });
    const agree = async () => {
      const ours = (await d.status({ timeoutMs: 5000 })).state;
      expect(ours).toBe(await sim.ipmitoolStatus());
      return ours;
    };
    expect(await agree()).toBe("on");
    expect(sim.nodeRunning()).toBe(true);
    const r = await powerOffAndConfirm(d, { timeoutMs: 10_000, pollMs: 50, now: Date.now });
    expect(r.readbacks.at(-1)?.state).toBe("off");
    expect(await agree()).toBe("off");
    expect(sim.nodeRunning()).toBe(false);
    await d.on({ timeoutMs: 5000 });
    const end = Date.now() + 5000;
    while ((await d.status({ timeoutMs: 5000 })).state !== "on" && Date.now() < end)
      await new Promise((x) => setTimeout(x, 100));
    expect(await agree()).toBe("on");
    // the kept session survives, and a power change made by ipmitool is seen
    await sim.ipmitool(["chassis", "power", "off"]);
    const end2 = Date.now() + 5000;
    while ((await d.status({ timeoutMs: 5000 })).state !== "off" && Date.now() < end2)
      await new Promise((x) => setTimeout(x, 100));
    expect(await agree()).toBe("off");
    await d.close();
  });
});
