// Needs real sushy-tools, lab Redfish emulator, ipmi_sim, fence agents: each driver's real peer.
// One conformance suite for every BMC driver, each run against its real peer:
// Redfish driver vs sushy-tools and vs the lab Redfish emulator, the native IPMI driver
// vs ipmi_sim (cross-checked with ipmitool), and the fence-agent driver with fence_ipmilan
// vs ipmi_sim and fence_redfish vs the lab emulator. Fault cases: wrong credentials,
// unreachable BMC, timeouts, and a power-off that never reads back Off (FF_BMC_STILL_ON).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FastfenceError } from "../../core/errors.ts";
import { powerOffAndConfirm, type BmcDriver } from "../../infra/bmc/driver.ts";
import { FenceAgentDriver } from "../../infra/bmc/fence-agent.ts";
import { IpmiDriver } from "../../infra/bmc/ipmi/driver.ts";
import { RedfishDriver } from "../../infra/bmc/redfish.ts";
import { startIpmiSim, type IpmiSim } from "../../harness/env/bmc-ipmi-sim.ts";
import { startLabRedfish, type LabRedfish } from "../../harness/env/bmc-redfish-lab.ts";
import { freeTcpPort, freeUdpPort } from "../../harness/env/bmc-spawn.ts";
import { startSushy, type Sushy } from "../../harness/env/bmc-sushy.ts";

interface Creds {
  username: string;
  password: string;
}

interface Peer {
  name: string;
  /** Budget for a power transition on this peer. */
  transitionMs: number;
  make(creds?: Creds): BmcDriver;
  makeUnreachable(): Promise<BmcDriver>;
  creds(): Creds;
  /** Independent view of the machine: true = running/on, false = off, undefined = not observable. */
  observe(): Promise<boolean | undefined>;
  /** Codes acceptable for wrong credentials (agents cannot always tell auth from other failures). */
  authCodes: string[];
  unreachableCodes: string[];
  /** Lab-only fault switches. */
  lab?: () => LabRedfish;
}

async function until(what: string, f: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "resolved";
  } catch (err) {
    return err instanceof FastfenceError ? err.code : `untyped:${String(err)}`;
  }
}

const confirm = (d: BmcDriver, timeoutMs: number) =>
  powerOffAndConfirm(d, {
    timeoutMs,
    pollMs: 100,
    now: () => Date.now(),
    callTimeoutMs: Math.min(timeoutMs, 30_000),
  });

function conformance(peer: () => Peer) {
  it("reads power on, powers off with a read-back, reads off, powers on", async () => {
    const p = peer();
    const d = p.make();
    try {
      if ((await d.status({ timeoutMs: 30_000 })).state !== "on") {
        await d.on({ timeoutMs: 30_000 });
        await until(
          "power on",
          async () => (await d.status({ timeoutMs: 10_000 })).state === "on",
          p.transitionMs,
        );
      }
      expect((await d.status({ timeoutMs: 30_000 })).state).toBe("on");
      expect(await p.observe()).not.toBe(false);

      const r = await confirm(d, p.transitionMs);
      expect(r).toMatchObject({ result: "off-confirmed", readBackState: "Off" });
      expect(r.readBackAt).toBeGreaterThanOrEqual(r.commandAt);
      expect(r.readbacks.at(-1)?.state).toBe("off");
      expect(await p.observe()).not.toBe(true);
      expect((await d.status({ timeoutMs: 30_000 })).state).toBe("off");

      await d.on({ timeoutMs: 30_000 });
      await until(
        "power on",
        async () => (await d.status({ timeoutMs: 10_000 })).state === "on",
        p.transitionMs,
      );
      await until("peer sees on", async () => (await p.observe()) !== false, 5000);
    } finally {
      await d.close?.();
    }
  });

  it("wrong credentials fail typed, never as success", async () => {
    const p = peer();
    const d = p.make({ username: p.creds().username, password: "definitely-wrong-pw" });
    try {
      expect(p.authCodes).toContain(await codeOf(d.status({ timeoutMs: 20_000 })));
      expect(p.authCodes).toContain(await codeOf(confirm(d, 5000)));
    } finally {
      await d.close?.();
    }
  });

  it("an unreachable BMC fails typed", async () => {
    const p = peer();
    const d = await p.makeUnreachable();
    try {
      expect(p.unreachableCodes).toContain(await codeOf(d.status({ timeoutMs: 3000 })));
      expect([...p.unreachableCodes, "FF_BMC_STILL_ON"]).toContain(await codeOf(confirm(d, 3000)));
    } finally {
      await d.close?.();
    }
  });

  it("lab faults: stuck PoweringOff is FF_BMC_STILL_ON; latency beyond the budget is FF_BMC_TIMEOUT; 5xx is typed", async (ctx) => {
    const p = peer();
    if (!p.lab) return ctx.skip();
    const lab = p.lab();
    const d = p.make();
    try {
      expect((await d.status({ timeoutMs: 20_000 })).state).toBe("on");
      lab.server.faults.stuckPoweringOff = true;
      expect(await codeOf(confirm(d, 3000))).toBe("FF_BMC_STILL_ON");
      expect(lab.node.running()).toBe(true);
      lab.server.faults.stuckPoweringOff = false;
      lab.server.power = "On";

      lab.server.faults.latencyMs = 1500;
      expect(await codeOf(d.status({ timeoutMs: 300 }))).toBe("FF_BMC_TIMEOUT");
      lab.server.faults.latencyMs = 0;

      lab.server.faults.http5xx = 503;
      expect(["FF_BMC_PROTOCOL", "FF_BMC_UNREACHABLE"]).toContain(
        await codeOf(d.status({ timeoutMs: 20_000 })),
      );
      lab.server.faults.http5xx = 0;
      expect((await d.status({ timeoutMs: 20_000 })).state).toBe("on");
    } finally {
      lab.server.resetFaults();
      await d.close?.();
    }
  });
}

