// Needs real pipeline cluster: planned reboots, pauses and holds watched across every stage.
// Planned work is not failure, on the real stack (real kube-apiserver, Kafka, every stage
// as its own identity, a lab Redfish BMC per node): the "Done when", one scenario
// each, on one three-node cluster (planned-suite.ts); the holds that are only watched —
// (c) NodeMaintenance, (d) cluster upgrade, (e) pause annotation — are on a cluster of their
// own in pipeline-planned-holds.test.ts, so the two files can run in different lanes. Each
// scenario crashes (or asks to fence) one node, and leaves the cluster as it found it: the
// node rebooted with a new boot ID, its incident ended, the planned-work state and the
// policy put back. The reconcilers run every second (reconcile.intervalMs).
// Right after the scenario before it, (h)'s request may be Blocked for a moment (StormGuard:
// a just-closed incident keeps its slot for one evidence window; FencingPaused: confirm
// reuses a read policy for 5 s); confirm's reconciler confirms it on its next pass.
// Each scenario prints its incident's timeline, in ms from the crash (or the request).
import { describe, expect, it } from "vitest";
import { incidentName } from "../../core/incident.ts";
import { PAUSE_ANNOTATION } from "../../core/planned.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import { NAMESPACE, sleep } from "../../harness/env/pipeline-cluster.ts";
import {
  commandsSince,
  mcoDone,
  mcoUpdating,
  patchNode,
  patchPolicy,
  pipelineIdle,
  readEvents,
  replayMisses,
  requestFence,
} from "./planned-helpers.ts";
import {
  crash,
  HOLDING,
  nothingElseFenced,
  phasesOf,
  plannedWorkCluster,
  readIncident,
  reboot,
  rebootNode,
  report,
  sleepUntil,
} from "./planned-suite.ts";

const env = plannedWorkCluster();

