// Needs real pipeline cluster: a crash's release timed under a flood of bad Kafka records.
// A flood does not delay a real crash's release beyond budget (issue 14), on the real stack:
// four nodes, every component as its own identity. First a plain crash of node-a is timed;
// then node-b crashes while tens of thousands of malformed records are written to the
// observation and suspicion topics by the principals allowed to write them (the event
// source's and detect's Kafka users), as a compromised or broken replica would. The
// flooded crash must be released within the budget of the issue: 2× the plain crash of the
// same run (with a 5 s floor, for a plain crash measured on a quiet machine).
//
// node-b is the node whose ring observers were node-a and node-d (core/ring.ts, k = 2), so
// this is also a second failure soon after a first one that observed it: until 2026-12-04
// the flooded crash took about 40 s, and it was not the flood. node-a, fenced and off, was
// still on the probe ring, so node-b had one live observer of its two, and confirm waited
// for node-b's NotReady condition (the node controller's 40 s grace) as the second
// evidence. A fenced-off node (out-of-service taint) is now off the ring, so node-c takes
// over at once. The flood's own cost, measured apart with node-d as the second victim:
// 4268 ms with one dead letter per bad record and replica, 2454 ms since malformed records
// of a partition handed over together share one (infra/runtime/dead-letter.ts); the rest is
// four detect and four confirm replicas working through 20 000 records each on this
// process's one core, where a cluster runs each replica in its own pod.
//
// `make test` holds the flooded crash to REGRESSION_BOUND_MS (the observer gap comes back
// as 40 s); the budget is timed only with FASTFENCE_RUN_TIMED=1, on a quiet machine:
//   FASTFENCE_RUN_TIMED=1 node node_modules/vitest/vitest.mjs run --project integration test/integration/pipeline-flood.test.ts
import { describe, expect, it } from "vitest";
import { Kafka, logLevel } from "kafkajs";
import { TOPICS } from "../../events/catalog.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { startPipelineCluster, type PipelineCluster } from "../../harness/env/pipeline-cluster.ts";
import { incidents, waitFor } from "./pipeline-helpers.ts";

const NODES = ["node-a", "node-b", "node-c", "node-d"];
/** Malformed records per topic. */
const FLOOD = 20_000;
/**
 * What `make test` holds the flooded crash to: far below the 40 s of the observer gap, far
 * above the budget's 5 s, which this shared 2-core machine came within 0.6 s of in a full
 * `make test` (2436–4480 ms in three runs); the budget itself is checked with FASTFENCE_RUN_TIMED=1.
 */
const REGRESSION_BOUND_MS = 15_000;

async function releasedMs(c: PipelineCluster, victim: string, t0: number): Promise<number> {
  const inc = await waitFor(
    `${victim} released`,
    async () =>
      (await incidents(c)).find((i) => i.spec.nodeName === victim && i.status?.phase === "Released"),
    90_000,
  );
  return Date.parse(inc.status!.timestamps.released!) - t0;
}

/** Writes `n` malformed records to `topic` as `principal`, in batches, spread over its partitions. */
async function flood(c: PipelineCluster, principal: "event-source" | "detect", topic: string, n: number) {
  const producer = new Kafka({
    clientId: `flood-${principal}`,
    brokers: c.kafka.bootstrap.split(","),
    ...c.kafka.clientSecurity(principal),
    logLevel: logLevel.NOTHING,
  }).producer({ allowAutoTopicCreation: false });
  await producer.connect();
  try {
    for (let i = 0; i < n; i += 2_000) {
      const batch = Array.from({ length: Math.min(2_000, n - i) }, (_, j) =>
        (i + j) % 2
          ? { value: `not a cloud event ${i + j} {` } // no ce_* headers at all
          : {
              value: JSON.stringify({ node: 42 }),
              headers: {
                ce_specversion: "1.0",
                ce_type: "io.fastfence.node.observed.v1",
                ce_id: `x${i + j}`,
              },
            },
      );
      await producer.send({ topic, acks: 1, messages: batch });
    }
  } finally {
    await producer.disconnect();
  }
}

describe("a flood of malformed records during a crash, of a node whose observer died first", () => {
  const env = withEnv(async (scope) =>
    scope.add(
      await startPipelineCluster({
        nodes: NODES,
        // two nodes die in this file: both may be fenced (every node carries the control-plane role)
        policy: {
          stormGuard: { maxConcurrentFenced: 2, maxFraction: 0.5 },
          controlPlane: { protectEtcdQuorum: false },
        },
      }),
    ),
  );

  it("does not push the crashed node's release beyond budget", async () => {
    const c = env();
    const plain = await releasedMs(c, "node-a", await c.crash("node-a"));
    const started = Date.now();
    const writing = Promise.all([
      flood(c, "event-source", TOPICS.observations, FLOOD),
      flood(c, "detect", TOPICS.suspicions, FLOOD),
    ]).then(() => Date.now() - started);
    await new Promise((r) => setTimeout(r, 300)); // the flood is under way
    const t0 = await c.crash("node-b");
    const flooded = await releasedMs(c, "node-b", t0);
    const writtenMs = await writing;
    const budget = Math.max(2 * plain, 5_000);
    console.log(
      `plain crash released in ${plain} ms; with ${2 * FLOOD} malformed records (written in ${writtenMs} ms) ${flooded} ms; budget ${budget} ms`,
    );
    // Always: far from the node controller's 40 s grace that a dead observer on the ring cost.
    expect(flooded).toBeLessThan(REGRESSION_BOUND_MS);
    // The budget, timed: with FASTFENCE_RUN_TIMED=1 on a quiet machine.
    if (process.env.FASTFENCE_RUN_TIMED === "1") expect(flooded).toBeLessThanOrEqual(budget);
  });
});