describe("BMC driver conformance", () => {
  let sushy: Sushy;
  let lab: LabRedfish;
  let sim: IpmiSim;

  beforeAll(async () => {
    [sushy, lab, sim] = await Promise.all([startSushy(), startLabRedfish(), startIpmiSim()]);
  });
  afterAll(async () => {
    await Promise.allSettled([sushy?.stop(), lab?.stop(), sim?.stop()]);
  });

  const labObserve = async () => lab.node.running();
  const simObserve = async () => {
    const tool = await sim.ipmitoolStatus();
    return tool === "on";
  };

  describe("redfish driver vs lab emulator (https, session auth, CA bundle)", () => {
    conformance(() => ({
      name: "redfish-lab",
      transitionMs: 10_000,
      creds: () => ({ username: lab.username, password: lab.password }),
      make: (c) =>
        new RedfishDriver({
          url: lab.url,
          ca: lab.ca,
          ...(c ?? { username: lab.username, password: lab.password }),
        }),
      makeUnreachable: async () =>
        new RedfishDriver({
          url: `https://127.0.0.1:${await freeTcpPort()}`,
          username: "u",
          password: "p",
          insecure: true,
        }),
      observe: labObserve,
      authCodes: ["FF_BMC_AUTH_FAILED"],
      unreachableCodes: ["FF_BMC_UNREACHABLE"],
      lab: () => lab,
    }));
  });

  describe("redfish driver vs sushy-tools (http, basic auth)", () => {
    conformance(() => ({
      name: "redfish-sushy",
      transitionMs: 25_000,
      creds: () => ({ username: sushy.username, password: sushy.password }),
      make: (c) =>
        new RedfishDriver({
          url: sushy.url,
          ...(c ?? { username: sushy.username, password: sushy.password }),
        }),
      makeUnreachable: async () =>
        new RedfishDriver({ url: `http://127.0.0.1:${await freeTcpPort()}`, username: "u", password: "p" }),
      observe: async () => undefined,
      authCodes: ["FF_BMC_AUTH_FAILED"],
      unreachableCodes: ["FF_BMC_UNREACHABLE"],
    }));
  });

  describe("native IPMI driver vs ipmi_sim (lanplus, cipher 3, cross-checked with ipmitool)", () => {
    conformance(() => ({
      name: "ipmi-sim",
      transitionMs: 10_000,
      creds: () => ({ username: sim.username, password: sim.password }),
      make: (c) =>
        new IpmiDriver({
          host: sim.host,
          port: sim.port,
          ...(c ?? { username: sim.username, password: sim.password }),
        }),
      makeUnreachable: async () =>
        new IpmiDriver({ host: "127.0.0.1", port: await freeUdpPort(), username: "u", password: "p" }),
      observe: simObserve,
      authCodes: ["FF_BMC_AUTH_FAILED"],
      unreachableCodes: ["FF_BMC_UNREACHABLE", "FF_BMC_TIMEOUT"],
    }));
  });

  describe("fence-agent driver: fence_ipmilan vs ipmi_sim", () => {
    conformance(() => ({
      name: "fence_ipmilan",
      transitionMs: 20_000,
      creds: () => ({ username: sim.username, password: sim.password }),
      make: (c) =>
        new FenceAgentDriver({
          agent: "fence_ipmilan",
          ...(c ?? { username: sim.username, password: sim.password }),
          params: { ip: sim.host, ipport: sim.port, lanplus: 1, cipher: 3 },
        }),
      makeUnreachable: async () =>
        new FenceAgentDriver({
          agent: "fence_ipmilan",
          username: "u",
          password: "p",
          params: { ip: "127.0.0.1", ipport: await freeUdpPort(), lanplus: 1, cipher: 3 },
        }),
      observe: simObserve,
      authCodes: ["FF_BMC_AUTH_FAILED", "FF_BMC_PROTOCOL"],
      unreachableCodes: ["FF_BMC_UNREACHABLE", "FF_BMC_TIMEOUT", "FF_BMC_PROTOCOL"],
    }));
  });

  describe("fence-agent driver: fence_redfish vs lab emulator", () => {
    conformance(() => ({
      name: "fence_redfish",
      transitionMs: 20_000,
      creds: () => ({ username: lab.username, password: lab.password }),
      make: (c) =>
        new FenceAgentDriver({
          agent: "fence_redfish",
          ...(c ?? { username: lab.username, password: lab.password }),
          params: {
            ip: "127.0.0.1",
            ipport: lab.port,
            systems_uri: lab.systemPath,
            ssl_insecure: 1,
            power_timeout: 2,
          },
        }),
      makeUnreachable: async () =>
        new FenceAgentDriver({
          agent: "fence_redfish",
          username: "u",
          password: "p",
          params: {
            ip: "127.0.0.1",
            ipport: await freeTcpPort(),
            systems_uri: "/redfish/v1/Systems/x",
            ssl_insecure: 1,
          },
        }),
      observe: labObserve,
      authCodes: ["FF_BMC_AUTH_FAILED", "FF_BMC_PROTOCOL"],
      unreachableCodes: ["FF_BMC_UNREACHABLE", "FF_BMC_TIMEOUT", "FF_BMC_PROTOCOL"],
      lab: () => lab,
    }));
  });
});
