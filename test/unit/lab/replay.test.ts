// The chaos `replay` plan (lab/replay.ts): each topic's records are written again unchanged,
// as the principal whose ACLs allow writing that topic; observations only the newest
// REPLAY_OBSERVATIONS; dead letters never.
import { describe, expect, test } from "vitest";
import { TOPICS } from "../../../events/catalog.ts";
import { keepaliveRecord } from "../../../events/keepalive.ts";
import type { BusRecord } from "../../../infra/bus/bus.ts";
import { REPLAY_OBSERVATIONS, REPLAY_TOPICS, replayPlan, writerOf } from "../../../lab/replay.ts";

const rec = (topic: string, n: number): BusRecord => ({
  topic,
  partition: n % 3,
  offset: String(n),
  timestamp: 1_000 + n,
  key: `node-${n % 3}`,
  value: Buffer.from(`{"n":${n}}`),
  headers: { ce_id: `id-${topic}-${n}` },
});

describe("replay plan", () => {
  test("every replayed topic has a writer, the stage that publishes it", () => {
    expect(REPLAY_TOPICS).not.toContain(TOPICS.deadLetter);
    expect(writerOf(TOPICS.observations)).toBe("event-source");
    expect(writerOf(TOPICS.fenceRequests)).toBe("confirm");
    expect(writerOf(TOPICS.fenceResults)).toBe("fence");
    for (const t of REPLAY_TOPICS) expect(writerOf(t), t).toBeDefined();
    expect(writerOf(TOPICS.deadLetter)).not.toBe("audit");
  });

  test("records go back unchanged, per topic in the order read, as that topic's writer", () => {
    const records = [rec(TOPICS.fenceRequests, 1), rec(TOPICS.suspicions, 2), rec(TOPICS.fenceRequests, 3)];
    const { batches, unwritable } = replayPlan(records);
    expect(unwritable).toBe(0);
    const fr = batches.find((b) => b.topic === TOPICS.fenceRequests)!;
    expect(fr.principal).toBe("confirm");
    expect(fr.records).toEqual([
      { key: "node-1", value: Buffer.from('{"n":1}'), headers: { ce_id: `id-${TOPICS.fenceRequests}-1` } },
      { key: "node-0", value: Buffer.from('{"n":3}'), headers: { ce_id: `id-${TOPICS.fenceRequests}-3` } },
    ]);
    expect(batches.find((b) => b.topic === TOPICS.suspicions)!.principal).toBe("detect");
  });

  test("keepalive records are not replayed", () => {
    const k = { ...rec(TOPICS.fenceRequests, 4), ...keepaliveRecord("/fastfence/confirm/c-0") };
    const { batches } = replayPlan([k, rec(TOPICS.fenceRequests, 5)]);
    expect(batches.map((b) => b.records.length)).toEqual([1]);
  });

  test("only the newest observations, and never a dead letter", () => {
    const obs = Array.from({ length: REPLAY_OBSERVATIONS + 50 }, (_, i) =>
      rec(TOPICS.observations, i),
    ).reverse();
    const { batches } = replayPlan([...obs, rec(TOPICS.deadLetter, 9)]);
    expect(batches.map((b) => b.topic)).toEqual([TOPICS.observations]);
    const values = batches[0]!.records.map((r) => JSON.parse(r.value!.toString()) as { n: number });
    expect(values).toHaveLength(REPLAY_OBSERVATIONS);
    expect(Math.min(...values.map((v) => v.n))).toBe(50);
  });
});
