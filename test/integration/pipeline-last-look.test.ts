// Needs real pipeline cluster: a node back between confirmation and the BMC's off command.
// The last look before the power goes off (issue 18, Build 1), on the real stack (real
// kube-apiserver, Kafka, every stage as its own identity, a lab Redfish BMC per node):
// (a) a node hangs and comes back (same boot ID) after confirmation but before the off
//     command — the BMC is slow, so the round's Redfish session takes seconds — and is not
//     powered off: the look abandons the round, the incident ends Closed with NodeResponding;
// (b) the same in a retry round: round 1 fails (the BMC answers 500 to everything), the node
//     comes back during the backoff, round 2's look abandons it before any off command;
// (c) a plain crash is still fenced and released, the look's cost printed;
// (d) the node found back in (a) crashes later with the same boot: it is fenced and released
//     (its Closed incident is replaced by a new one of the same name, core/incident.ts
//     supersededBy). Before, the Closed incident kept every later suspicion of that boot out.
// "Not powered off" means the node's BMC carried out no power command at all (its reset log
// is empty) and still reads On.
import { describe, expect, it } from "vitest";
import { incidentName, type NodeFence } from "../../core/incident.ts";
import { startPipelineCluster, type PipelineCluster } from "../../harness/env/pipeline-cluster.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { incidents, waitFor } from "./pipeline-helpers.ts";

// Wide enough that (b)'s resume lands inside it on a loaded machine: seeing FenceFailed and
// resuming the node took 5.3 s once with every lane running; the wait costs (b) alone.
const BACKOFF_MS = 10_000;
// A probe deadline well above the cluster default (150 ms): with every lane running, a
// healthy node's probes missed often enough once to suspect node-a between (a) and (d),
// which replaced the Closed incident (d) starts from. Detection speed is not measured here.
const env = withEnv(async (scope) =>
  scope.add(
    await startPipelineCluster({
      policy: {
        probe: { intervalMs: 200, timeoutMs: 1_000 },
        reconcile: { intervalMs: 1_000 },
        fencing: { retryBackoffMs: BACKOFF_MS },
      },
    }),
  ),
);

const summary = (i: NodeFence) =>
  i
    .status!.attempts.map(
      (a) => `r${a.round}/l${a.level}:${a.result}${a.lastLook ? `(${JSON.stringify(a.lastLook)})` : ""}`,
    )
    .join(", ");

/** Waits for the incident `name` to satisfy `ok`; a timeout says what the incident was instead. */
async function incidentOf(c: PipelineCluster, name: string, ok: (i: NodeFence) => boolean, ms = 30_000) {
  let last: NodeFence | undefined;
  try {
    return await waitFor(
      `${name}: ${ok.toString()}`,
      async () => {
        last = (await incidents(c)).find((i) => i.metadata.name === name);
        return last && ok(last) ? last : undefined;
      },
      ms,
      50,
    );
  } catch (err) {
    const seen = last
      ? `phase ${last.status?.phase} (${last.status?.reason}: ${last.status?.message}), uid ${last.metadata.uid}, attempts: ${last.status ? summary(last) : "none"}`
      : "no such incident";
    throw new Error(`${(err as Error).message}; last seen: ${seen}`, { cause: err });
  }
}

