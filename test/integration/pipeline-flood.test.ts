// A flood does not delay a real crash's release beyond budget (issue 14), on the real stack:
// four nodes, every component as its own identity. First a plain crash of node-a is timed;
// then node-b crashes while tens of thousands of malformed records are written to the
// observation and suspicion topics by the principals allowed to write them (the event
// source's and detect's Kafka users), as a compromised or broken replica would. The
// flooded crash must be released within the budget of the issue: 2× the plain crash of the
// same run (with a 5 s floor, for a plain crash measured on a quiet machine).
//
// KNOWN GAP, so this file runs only with FASTFENCE_RUN_KNOWN_GAPS=1 (not in `make test`):
// on 2026-12-02 the plain crash was released in 4581 ms and the flooded one in 40557 ms
// (budget 9162 ms): every detect and confirm replica (one group each, four nodes) decodes
// and dead-letters every bad record on two shared cores, and the real records wait behind
// them on their partitions. Again on 2026-12-04 (e2ebd2e): plain 1042 ms, flooded 39717 ms,
// the flood itself taking 40 s to write; a CPU profile of the test process (which hosts every
// replica) found it idle 59 % of the run, so the wait is not in fastfence's handling but most
// likely in the three brokers on two cores: every consumer replica writes its own dead
// letter of every bad record (4 detect and 4 confirm replicas × 20 000 each, acks=all,
// replicated, over TLS). The next step is one dead letter per run of bad records of a
// partition (offsets and reasons). It is the acceptance test of issue 14's flood item; run it with
//   FASTFENCE_RUN_KNOWN_GAPS=1 node node_modules/vitest/vitest.mjs run --project integration test/integration/pipeline-flood.test.ts
import { describe, expect, it } from "vitest";
import { Kafka, logLevel } from "kafkajs";
import { TOPICS } from "../../events/catalog.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { startPipelineCluster, type PipelineCluster } from "../../harness/env/pipeline-cluster.ts";
import { incidents, waitFor } from "./pipeline-helpers.ts";

const NODES = ["node-a", "node-b", "node-c", "node-d"];
/** Malformed records per topic. */
const FLOOD = 20_000;

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

describe.runIf(process.env.FASTFENCE_RUN_KNOWN_GAPS === "1")(
  "a flood of malformed records during a crash",
  () => {
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
      ]);
      await new Promise((r) => setTimeout(r, 300)); // the flood is under way
      const t0 = await c.crash("node-b");
      const flooded = await releasedMs(c, "node-b", t0);
      await writing;
      const budget = Math.max(2 * plain, 5_000);
      console.log(
        `plain crash released in ${plain} ms; with ${2 * FLOOD} malformed records (written in ${Date.now() - started} ms) ${flooded} ms; budget ${budget} ms`,
      );
      expect(flooded).toBeLessThanOrEqual(budget);
    });
  },
);
