// stopInOrder: steps run one at a time in the given order; a step past its bound is left
// behind with a warning naming it and the next step runs; a failing step is logged and
// does not stop the rest.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../core/clock.ts";
import { stopInOrder, stopReplica } from "../../../app/stop-steps.ts";
import { createLogger } from "../../../infra/log.ts";

function recordingLog() {
  const lines: { msg: string; step?: string }[] = [];
  const log = createLogger("test", { level: "warn" });
  log.warn = ((obj: { step?: string }, msg: string) =>
    void lines.push({ msg, step: obj.step })) as typeof log.warn;
  return { log, lines };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("stopInOrder", () => {
  it("runs the steps one after the other, in order", async () => {
    const order: string[] = [];
    const { log, lines } = recordingLog();
    await stopInOrder(
      ["runtime", "reconciler", "bus"].map((name) => ({
        name,
        run: async () => {
          order.push(`${name} start`);
          await tick();
          order.push(`${name} end`);
        },
      })),
      { clock: new ManualClock(), log },
    );
    expect(order).toEqual([
      "runtime start",
      "runtime end",
      "reconciler start",
      "reconciler end",
      "bus start",
      "bus end",
    ]);
    expect(lines).toEqual([]);
  });

  it("goes on after a step that does not end within its bound, naming it", async () => {
    const clock = new ManualClock();
    const { log, lines } = recordingLog();
    const ran: string[] = [];
    const stopped = stopInOrder(
      [
        { name: "background loops", run: () => new Promise(() => undefined) }, // never ends
        { name: "the bus", run: () => void ran.push("bus") },
      ],
      { clock, log, stepMs: 5_000 },
    );
    let ended = false;
    void stopped.then(() => (ended = true));
    await tick();
    clock.advance(4_999);
    await tick();
    expect(ended).toBe(false);
    expect(ran).toEqual([]);
    clock.advance(1);
    await stopped;
    expect(ran).toEqual(["bus"]);
    expect(lines).toEqual([
      {
        msg: "stopping background loops took longer than 5000 ms; going on without waiting for it",
        step: "background loops",
      },
    ]);
  });

  it("logs a failing step and runs the next", async () => {
    const { log, lines } = recordingLog();
    const ran: string[] = [];
    await stopInOrder(
      [
        {
          name: "the reconciler",
          run: () => {
            throw new Error("boom");
          },
        },
        { name: "tracing", run: async () => void ran.push("tracing") },
      ],
      { clock: new ManualClock(), log },
    );
    expect(ran).toEqual(["tracing"]);
    expect(lines).toEqual([{ msg: "stopping the reconciler failed", step: "the reconciler" }]);
  });

  it("a replica stops handling first, and a background loop that hangs (a BMC not answering) holds nothing after it", async () => {
    const clock = new ManualClock();
    const { log, lines } = recordingLog();
    const order: string[] = [];
    const stopped = stopReplica(
      {
        rt: { stop: async () => void order.push("runtime") },
        reconciler: { stop: async () => void order.push("reconciler") },
        report: { stop: () => new Promise<void>(() => order.push("background (hangs)")) },
        ownBus: { close: async () => void order.push("bus") },
        tracing: { shutdown: async () => void order.push("tracing") },
      },
      { clock, log, stepMs: 5_000 },
    );
    for (let i = 0; i < 5; i++) await tick();
    expect(order).toEqual(["runtime", "reconciler", "background (hangs)"]);
    clock.advance(5_000);
    await stopped;
    expect(order).toEqual(["runtime", "reconciler", "background (hangs)", "bus", "tracing"]);
    expect(lines.map((l) => l.step)).toEqual(["the background loops"]);
  });
});
