// Needs real pipeline cluster: NodeMaintenance, upgrade and pause holds watched past fencing.
// Planned work is not failure: the holds that are only watched, on a three-node pipeline
// cluster of their own (planned-suite.ts; the other scenarios are in
// pipeline-planned-work.test.ts): a crashed node with a NodeMaintenance, during a cluster
// upgrade, or with the pause annotation is held Blocked well past the time a plain crash is
// fenced (FENCED_BY_MS), its BMC receives no power command at all, and its incident ends
// Closed once the node is back with a new boot. Each scenario puts back what it set.
// Each scenario prints its incident's timeline, in ms from the crash.
import { describe, expect, it } from "vitest";
import { PAUSE_ANNOTATION } from "../../core/planned.ts";
import { sleep } from "../../harness/env/pipeline-cluster.ts";
import { createNodeMaintenance, patchNode, startUpgrade } from "./planned-helpers.ts";
import {
  crash,
  FENCED_BY_MS,
  HOLDING,
  nothingElseFenced,
  phasesOf,
  plannedWorkCluster,
  PLANNED_TTL_MS,
  reboot,
  report,
  sleepUntil,
} from "./planned-suite.ts";

const env = plannedWorkCluster();

describe("planned work is not failure: holds", () => {
  it("(c) a node with a NodeMaintenance is not fenced", async () => {
    const { c, history } = env();
    const nm = await createNodeMaintenance(c, "node-c", "replace a DIMM");
    await sleep(PLANNED_TTL_MS);
    const x = await crash("node-c");
    const held = await history.until(x.name, { phase: "Blocked", reason: "NodeMaintenance" }, 15_000);
    expect(held.message).toBe("node-c is in maintenance (NodeMaintenance nm-node-c)");
    await sleepUntil(x.t0 + FENCED_BY_MS + 15_000);
    expect(phasesOf(x.name)).toEqual(HOLDING);
    expect(x.commands()).toEqual([]);
    const heldFor = Date.now() - held.at;
    await reboot(x, { phase: "Closed", reason: "NodeRebooted" });
    await nm.delete();
    expect(x.commands()).toEqual([]);
    expect(x.power()).toBe("On");
    nothingElseFenced(x);
    report("(c) NodeMaintenance", x, [
      `held ${held.at - x.t0} ms after the crash, still held ${heldFor} ms later`,
    ]);
  });

  it("(d) during a cluster upgrade a crashed node is not fenced, and the incident says why", async () => {
    const { c, history } = env();
    const upgrade = await startUpgrade(c, "Working towards 4.16.3: 512 of 903 done (56% complete)");
    await sleep(PLANNED_TTL_MS);
    const x = await crash("node-a");
    const held = await history.until(x.name, { phase: "Blocked", reason: "ClusterUpgrade" }, 15_000);
    expect(held.message).toMatch(
      /^a cluster upgrade is in progress \(Working towards 4\.16\.3: 512 of 903 done \(56% complete\)\): not fenced for up to 600 s after its first suspicion \((59\d|600) s left\)$/,
    );
    await sleepUntil(x.t0 + FENCED_BY_MS + 5_000);
    expect(phasesOf(x.name)).toEqual(HOLDING);
    expect(x.commands()).toEqual([]);
    await reboot(x, { phase: "Closed", reason: "NodeRebooted" });
    await upgrade.delete();
    expect(x.commands()).toEqual([]);
    nothingElseFenced(x);
    report("(d) cluster upgrade", x, [`held ${held.at - x.t0} ms after the crash: ${held.message!}`]);
  });

  it("(e) a node with the pause annotation is not fenced", async () => {
    const { c, history } = env();
    await patchNode(c, "node-b", { metadata: { annotations: { [PAUSE_ANNOTATION]: "firmware update" } } });
    const x = await crash("node-b");
    const held = await history.until(x.name, { phase: "Blocked", reason: "NodePaused" }, 15_000);
    expect(held.message).toBe("fencing of node-b is paused: firmware update");
    await sleepUntil(x.t0 + FENCED_BY_MS + 5_000);
    expect(phasesOf(x.name)).toEqual(HOLDING);
    expect(x.commands()).toEqual([]);
    await reboot(x, { phase: "Closed", reason: "NodeRebooted" });
    await patchNode(c, "node-b", { metadata: { annotations: { [PAUSE_ANNOTATION]: null } } });
    expect(x.commands()).toEqual([]);
    nothingElseFenced(x);
    report("(e) node paused", x, [`held ${held.at - x.t0} ms after the crash`]);
  });
});
