// Needs real pipeline cluster: replicas dying mid-round, Leases expiring in real time.
// Liveness on the real stack (issue 14): an incident never stops half-way. Each scenario
// breaks the fencing path mid-round and checks that the incident still ends, within a
// bound stated from the policy, and ends recorded:
// - the fence replica driving a round dies with its node's API connections while the BMC
//   is stuck; once the BMC heals and the driver's Lease has expired, another replica's
//   reconciler records the round as interrupted and the retry fences the node;
// - a BMC slower than its level's budget, under a handler deadline (1.5 s) shorter than the
//   round: the round runs on its own deadline, every round ends recorded (FenceFailed with
//   its timed-out attempt), never left in Fencing, and the node is fenced once the BMC
//   answers in time again. (A round cut short by a deadline or shutdown is recorded too:
//   test/unit/infra/stage-executor.test.ts.)
// - the driving fence replica is stopped gracefully mid-round (a rolling update, a pod
//   deleted): it records the round on its way out and publishes that round's fence.failed,
//   so the event log holds every round (chaos seed 265 lost it: issue 14);
// - the node comes back with a new boot while its round runs (its node.condition event is
//   ignored then: FencingInProgress): once the round has ended FenceFailed, recover's
//   reconciler ends the incident (chaos seed 265 again: it stayed open, holding its
//   storm-guard slot, until the node's next boot).
import { describe, expect, it } from "vitest";
import { withEnv } from "../../harness/env/with-env.ts";
import { startPipelineCluster, type PipelineCluster } from "../../harness/env/pipeline-cluster.ts";
import type { NodeFence } from "../../core/incident.ts";
import { stageNames } from "../../functions/registry.ts";
import { EVENT_TYPES } from "../../events/catalog.ts";
import { incidents, waitFor } from "./pipeline-helpers.ts";
import { readEvents } from "./planned-helpers.ts";

const RECONCILE = { intervalMs: 1_000, stalledAfterMs: 1_000 };
/** The fencing Lease (policy timeouts.leaseDurationMs): above the round plus its 5 s recording margin. */
const LEASE_MS = 12_000;
const ROUND_MS = 5_000;

/** A cluster (the harness's default nodes unless named) whose rounds and Lease are the above. */
function roundCluster(nodes?: string[]) {
  return withEnv(async (scope) =>
    scope.add(
      await startPipelineCluster({
        ...(nodes ? { nodes } : {}),
        policy: {
          reconcile: RECONCILE,
          timeouts: { powerOffTimeoutMs: ROUND_MS, leaseDurationMs: LEASE_MS },
        },
      }),
    ),
  );
}

/** Crashes `victim` with its BMC stuck powering off; its incident once round 1 is under way, driver named. */
async function roundUnderWay(c: PipelineCluster, victim: string): Promise<NodeFence> {
  c.nodes.get(victim)!.bmc.faults.stuckPoweringOff = true;
  await c.crash(victim);
  return waitFor(
    "round 1 under way",
    async () =>
      (await incidents(c)).find(
        (i) => i.spec.nodeName === victim && i.status?.phase === "Fencing" && i.status.fencingBy,
      ),
    30_000,
    50,
  );
}

describe("a driving fence replica dies mid-round", () => {
  const NODES = ["node-a", "node-b", "node-c", "node-d"];
  const env = roundCluster(NODES);

  it("another replica finishes the round after the driver's Lease expired", async () => {
    const c = env();
    const victim = "node-a";
    const bmc = c.nodes.get(victim)!.bmc;
    const fencing = await roundUnderWay(c, victim);
    const driver = fencing.status!.fencingBy!;
    const driverNode = NODES.find((n) => driver.endsWith(n))!;
    const t0 = Date.now();
    await c.crashReplicas(driverNode, { functions: stageNames(), cutApi: true });
    bmc.faults.stuckPoweringOff = false;
    // Bound from the policy: the Lease runs out, a reconcile pass (interval + 20 % jitter)
    // records the interrupted round, the retry fences (one round) and releases.
    const bound = LEASE_MS + RECONCILE.intervalMs * 1.2 * 2 + ROUND_MS + 5_000;
    const released = await waitFor(
      "workloads released by another replica",
      async () =>
        (await incidents(c)).find(
          (i) => i.metadata.name === fencing.metadata.name && i.status?.phase === "Released",
        ),
      bound,
    );
    const took = Date.now() - t0;
    const st = released.status!;
    console.log(
      `driver ${driver} crashed mid-round; released ${took} ms later (bound ${bound} ms); attempts: ${st.attempts.map((a) => `r${a.round}:${a.by}:${a.result}`).join(", ")}`,
    );
    expect(st.fencingBy).not.toBe(driver);
    expect(st.round).toBeGreaterThanOrEqual(2);
    const proof = st.attempts.find((a) => a.result === "off-confirmed");
    expect(proof?.by).not.toBe(driver);
    // S3: nobody took over before the crashed driver's Lease (taken just before round 1's
    // Fencing write) had expired.
    expect(Date.parse(proof!.startedAt)).toBeGreaterThanOrEqual(
      Date.parse(fencing.status!.timestamps.fencing!) + LEASE_MS,
    );
  });
});

