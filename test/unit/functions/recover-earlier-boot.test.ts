// recover ends the incident an earlier boot left open when the node is Ready with a new
// boot, even if the new boot already has an incident of its own (a suspicion as it came
// back, one observer's misses): the stage executor over in-memory adapters, as
// app/host.ts wires recover.
import { describe, expect, test } from "vitest";
import { OUT_OF_SERVICE_TAINT } from "../../../core/decision.ts";
import { incidentName } from "../../../core/incident.ts";
import * as recover from "../../../functions/recover/handler.ts";
import { stageHandler } from "../../../infra/runtime/stage-executor.ts";
import {
  BOOT,
  CLUSTER3,
  FENCE,
  NEW_BOOT,
  T0,
  TRUSTED,
  at,
  condition,
  confirmed,
  evidence,
  incident,
  node,
  offAttempt,
  policy,
} from "../../scenarios/fixtures.ts";
import { MemoryCluster, handlerContext, memoryAdapters, TestClock } from "../../scenarios/memory-adapters.ts";

const NOW = T0 + 60_000;

describe("recover: the node is back with a new boot", () => {
  test.each([
    { phase: "Released" as const, ends: "Recovered", reason: "NodeRecovered" },
    { phase: "Blocked" as const, ends: "Closed", reason: "NodeRebooted" },
  ])("an open $phase incident of the old boot ends ($ends) though the new boot has one", async (c) => {
    const clock = new TestClock(NOW);
    const cluster = new MemoryCluster({ policy: policy(), nodes: CLUSTER3(), now: () => clock.now() });
    const old = confirmed("a", 0, {
      phase: c.phase,
      round: 1,
      attempts: [offAttempt(1, 0)],
      powerOffConfirmedAt: at(400),
    });
    old.metadata.creationTimestamp = at(0);
    cluster.seedIncident(old);
    const fresh = incident("a", { phase: "Suspected", evidence: [evidence("b", "a", 59_000)] }, NEW_BOOT);
    fresh.metadata.creationTimestamp = at(59_000);
    cluster.seedIncident(fresh);
    if (c.phase === "Released") cluster.nodes.get("a")!.taints = [{ ...OUT_OF_SERVICE_TAINT }];
    cluster.setNode(node("a", { bootId: NEW_BOOT }));

    const run = stageHandler(recover.stage, memoryAdapters(cluster), FENCE, { trustedConfirmers: TRUSTED });
    await run(condition("a", "True", NEW_BOOT, 60_000), handlerContext(clock, new AbortController().signal));

    const ended = cluster.incident(incidentName("a", BOOT.a))!.status!;
    expect(ended).toMatchObject({ phase: c.ends, reason: c.reason, recoveredBootId: NEW_BOOT });
    expect(cluster.nodes.get("a")!.taints ?? []).toEqual([]);
    expect(cluster.incident(incidentName("a", NEW_BOOT))!.status!.phase).toBe("Suspected");
  });
});
