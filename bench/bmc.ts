// bench-bmc: time from the off command to power-off confirmed, ours versus the ClusterLabs
// agents against the same emulators in one run: native IPMI driver vs fence_ipmilan on
// ipmi_sim, native Redfish driver vs fence_redfish on the lab Redfish emulator (HTTPS).
// For ours, "confirmed" is the status read-back that says off; for an agent, its exit 0
// from action=off (the agent confirms off itself by polling status). Each side gets the
// same number of rounds (default 20), the machine is powered on between rounds.
// "ours" uses a driver kept warm (session/discovery done before the failure, as the fence
// stage does); "ours_cold" builds a new driver per round and is reported for reference.
// Prints p50/p95 per side; the last line is `RESULT {json}`.
//   node bench/bmc.ts [--rounds N]
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { powerOffAndConfirm, type BmcDriver } from "../infra/bmc/driver.ts";
import { IpmiDriver } from "../infra/bmc/ipmi/driver.ts";
import { RedfishDriver } from "../infra/bmc/redfish.ts";
import { startIpmiSim } from "../harness/env/bmc-ipmi-sim.ts";
import { startLabRedfish } from "../harness/env/bmc-redfish-lab.ts";

const { values } = parseArgs({ options: { rounds: { type: "string" } } });
const ROUNDS = Number(values.rounds ?? 20);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

const r1 = (x: number) => Math.round(x * 10) / 10;

function agentOff(agent: string, stdin: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(agent, [], { stdio: ["pipe", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (c: Buffer) => (err += c.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const ms = performance.now() - t0;
      if (code === 0) resolve(ms);
      else
        reject(
          new Error(
            `${agent} off exited ${code}: ${err
              .split("\n")
              .filter((l) => l.includes("ERROR"))
              .join(" ")}`,
          ),
        );
    });
    child.stdin.end(stdin);
  });
}

async function oursOff(d: BmcDriver, pollMs: number): Promise<number> {
  const t0 = performance.now();
  await powerOffAndConfirm(d, { timeoutMs: 20_000, pollMs, now: () => performance.now() });
  return performance.now() - t0;
}

