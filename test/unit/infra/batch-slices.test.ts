// S5 with batched dead letters: a fetched batch is handed over in slices, and a slice's
// offsets are resolved (so committed) only after its outcomes and every earlier slice's
// were recorded, even when a later slice settles first; a failed slice resolves nothing
// from itself on. Plain data stands in for kafkajs's batch payload (no broker).
import type { EachBatchPayload } from "kafkajs";
import { describe, expect, it } from "vitest";
import { inSlices } from "../../../infra/bus/kafkajs-subscribe.ts";

function payload(n: number, resolved: string[]): EachBatchPayload {
  const messages = Array.from({ length: n }, (_, i) => ({
    offset: String(i),
    key: null,
    value: Buffer.from("x"),
    headers: {},
    timestamp: "0",
    attributes: 0,
  }));
  return {
    batch: { topic: "t", partition: 0, messages },
    resolveOffset: (o: string) => void resolved.push(o),
    heartbeat: async () => undefined,
    isRunning: () => true,
    isStale: () => false,
  } as unknown as EachBatchPayload;
}

describe("inSlices", () => {
  it("resolves each slice's last offset in order, only after it and the earlier slices settled", async () => {
    const resolved: string[] = [];
    const gates: (() => void)[] = [];
    const sizes: number[] = [];
    const run = inSlices(async (recs) => {
      sizes.push(recs.length);
      return { settled: new Promise<void>((r) => gates.push(r)) };
    })(payload(2500, resolved));
    await new Promise((r) => setTimeout(r, 10));
    expect(sizes).toEqual([1000, 1000, 500]); // all handed over while none has settled
    gates[2]!();
    gates[1]!();
    await new Promise((r) => setTimeout(r, 10));
    expect(resolved).toEqual([]); // the first slice has not settled
    gates[0]!();
    await run;
    expect(resolved).toEqual(["999", "1999", "2499"]);
  });

  it("a slice whose outcomes fail to be recorded resolves nothing from it on, and the batch fails", async () => {
    const resolved: string[] = [];
    let n = 0;
    const run = inSlices(async () => ({
      settled: n++ === 1 ? Promise.reject(new Error("dead letter not acked")) : Promise.resolve(),
    }))(payload(3000, resolved));
    await expect(run).rejects.toThrow("dead letter not acked");
    expect(resolved).toEqual(["999"]);
  });
});
