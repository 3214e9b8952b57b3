// Needs real Linux processes, a network bridge (root): a lab claim held by another process.
// One lab per machine (lab/machine-claim.ts). Another process plays a lab from another
// checkout: it claims the machine and makes the lab's bridge. While it lives, a second
// claim, `Lab.up` and `fastfence lab up` all fail naming it (pid and checkout) and touch
// nothing: its bridge stays, no state file appears. (Before the claim, a second lab's
// failed start tore down the names it had recorded, the first lab's bridge among them.)
// Once it dies, the claim is free at once, and the next lab removes what it left.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Lab } from "../../lab/lab.ts";
import { claimHolder, claimMachine, LabBusyError, releaseMachine } from "../../lab/machine-claim.ts";
import { BRIDGE, ROOT, STATE_PATH, clearForNewLab, leftovers } from "../../lab/state.ts";

const OTHER = "/elsewhere/other-checkout";
const bridgeExists = () => spawnSync("ip", ["link", "show", BRIDGE], { stdio: "ignore" }).status === 0;

let other: ChildProcess | undefined;
afterAll(async () => {
  other?.kill("SIGKILL");
  await releaseMachine();
  if (bridgeExists()) spawnSync("ip", ["link", "delete", BRIDGE]);
});

/** The other lab: claims the machine, makes the bridge, says "ready"; gone after 3 minutes at most. */
function startOtherLab(): Promise<ChildProcess> {
  const code = [
    `const { claimMachine } = await import(${JSON.stringify(join(ROOT, "lab/machine-claim.ts"))});`,
    `await claimMachine(${JSON.stringify(OTHER)});`,
    `const { execFileSync } = await import("node:child_process");`,
    `execFileSync("ip", ["link", "add", ${JSON.stringify(BRIDGE)}, "type", "bridge"]);`,
    `console.log("ready");`,
    `setTimeout(() => process.exit(0), 180_000);`,
  ].join("\n");
  const c = spawn(process.execPath, ["--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  c.stderr.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    c.stdout.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) resolve(c);
    });
    c.once("exit", (rc) => reject(new Error(`the other lab exited (${rc}) before it was ready: ${err}`)));
  });
}

// In the order written, also under --sequence.shuffle: the second case kills the holder the
// first one started.
describe("one lab per machine", { shuffle: false }, () => {
  it("while another process holds the machine, a claim, Lab.up and `lab up` fail naming it and touch nothing", async () => {
    expect(bridgeExists(), `${BRIDGE} exists before the test: a lab is running here`).toBe(false);
    const stateBefore = existsSync(STATE_PATH);
    other = await startOtherLab();
    const pid = other.pid!;

    expect(await claimHolder()).toMatchObject({ pid, checkout: OTHER });
    const claim = await claimMachine(ROOT).catch((e: unknown) => e);
    expect(claim).toBeInstanceOf(LabBusyError);
    expect((claim as LabBusyError).holder).toMatchObject({ pid, checkout: OTHER });
    expect((claim as LabBusyError).message).toMatch(
      new RegExp(`another lab is running on this machine \\(pid ${pid}, checkout ${OTHER}, since `),
    );

    const up = await Lab.up({ nodes: 1, bmc: "redfish", workloads: false }).catch((e: unknown) => e);
    expect(up).toBeInstanceOf(LabBusyError);
    expect(bridgeExists(), "the other lab's bridge was removed").toBe(true);
    expect(existsSync(STATE_PATH)).toBe(stateBefore);

    const cli = spawnSync(process.execPath, [join(ROOT, "cli/main.ts"), "lab", "up"], {
      encoding: "utf8",
      timeout: 60_000,
      cwd: ROOT,
    });
    expect(cli.status, cli.stdout + cli.stderr).not.toBe(0);
    expect(cli.stderr).toMatch(
      new RegExp(`another lab is running on this machine \\(pid ${pid}, checkout ${OTHER}`),
    );
    expect(bridgeExists(), "the other lab's bridge was removed by `lab up`").toBe(true);
    expect(existsSync(STATE_PATH)).toBe(stateBefore);
  }, 120_000);

  it("once the holder dies the claim is free at once, and what it left is removed before the next lab", async () => {
    const gone = new Promise((r) => other!.once("exit", r));
    other!.kill("SIGKILL");
    await gone;
    expect(await claimHolder()).toBeUndefined();
    await claimMachine(ROOT);
    expect(await claimHolder()).toMatchObject({ pid: process.pid, checkout: ROOT });
    expect(leftovers()?.bridge).toBe(BRIDGE);
    const said: string[] = [];
    clearForNewLab((l) => said.push(l));
    expect(said.join("\n")).toMatch(new RegExp(`left on this machine: .*${BRIDGE}`));
    expect(bridgeExists()).toBe(false);
    expect(leftovers()).toBeUndefined();
    await releaseMachine();
    expect(await claimHolder()).toBeUndefined();
  }, 60_000);
});
