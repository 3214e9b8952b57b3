// settlesWithin: the bounded wait that a replica's stop steps and the Kafka runtime's leave share.
import { describe, expect, it } from "vitest";
import { ManualClock, settlesWithin, systemClock } from "../../../core/clock.ts";

const flush = () => new Promise<void>((r) => setImmediate(r));

describe("settlesWithin", () => {
  it("is true when the work fulfils or rejects before the bound", async () => {
    const clock = new ManualClock(0);
    await expect(settlesWithin(clock, 1000, Promise.resolve("x"))).resolves.toBe(true);
    await expect(settlesWithin(clock, 1000, Promise.reject(new Error("no")))).resolves.toBe(true);
  });

  it("is false once the bound passes first, and the work goes on", async () => {
    const clock = new ManualClock(0);
    let finish!: () => void;
    let finished = false;
    const work = new Promise<void>((r) => (finish = r)).then(() => {
      finished = true;
    });
    let answer: boolean | undefined;
    void settlesWithin(clock, 1000, work).then((a) => (answer = a));
    clock.advance(999);
    await flush();
    expect(answer).toBeUndefined();
    clock.advance(1);
    await flush();
    expect(answer).toBe(false);
    finish();
    await work;
    expect(finished).toBe(true);
  });

  it("ends its timer when the work settles (the process is not held open)", async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const before = timers();
    const t0 = Date.now();
    await expect(settlesWithin(systemClock, 60_000, Promise.resolve())).resolves.toBe(true);
    expect(timers()).toBe(before);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