// In the order written, also under --sequence.shuffle: (h) asks to fence node-b's running
// boot and leaves that incident behind (every other scenario reboots its node), so (b) and
// (i), which crash node-b and watch for a hold on that boot's incident, come before it.
describe("planned work is not failure", { shuffle: false }, () => {
  it("(a) a node rebooting for a MachineConfig update is never powered off; its incident ends when it is back", async () => {
    const { c, history } = env();
    await mcoUpdating(c, "node-a");
    const x = await crash("node-a");
    const held = await history.until(x.name, { phase: "Blocked", reason: "PlannedReboot" }, 15_000);
    expect(held.message).toMatch(
      /node-a is rebooting for a MachineConfig update \(cordoned, machine-config state Working, rendered-master-old → rendered-master-new\): not fenced for up to 600 s after its first suspicion \((59\d|600) s left\)$/,
    );
    await sleepUntil(x.t0 + 60_000);
    expect(phasesOf(x.name)).toEqual(HOLDING);
    expect(x.commands()).toEqual([]);
    const silent = Date.now() - x.t0;
    const back = Date.now();
    await rebootNode("node-a");
    await mcoDone(c, "node-a");
    const ended = await history.until(x.name, { phase: "Closed", reason: "NodeRebooted" }, 20_000);
    expect(x.commands()).toEqual([]);
    expect(x.power()).toBe("On");
    expect(phasesOf(x.name)).toEqual([...HOLDING, "Closed"]);
    nothingElseFenced(x);
    report("(a) MachineConfig reboot", x, [
      `held ${held.at - x.t0} ms after the crash, silent ${silent} ms, closed ${ended.at - back} ms after the reboot began`,
      ended.message!,
    ]);
  });

  it("(b) a planned reboot that outlasts plannedWork.maxPlannedRebootMs is fenced", async () => {
    const { c, history } = env();
    await patchPolicy(c, { plannedWork: { maxPlannedRebootMs: 15_000 } });
    await mcoUpdating(c, "node-b");
    const x = await crash("node-b");
    const held = await history.until(x.name, { phase: "Blocked", reason: "PlannedReboot" }, 15_000);
    const confirmed = await history.until(x.name, { phase: "Confirmed" }, 30_000);
    expect(confirmed.message).toMatch(/silent for more than 15 s: treated as failed/);
    const released = await history.until(x.name, { phase: "Released" }, 20_000);
    expect(x.commands()).toContain("ForceOff");
    expect(x.power()).toBe("Off");
    const st = (await readIncident(x.name)).status!;
    const bound = Date.parse(st.timestamps.confirmed!) - Date.parse(st.timestamps.suspected!);
    expect(bound).toBeGreaterThanOrEqual(15_000);
    expect(st.powerOffConfirmedAt).toBeDefined();
    await reboot(x, { phase: "Recovered", reason: "NodeRecovered" });
    await mcoDone(c, "node-b");
    await patchPolicy(c, { plannedWork: null });
    nothingElseFenced(x);
    report("(b) planned reboot past its bound", x, [
      `held ${held.at - x.t0} ms, confirmed ${confirmed.at - x.t0} ms (${bound} ms after the first suspicion), released ${released.at - x.t0} ms after the crash; BMC: ${x.commands().join(", ")}`,
    ]);
  });

  it("(f) Observe mode records what it would do, sends no power command, and closes the incident", async () => {
    const { c, history } = env();
    await patchPolicy(c, { mode: "Observe" });
    const x = await crash("node-c");
    const observed = await history.until(x.name, { phase: "Confirmed", reason: "Observed" }, 15_000);
    expect(observed.message).toMatch(
      /^observe mode: would power off node-c with level 1 of 1 \(redfish redfish\+http:\/\/127\.0\.0\.1:\d+\/redfish\/v1\/Systems\/node-c\), round 1; no power command sent$/,
    );
    const closed = await history.until(x.name, { phase: "Closed", reason: "Observed" }, 15_000);
    expect(closed.message).toBe(observed.message);
    expect(x.commands()).toEqual([]);
    expect(x.power()).toBe("On");
    const events = (await readEvents(c)).filter(
      (e) => e.type === EVENT_TYPES.fenceObserved && e.ffincident === x.name,
    );
    expect(events.length).toBeGreaterThanOrEqual(1);
    expect(events[0]!.data).toMatchObject({ node: "node-c", round: 1, level: 1, message: observed.message });
    await patchPolicy(c, { mode: null });
    await rebootNode("node-c");
    expect(x.commands()).toEqual([]);
    nothingElseFenced(x);
    report("(f) Observe mode", x, [
      `observed ${observed.at - x.t0} ms, closed ${closed.at - x.t0} ms after the crash; ${events.length} fence.observed event(s)`,
      observed.message!,
    ]);
  });

  it("(g) a cluster-wide pause stops all fencing within a second, and fencing resumes when it ends", async () => {
    const { c, history } = env();
    await patchPolicy(c, { paused: true, pausedReason: "change window CHG-7" });
    await sleep(1_000);
    const x = await crash("node-a");
    const held = await history.until(
      x.name,
      { phase: ["Blocked", "Confirmed"], reason: "FencingPaused" },
      15_000,
    );
    expect(held.message).toContain("fencing is paused cluster-wide: change window CHG-7");
    await sleepUntil(x.t0 + 15_000);
    expect(phasesOf(x.name).every((p) => [...HOLDING, "Confirmed"].includes(p))).toBe(true);
    expect(x.commands()).toEqual([]);
    await patchPolicy(c, { paused: false });
    const resumed = Date.now();
    const released = await history.until(x.name, { phase: "Released" }, 15_000);
    expect(x.commands()).toContain("ForceOff");
    expect(x.power()).toBe("Off");
    await reboot(x, { phase: "Recovered", reason: "NodeRecovered" });
    await patchPolicy(c, { paused: null, pausedReason: null });
    nothingElseFenced(x);
    report("(g) cluster-wide pause", x, [
      `held (${held.phase}) ${held.at - x.t0} ms after the crash; released ${released.at - resumed} ms after the pause ended`,
    ]);
  });

  it("(i) misses of a boot that has ended never become suspicions of the node's next boot (S3)", async () => {
    const { c, history } = env();
    await patchNode(c, "node-b", { metadata: { annotations: { [PAUSE_ANNOTATION]: "late misses" } } });
    const x = await crash("node-b");
    await history.until(x.name, { phase: "Blocked", reason: "NodePaused" }, 15_000);
    const boot = await rebootNode("node-b");
    // Read late, within suspicion.maxEventAgeMs: node-b's own detect replica has not seen them.
    const replayed = await replayMisses(c, "node-b", x.t0);
    expect(replayed).toBeGreaterThan(0);
    await history.until(x.name, { phase: "Closed", reason: "NodeRebooted" }, 20_000);
    await pipelineIdle(c);
    await sleep(2_000);
    const next = incidentName("node-b", boot);
    // Not one suspicion of the new boot (confirm's evidence window alone would often hide it).
    const ofNewBoot = (await readEvents(c)).filter(
      (e) => e.type === EVENT_TYPES.nodeSuspected && e.data.node === "node-b" && e.data.bootId === boot,
    );
    expect(ofNewBoot.map((e) => e.data)).toEqual([]);
    expect(history.seen.filter((s) => s.name === next)).toEqual([]);
    await patchNode(c, "node-b", { metadata: { annotations: { [PAUSE_ANNOTATION]: null } } });
    expect(x.commands()).toEqual([]);
    nothingElseFenced(x);
    report("(i) late misses after a reboot", x, [
      `${replayed} misses of the old boot replayed; ${next} never opened`,
    ]);
  });

  // On 6f7efbe an operator's request skipped fence's last look, and this test saw the healthy
  // node powered off (ForceOff, Released). Now every round takes the look (docs/safety.md).
  it("(h) an operator's request is confirmed, but a healthy node that answers the last look is not powered off", async () => {
    const { c, history } = env();
    const bmc = c.nodes.get("node-b")!.bmc;
    const mark = bmc.stats.resets.length;
    const settled = await pipelineIdle(c);
    const t0 = Date.now();
    const req = await requestFence(c, "node-b", "test");
    expect(req.by).toBe("alice");
    const confirmed = await history.until(
      req.name,
      { phase: "Confirmed", reason: "OperatorRequested" },
      15_000,
    );
    expect(confirmed.message).toMatch(/^fencing requested by alice at \S+: test$/);
    const abandoned = await history.until(
      req.name,
      { phase: "FenceFailed", reason: "NodeResponding" },
      20_000,
    );
    expect(commandsSince(bmc, mark)).toEqual([]);
    expect(bmc.power).toBe("On");
    const st = (await readIncident(req.name)).status!;
    expect(st.confirmedBy).toBe(`system:serviceaccount:${NAMESPACE}:fastfence-confirm`);
    expect(st.attempts.at(-1)).toMatchObject({ result: "abandoned", lastLook: { reason: "NodeResponding" } });
    expect(st.timestamps.fencedOff).toBeUndefined();
    expect(st.released).toBeUndefined();
    report("(h) operator request", { name: req.name, t0, settled }, [
      `confirmed ${confirmed.at - t0} ms, round abandoned by the last look ${abandoned.at - t0} ms after the request`,
    ]);
  });
});