async function ensureOn(d: BmcDriver, running: () => boolean): Promise<void> {
  const end = Date.now() + 20_000;
  if ((await d.status({ timeoutMs: 5000 })).state !== "on") await d.on({ timeoutMs: 5000 });
  while (Date.now() < end) {
    if ((await d.status({ timeoutMs: 5000 })).state === "on" && running()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${d.target} did not come back on`);
}

function summary(xs: number[]) {
  return { n: xs.length, p50: r1(pct(xs, 50)), p95: r1(pct(xs, 95)) };
}

const sim = await startIpmiSim();
const lab = await startLabRedfish({ name: "bench" });
const out: Record<string, Record<string, ReturnType<typeof summary>>> = { ipmi: {}, redfish: {} };
try {
  // ---- IPMI: ours vs fence_ipmilan on ipmi_sim
  const ipmiOpts = { host: sim.host, port: sim.port, username: sim.username, password: sim.password };
  const warm = new IpmiDriver(ipmiOpts);
  await warm.prepare({ timeoutMs: 5000 });
  const ipmi = { ours: [] as number[], ours_cold: [] as number[], fence_ipmilan: [] as number[] };
  const ipmiStdin = `action=off\nip=${sim.host}\nipport=${sim.port}\nlanplus=1\ncipher=3\nusername=${sim.username}\npassword=${sim.password}\n`;
  for (let i = 0; i < ROUNDS; i++) {
    await ensureOn(warm, sim.nodeRunning);
    ipmi.ours.push(await oursOff(warm, 50));
    if ((await sim.ipmitoolStatus()) !== "off" || sim.nodeRunning())
      throw new Error("ipmitool disagrees: not off");
    await ensureOn(warm, sim.nodeRunning);
    const cold = new IpmiDriver(ipmiOpts);
    ipmi.ours_cold.push(await oursOff(cold, 50));
    await cold.close();
    await ensureOn(warm, sim.nodeRunning);
    ipmi.fence_ipmilan.push(await agentOff("fence_ipmilan", ipmiStdin));
    if ((await sim.ipmitoolStatus()) !== "off") throw new Error("fence_ipmilan: not off");
  }
  await warm.close();
  for (const [k, v] of Object.entries(ipmi)) out.ipmi![k] = summary(v);
  console.log(
    `ipmi    ours p50 ${out.ipmi!.ours!.p50} ms p95 ${out.ipmi!.ours!.p95} | ours_cold p50 ${out.ipmi!.ours_cold!.p50} | fence_ipmilan p50 ${out.ipmi!.fence_ipmilan!.p50} ms p95 ${out.ipmi!.fence_ipmilan!.p95}`,
  );

  // ---- Redfish: ours vs fence_redfish on the lab emulator (HTTPS)
  const rfOpts = { url: lab.url, username: lab.username, password: lab.password, ca: lab.ca };
  const rfWarm = new RedfishDriver(rfOpts);
  await rfWarm.prepare({ timeoutMs: 5000 });
  const rf = { ours: [] as number[], ours_cold: [] as number[], fence_redfish: [] as number[] };
  const rfStdin = `action=off\nip=127.0.0.1\nipport=${lab.port}\nsystems_uri=${lab.systemPath}\nssl_insecure=1\nusername=${lab.username}\npassword=${lab.password}\n`;
  const running = () => lab.node.running();
  for (let i = 0; i < ROUNDS; i++) {
    await ensureOn(rfWarm, running);
    rf.ours.push(await oursOff(rfWarm, 20));
    if (lab.node.running()) throw new Error("lab node still running after confirmed off");
    await ensureOn(rfWarm, running);
    const cold = new RedfishDriver(rfOpts);
    rf.ours_cold.push(await oursOff(cold, 20));
    await cold.close();
    await ensureOn(rfWarm, running);
    rf.fence_redfish.push(await agentOff("fence_redfish", rfStdin));
    if (lab.node.running()) throw new Error("fence_redfish: node still running");
  }
  await rfWarm.close();
  for (const [k, v] of Object.entries(rf)) out.redfish![k] = summary(v);
  console.log(
    `redfish ours p50 ${out.redfish!.ours!.p50} ms p95 ${out.redfish!.ours!.p95} | ours_cold p50 ${out.redfish!.ours_cold!.p50} | fence_redfish p50 ${out.redfish!.fence_redfish!.p50} ms p95 ${out.redfish!.fence_redfish!.p95}`,
  );
} finally {
  await Promise.allSettled([sim.stop(), lab.stop()]);
}
const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;
const result = {
  rounds: ROUNDS,
  median_ms: {
    ipmi_ours: out.ipmi!.ours!.p50,
    ipmi_ours_cold: out.ipmi!.ours_cold!.p50,
    fence_ipmilan: out.ipmi!.fence_ipmilan!.p50,
    redfish_ours: out.redfish!.ours!.p50,
    redfish_ours_cold: out.redfish!.ours_cold!.p50,
    fence_redfish: out.redfish!.fence_redfish!.p50,
  },
  p95_ms: {
    ipmi_ours: out.ipmi!.ours!.p95,
    fence_ipmilan: out.ipmi!.fence_ipmilan!.p95,
    redfish_ours: out.redfish!.ours!.p95,
    fence_redfish: out.redfish!.fence_redfish!.p95,
  },
  ratio: {
    ipmi: ratio(out.ipmi!.ours!.p50, out.ipmi!.fence_ipmilan!.p50),
    redfish: ratio(out.redfish!.ours!.p50, out.redfish!.fence_redfish!.p50),
    ipmi_cold: ratio(out.ipmi!.ours_cold!.p50, out.ipmi!.fence_ipmilan!.p50),
    redfish_cold: ratio(out.redfish!.ours_cold!.p50, out.redfish!.fence_redfish!.p50),
  },
  target_ratio: 0.5,
};
const pass = result.ratio.ipmi <= 0.5 && result.ratio.redfish <= 0.5;
console.log(`RESULT ${JSON.stringify({ ...result, pass })}`);
process.exit(pass ? 0 : 1);
