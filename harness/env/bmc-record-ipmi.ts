// Records the wire bytes of one real RMCP+ session (cipher suite 3) between the native
// IPMI driver and ipmi_sim, for the codec unit tests' fixtures:
//   node harness/env/bmc-record-ipmi.ts > test/unit/bmc/fixtures/ipmi-session-cs3.json
// The lab credentials it writes are throwaway test values for a simulator that is gone
// when the script ends.
import { IpmiDriver } from "../../infra/bmc/ipmi/driver.ts";
import { startIpmiSim } from "./bmc-ipmi-sim.ts";

const sim = await startIpmiSim({ username: "fixture", password: "fixture-pass" });
const packets: { dir: "tx" | "rx"; hex: string }[] = [];
const driver = new IpmiDriver({
  host: sim.host,
  port: sim.port,
  username: sim.username,
  password: sim.password,
  onPacket: (dir, pkt) => packets.push({ dir, hex: pkt.toString("hex") }),
});
try {
  const before = await driver.status({ timeoutMs: 5000 });
  await driver.off({ timeoutMs: 5000 });
  await driver.close();
  process.stdout.write(
    JSON.stringify(
      {
        description:
          "ipmi_sim (OpenIPMI) RMCP+ session, cipher suite 3: GCAC, Open Session, RAKP1-4, Set Privilege, Get Chassis Status, Chassis Control power down, Close Session",
        username: sim.username,
        password: sim.password,
        statusBefore: before.state,
        packets,
      },
      null,
      1,
    ) + "\n",
  );
} finally {
  await sim.stop();
}