describe("a BMC slower than its level's budget, with a handler deadline shorter than the round", () => {
  const env = withEnv(async (scope) =>
    scope.add(
      await startPipelineCluster({
        policy: {
          reconcile: RECONCILE,
          fencing: { maxRounds: 100, retryBackoffMs: 500 },
          timeouts: { powerOffTimeoutMs: ROUND_MS, leaseDurationMs: LEASE_MS },
        },
        runtimeEnv: {
          FASTFENCE_HANDLER_TIMEOUT_MS: "1500",
          FASTFENCE_KUBE_TIMEOUT_MS: "1000",
        },
      }),
    ),
  );

  it("ends every round recorded, and fences once the BMC answers in time", async () => {
    const c = env();
    const victim = "node-a";
    const bmc = c.nodes.get(victim)!.bmc;
    bmc.faults.latencyMs = 3_000; // command + read-back take longer than the level's 5 s budget allows
    await c.crash(victim);
    const failed = await waitFor(
      "a round recorded as failed",
      async () =>
        (await incidents(c)).find(
          (i) => i.spec.nodeName === victim && i.status?.phase === "FenceFailed" && i.status.attempts.length,
        ),
      60_000,
    );
    const first = failed.status!.attempts[0]!;
    console.log(
      `round ${failed.status!.round} recorded: ${first.driver} ${first.result} ${first.errorCode ?? ""}`,
    );
    expect(first.result).not.toBe("off-confirmed");
    bmc.faults.latencyMs = 0;
    const released = await waitFor(
      "fenced and released once the BMC is fast again",
      async () =>
        (await incidents(c)).find(
          (i) => i.metadata.name === failed.metadata.name && i.status?.phase === "Released",
        ),
      60_000,
    );
    expect(released.status!.attempts.some((a) => a.result === "off-confirmed")).toBe(true);
  });
});

describe("a driving fence replica stopped gracefully mid-round", () => {
  const NODES = ["node-a", "node-b", "node-c", "node-d"];
  const env = roundCluster(NODES);

  it("records the round on its way out and publishes its fence.failed", async () => {
    const c = env();
    const bmc = c.nodes.get("node-a")!.bmc;
    const fencing = await roundUnderWay(c, "node-a");
    const name = fencing.metadata.name;
    const driver = fencing.status!.fencingBy!;
    const driverNode = NODES.find((n) => driver.endsWith(n))!;
    // Stopped while its off command waits for the read-back: the round is under way.
    await waitFor(
      "the off command at the BMC",
      async () => bmc.stats.resets.length > 0 || undefined,
      20_000,
      20,
    );
    await c.crashReplicas(driverNode, { functions: ["fence"] }); // a graceful stop: the API stays
    const recorded = await waitFor(
      "round 1 recorded by its driver",
      async () =>
        (await incidents(c)).find(
          (i) => i.metadata.name === name && i.status?.attempts.some((a) => a.round === 1 && a.by === driver),
        ),
      30_000,
    );
    expect(recorded.status!.attempts.find((a) => a.round === 1)!.result).not.toBe("off-confirmed");
    const event = await waitFor(
      "round 1's fence.failed in the event log",
      async () =>
        (await readEvents(c)).find(
          (e) => e.type === EVENT_TYPES.fenceFailed && e.data.incident === name && e.data.round === 1,
        ),
      30_000,
      500,
    );
    expect(event.source).toContain(driver);
  });
});

describe("a node back with a new boot while its round runs", () => {
  const env = roundCluster();

  it("ends the incident once the round has ended, without a later event", async () => {
    const c = env();
    const victim = "node-a";
    const fencing = await roundUnderWay(c, victim);
    const newBoot = await c.reboot(victim);
    // The round runs out (ROUND_MS, recorded within its margin), then one reconcile pass.
    const bound = ROUND_MS + 5_000 + RECONCILE.intervalMs * 1.2 * 2 + 5_000;
    const ended = await waitFor(
      "the incident ended by recover",
      async () =>
        (await incidents(c)).find(
          (i) => i.metadata.name === fencing.metadata.name && i.status?.phase === "Recovered",
        ),
      bound,
    );
    expect(ended.status!.recoveredBootId).toBe(newBoot);
    expect(ended.status!.attempts.every((a) => a.result !== "off-confirmed")).toBe(true);
  });
});
