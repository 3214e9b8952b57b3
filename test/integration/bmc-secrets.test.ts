// Needs real ipmi_sim, lab Redfish emulator, fence agents: every real driver's failure paths.
// BMC credentials never appear in logs, errors (message, JSON, stack), attempt records,
// driver targets or `fastfence bmc` output, on success and on every failure path, for
// every driver against its real peer.
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FastfenceError } from "../../core/errors.ts";
import { main } from "../../cli/main.ts";
import type { BmcDriver } from "../../infra/bmc/driver.ts";
import { FenceAgentDriver } from "../../infra/bmc/fence-agent.ts";
import { IpmiDriver } from "../../infra/bmc/ipmi/driver.ts";
import { fenceWithLevels } from "../../infra/bmc/levels.ts";
import { RedfishDriver } from "../../infra/bmc/redfish.ts";
import { createLogger } from "../../infra/log.ts";
import { startIpmiSim, type IpmiSim } from "../../harness/env/bmc-ipmi-sim.ts";
import { startLabRedfish, type LabRedfish } from "../../harness/env/bmc-redfish-lab.ts";
import { freeTcpPort, freeUdpPort } from "../../harness/env/bmc-spawn.ts";

const USER = "bmcuserQ7x";
const PASS = "Pw-9f3Kx-zzTop";
const WRONG = "Wr0ng-7Hq2-pw";