// In the order written, also under --sequence.shuffle: (d) reads the Closed incident (a)
// leaves, and (c) leaves node-c Released, holding the storm guard's one slot that (a) and
// (b) need free ((d) frees it first).
describe("the last look before the off command", { shuffle: false }, () => {
  it("(a) a node that comes back between confirmation and the off command is not powered off", async () => {
    const c = env();
    const node = "node-a";
    const bmc = c.nodes.get(node)!.bmc;
    const name = incidentName(node, c.kwok.byName(node).bootId);
    const mark = bmc.stats.resets.length;
    bmc.faults.latencyMs = 1_200; // a cold session (discovery + login) takes seconds: a wide window
    const t0 = await c.hang(node);
    const fencing = await incidentOf(c, name, (i) => i.status?.phase === "Fencing");
    const tFencing = Date.now();
    await c.resume(node);
    const tResumed = Date.now();
    bmc.faults.latencyMs = 0;
    const closed = await incidentOf(c, name, (i) => i.status?.phase === "Closed", 40_000);
    const tClosed = Date.now();
    console.log(
      `(a) hang → Fencing ${tFencing - t0} ms; resumed ${tResumed - tFencing} ms later; Closed ${tClosed - tResumed} ms after the resume (${closed.status!.reason}: ${closed.status!.message}); attempts: ${summary(closed)}`,
    );
    expect(fencing.status!.round).toBe(1);
    expect(closed.status!.reason).toBe("NodeResponding");
    expect(bmc.stats.resets.slice(mark)).toEqual([]); // no power command carried out
    expect(bmc.power).toBe("On");
    const looked = closed.status!.attempts.filter((a) => a.result === "abandoned");
    expect(looked.length).toBeGreaterThanOrEqual(1);
    expect(looked.at(-1)!.lastLook).toMatchObject({ reason: "NodeResponding", back: true });
    expect(closed.status!.attempts.every((a) => a.commandAt === undefined)).toBe(true);
    expect(closed.status!.powerOffConfirmedAt).toBeUndefined();
  });

  it("(b) the look guards a retry round: back during the backoff, round 2 sends no off command", async () => {
    const c = env();
    const node = "node-b";
    const bmc = c.nodes.get(node)!.bmc;
    const name = incidentName(node, c.kwok.byName(node).bootId);
    const mark = bmc.stats.resets.length;
    bmc.faults.http5xx = 500; // round 1 fails: every request answered 500, nothing carried out
    const t0 = await c.hang(node);
    const failed = await incidentOf(c, name, (i) => i.status?.phase === "FenceFailed");
    const tFailed = Date.now();
    bmc.faults.http5xx = 0;
    await c.resume(node);
    const tResumed = Date.now();
    const closed = await incidentOf(c, name, (i) => i.status?.phase === "Closed", 40_000);
    console.log(
      `(b) hang → round 1 FenceFailed ${tFailed - t0} ms (${failed.status!.reason}); resumed ${tResumed - tFailed} ms later (backoff ${BACKOFF_MS} ms); Closed ${Date.now() - tResumed} ms after the resume; attempts: ${summary(closed)}`,
    );
    expect(tResumed - tFailed).toBeLessThan(BACKOFF_MS); // back before round 2 started
    expect(closed.status!.reason).toBe("NodeResponding");
    expect(closed.status!.round).toBeGreaterThanOrEqual(2);
    expect(bmc.stats.resets.slice(mark)).toEqual([]);
    expect(bmc.power).toBe("On");
    const last = closed.status!.attempts.at(-1)!;
    expect(last).toMatchObject({ result: "abandoned", lastLook: { reason: "NodeResponding" } });
    expect(last.round).toBeGreaterThanOrEqual(2);
  });

  it("(c) a crash is still fenced and released, the look included", async () => {
    const c = env();
    const node = "node-c";
    const bmc = c.nodes.get(node)!.bmc;
    const name = incidentName(node, c.kwok.byName(node).bootId);
    const t0 = await c.crash(node);
    const released = await incidentOf(c, name, (i) => i.status?.phase === "Released", 30_000);
    const took = Date.now() - t0;
    const st = released.status!;
    const proof = st.attempts.find((a) => a.result === "off-confirmed")!;
    const confirmedAt = Date.parse(st.timestamps.confirmed!);
    console.log(
      `(c) crash → Released ${took} ms; confirmed → off command ${Date.parse(proof.commandAt!) - confirmedAt} ms (round start → off command ${Date.parse(proof.commandAt!) - Date.parse(proof.startedAt)} ms, the look included); attempts: ${summary(released)}`,
    );
    expect(bmc.stats.resets.map((r) => r.type)).toContain("ForceOff");
    expect(st.attempts.some((a) => a.result === "abandoned")).toBe(false);
  });

  it("(d) a node found back, crashing later with the same boot, is fenced and released", async () => {
    const c = env();
    const node = "node-a";
    const bmc = c.nodes.get(node)!.bmc;
    const name = incidentName(node, c.kwok.byName(node).bootId);
    // (a) left node-a's incident Closed NodeResponding, on this boot
    const closed = await incidentOf(c, name, (i) => i.status?.phase === "Closed", 1_000);
    expect(closed.status!.reason).toBe("NodeResponding");
    // (c) left node-c Released, which holds the storm guard's one slot: bring it back first
    await c.reboot("node-c");
    await waitFor(
      "node-c's incident ended",
      async () =>
        !(await incidents(c)).some((i) => i.spec.nodeName === "node-c" && i.status?.phase === "Released"),
      30_000,
    );
    const mark = bmc.stats.resets.length;
    const t0 = await c.crash(node);
    const released = await incidentOf(
      c,
      name,
      (i) => i.metadata.uid !== closed.metadata.uid && i.status?.phase === "Released",
      30_000,
    );
    console.log(
      `(d) crash of ${node} (same boot, its incident closed ${t0 - Date.parse(closed.status!.timestamps.closed!)} ms before) → Released ${Date.now() - t0} ms; attempts: ${summary(released)}`,
    );
    expect(released.spec.bootId).toBe(closed.spec.bootId);
    expect(bmc.stats.resets.slice(mark).map((r) => r.type)).toContain("ForceOff");
  });
});