// In the order written, also under --sequence.shuffle: the last case scans everything the
// cases before it collected.
describe("BMC credentials never leak", { shuffle: false }, () => {
  let sim: IpmiSim;
  let lab: LabRedfish;
  const seen: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      seen.push(String(chunk));
      cb();
    },
  });
  const log = createLogger("bmc-secrets-test", { level: "trace", destination: sink });

  beforeAll(async () => {
    [sim, lab] = await Promise.all([
      startIpmiSim({ username: USER, password: PASS }),
      startLabRedfish({ username: USER, password: PASS }),
    ]);
  });
  afterAll(async () => {
    await Promise.allSettled([sim?.stop(), lab?.stop()]);
  });

  function recordError(err: unknown) {
    seen.push(String(err));
    if (err instanceof Error) seen.push(err.message, err.stack ?? "", String(err.cause ?? ""));
    if (err instanceof FastfenceError) seen.push(JSON.stringify(err.toJSON()), JSON.stringify(err));
    log.error({ err }, "bmc failure");
  }

  async function exercise(make: (password: string) => BmcDriver, unreachable: BmcDriver) {
    for (const d of [make(PASS), make(WRONG), unreachable]) {
      seen.push(d.target, d.kind);
      try {
        const st = await d.status({ timeoutMs: 8000 });
        log.info({ target: d.target, st }, "status");
      } catch (err) {
        recordError(err);
      }
      const protocol = d.kind === "redfish" || d.kind === "ipmi" ? d.kind : "fence-agent";
      const out = await fenceWithLevels([{ protocol, driver: d, timeoutMs: 8000, pollMs: 100 }], {
        round: 1,
        by: "bmc-secrets-test",
        now: () => Date.now(),
      });
      seen.push(JSON.stringify(out));
      log.info({ attempts: out.attempts }, "fence outcome");
      try {
        await d.on({ timeoutMs: 8000 });
      } catch (err) {
        recordError(err);
      }
      await d.close?.();
    }
  }

  it("redfish driver (lab emulator, session auth)", async () => {
    await exercise(
      (pw) => new RedfishDriver({ url: lab.url, ca: lab.ca, username: USER, password: pw, log }),
      new RedfishDriver({
        url: `https://127.0.0.1:${await freeTcpPort()}`,
        username: USER,
        password: PASS,
        log,
      }),
    );
    // basic auth too, and a TLS verification failure
    await exercise(
      (pw) =>
        new RedfishDriver({ url: lab.url, ca: lab.ca, auth: "basic", username: USER, password: pw, log }),
      new RedfishDriver({ url: lab.url, username: USER, password: PASS, log }),
    );
  });

  it("native IPMI driver (ipmi_sim)", async () => {
    await exercise(
      (pw) => new IpmiDriver({ host: sim.host, port: sim.port, username: USER, password: pw, log }),
      new IpmiDriver({ host: "127.0.0.1", port: await freeUdpPort(), username: USER, password: PASS, log }),
    );
  });

  it("fence agents (fence_ipmilan, fence_redfish)", async () => {
    await exercise(
      (pw) =>
        new FenceAgentDriver({
          agent: "fence_ipmilan",
          username: USER,
          password: pw,
          log,
          params: { ip: sim.host, ipport: sim.port, lanplus: 1, cipher: 3 },
        }),
      new FenceAgentDriver({
        agent: "fence_ipmilan",
        username: USER,
        password: PASS,
        log,
        params: { ip: "127.0.0.1", ipport: await freeUdpPort(), lanplus: 1, cipher: 3, power_timeout: 2 },
      }),
    );
    await exercise(
      (pw) =>
        new FenceAgentDriver({
          agent: "fence_redfish",
          username: USER,
          password: pw,
          log,
          params: {
            ip: "127.0.0.1",
            ipport: lab.port,
            systems_uri: lab.systemPath,
            ssl_insecure: 1,
            power_timeout: 3,
          },
        }),
      new FenceAgentDriver({
        agent: "fence_redfish",
        username: USER,
        password: PASS,
        log,
        params: { ip: "127.0.0.1", ipport: await freeTcpPort(), ssl_insecure: 1 },
      }),
    );
  });

  it("fastfence bmc output", async () => {
    const lines: string[] = [];
    const spyLog = vi
      .spyOn(console, "log")
      .mockImplementation((...a: unknown[]) => void lines.push(a.join(" ")));
    const spyErr = vi
      .spyOn(console, "error")
      .mockImplementation((...a: unknown[]) => void lines.push(a.join(" ")));
    const env = { ...process.env };
    let usageCode = -1;
    try {
      for (const pw of [PASS, WRONG]) {
        process.env.FASTFENCE_BMC_USERNAME = USER;
        process.env.FASTFENCE_BMC_PASSWORD = pw;
        for (const action of ["check", "off", "on", "status"]) {
          await main(["bmc", action, "--url", `ipmi://127.0.0.1:${sim.port}`, "--timeout-ms", "8000"]);
          await main([
            "bmc",
            action,
            "--url",
            `redfish+https://127.0.0.1:${lab.port}`,
            "--insecure",
            "--json",
            "--timeout-ms",
            "8000",
          ]);
        }
      }
      // a usage error (credentials in the address): printed by the entry point, exit 2
      usageCode = await main([
        "bmc",
        "status",
        "--url",
        `redfish://${USER}:${PASS}@127.0.0.1:${lab.port}/redfish/v1/Systems/node-1`,
      ]);
    } finally {
      spyLog.mockRestore();
      spyErr.mockRestore();
      process.env = env;
    }
    expect(lines.some((l) => l.includes("confirmed"))).toBe(true);
    expect(usageCode).toBe(2);
    seen.push(...lines);
  });

  afterAll(() => {
    // runs after the cases above: one scan over everything collected
  });

  it("nothing collected contains a credential", () => {
    const all = seen.join("\n");
    expect(all.length).toBeGreaterThan(1000);
    for (const secret of [PASS, WRONG, USER, Buffer.from(`${USER}:${PASS}`).toString("base64")]) {
      expect(
        all.includes(secret),
        `found ${secret === USER ? "username" : "a password"} in collected output`,
      ).toBe(false);
    }
    // the failure paths were really exercised
    expect(all).toContain("FF_BMC_AUTH_FAILED");
    expect(all).toMatch(/FF_BMC_UNREACHABLE|FF_BMC_TIMEOUT/);
  });
});
