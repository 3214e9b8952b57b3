// The dispatcher gives every delivered event exactly one recorded outcome (S5): invalid
// → dead-letter with the issues; handled → processed/ignored with emitted envelopes that
// continue the trace; retriable failures retried, then dead-lettered; rejected →
// dead-letter; unsubscribed types skipped; the handler deadline, which a handler may
// extend (a power-off round) but never shorten. Plain data, a manual clock, no servers.
import { describe, expect, it } from "vitest";
import { ManualClock, systemClock, type Clock } from "../../../core/clock.ts";
import { FastfenceError, InvalidInputError, RejectedEventError } from "../../../core/errors.ts";
import { envelope, type FfEvent } from "../../../events/envelope.ts";
import type { StageInfo } from "../../../functions/contract.ts";
import type { EventHandler } from "../../../infra/runtime/contract.ts";
import { createLogger } from "../../../infra/log.ts";
import { createFunctionMetrics } from "../../../infra/metrics.ts";
import {
  createDispatcher,
  handlerDeadline,
  SHUTDOWN_SETTLE_MS,
  type CatalogView,
} from "../../../infra/runtime/dispatch.ts";

const catalog: CatalogView = {
  parse: (raw) => {
    const r = raw as FfEvent;
    if (!r || typeof r.type !== "string")
      throw new InvalidInputError("FF_INVALID_EVENT", "invalid event", ["type: required"]);
    return r;
  },
  topicOf: () => "t",
  deadLetterTopic: "dlq",
};

function setup(
  handler: EventHandler,
  metrics = createFunctionMetrics({ defaultMetrics: false }),
  clock: Clock = { now: () => Date.now(), sleep: async () => undefined },
) {
  const def: StageInfo = {
    name: "f",
    description: "",
    subscriptions: [{ topic: "t", types: ["io.fastfence.a.v1"] }],
    emits: ["io.fastfence.b.v1"],
    critical: true,
  };
  return createDispatcher({
    def,
    handler,
    catalog,
    source: "/fastfence/f/r1",
    clock,
    log: createLogger("f", { level: "silent" }),
    metrics,
    config: { maxAttempts: 3, retryBackoffMs: 1, handlerTimeoutMs: 200 },
  });
}

const ev = envelope(
  { type: "io.fastfence.a.v1", subject: "n1", ffincident: "n1-x", data: {} },
  "/fastfence/s/r",
  Date.now(),
);
const signal = new AbortController().signal;

describe("dispatcher", () => {
  it("dead-letters invalid input with the issues", async () => {
    const d = setup(async () => ({ outcome: { kind: "processed" }, emit: [] }));
    const r = await d.dispatch(() => ({}), signal);
    expect(r.kind).toBe("dead-letter");
    if (r.kind === "dead-letter") expect((r.error as InvalidInputError).issues).toEqual(["type: required"]);
  });

  it("skips types it does not subscribe to", async () => {
    const d = setup(async () => ({ outcome: { kind: "processed" }, emit: [] }));
    expect((await d.dispatch(() => ({ ...ev, type: "io.fastfence.other.v1" }), signal)).kind).toBe("skipped");
  });

  it("completes emitted events into envelopes that continue the trace and carry the incident", async () => {
    const d = setup(async () => ({
      outcome: { kind: "processed" },
      emit: [{ type: "io.fastfence.b.v1", subject: "n1", data: { y: 1 } }],
    }));
    const r = await d.dispatch(() => ev as never, signal);
    expect(r.kind).toBe("done");
    if (r.kind !== "done") return;
    const [out] = r.emitted;
    expect(out).toMatchObject({
      type: "io.fastfence.b.v1",
      source: "/fastfence/f/r1",
      ffincident: "n1-x",
      data: { y: 1 },
    });
    expect(out!.traceparent!.split("-")[1]).toBe(ev.traceparent!.split("-")[1]);
    expect(out!.traceparent!.split("-")[2]).not.toBe(ev.traceparent!.split("-")[2]);
  });

  it("retries a retriable failure and succeeds", async () => {
    let calls = 0;
    const d = setup(async () => {
      if (++calls < 3) throw new FastfenceError("FF_KUBE_UNAVAILABLE", "api down", { retriable: true });
      return { outcome: { kind: "processed" }, emit: [] };
    });
    expect((await d.dispatch(() => ev as never, signal)).kind).toBe("done");
    expect(calls).toBe(3);
  });

  it("dead-letters after the last attempt, and at once for a non-retriable error", async () => {
    let calls = 0;
    const d = setup(async () => {
      calls++;
      throw new FastfenceError("FF_KUBE_UNAVAILABLE", "api down", { retriable: true });
    });
    const r = await d.dispatch(() => ev as never, signal);
    expect(r.kind === "dead-letter" && r.error.code).toBe("FF_KUBE_UNAVAILABLE");
    expect(calls).toBe(3);
    calls = 0;
    const d2 = setup(async () => {
      calls++;
      throw new Error("boom");
    });
    expect((await d2.dispatch(() => ev as never, signal)).kind).toBe("dead-letter");
    expect(calls).toBe(1);
  });

  it("dead-letters a rejected event with the reason and its stable code", async () => {
    const d = setup(async () => ({
      outcome: {
        kind: "rejected",
        code: "MissingResourceVersion",
        reason: "incident has no resourceVersion",
      },
      emit: [],
    }));
    const r = await d.dispatch(() => ev as never, signal);
    expect(r.kind === "dead-letter" && r.error.message).toBe("incident has no resourceVersion");
    expect(r.kind === "dead-letter" && r.error).toBeInstanceOf(RejectedEventError);
    expect(r.kind === "dead-letter" && r.error).toMatchObject({
      code: "FF_INVALID_EVENT",
      reasonCode: "MissingResourceVersion",
      retriable: false,
    });
    if (r.kind === "dead-letter")
      expect(r.error.toJSON()).toMatchObject({ reasonCode: "MissingResourceVersion" });
  });

  it("counts a refusal of untrusted input in fastfence_inputs_refused_total{stage,reason}; other rejections not", async () => {
    const metrics = createFunctionMetrics({ defaultMetrics: false });
    let code: "BadSignature" | "MissingResourceVersion" = "BadSignature";
    const d = setup(async () => ({ outcome: { kind: "rejected", code, reason: "r" }, emit: [] }), metrics);
    expect((await d.dispatch(() => ev as never, signal)).kind).toBe("dead-letter");
    code = "MissingResourceVersion";
    expect((await d.dispatch(() => ev as never, signal)).kind).toBe("dead-letter");
    const values = (await metrics.inputsRefused.get()).values;
    expect(values.map((v) => [v.labels, v.value])).toEqual([[{ stage: "f", reason: "BadSignature" }, 1]]);
  });

  it("records an ignored outcome with its code", async () => {
    const d = setup(async () => ({
      outcome: { kind: "ignored", code: "PhasePassed", reason: "incident n1-x already FencedOff" },
      emit: [],
    }));
    const r = await d.dispatch(() => ev as never, signal);
    expect(r).toMatchObject({ kind: "done", outcome: { kind: "ignored", code: "PhasePassed" }, emitted: [] });
  });

  it("times a hung handler out", async () => {
    const d = setup(() => new Promise(() => undefined));
    const r = await d.dispatch(() => ev as never, signal);
    expect(r.kind).toBe("dead-letter");
  });

  it("lets the handler extend its deadline (a power-off round), never shorten it", async () => {
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // handlerTimeoutMs is 200: extended to 600 ms from now, a 400 ms handler finishes
    const d = setup(async (_e, ctx) => {
      ctx.extendDeadline(Date.now() + 600);
      ctx.extendDeadline(Date.now() + 50); // earlier: ignored
      await sleep(400);
      return { outcome: { kind: "processed" }, emit: [] };
    });
    expect(await d.dispatch(() => ev as never, signal)).toMatchObject({ kind: "done" });
    // and the extended deadline still ends a handler that overruns it
    let seen: AbortSignal | undefined;
    const hung = setup((_e, ctx) => {
      seen = ctx.signal;
      ctx.extendDeadline(Date.now() + 300);
      return new Promise(() => undefined);
    });
    const t0 = Date.now();
    const r = await hung.dispatch(() => ev as never, signal);
    expect(r.kind).toBe("dead-letter");
    if (r.kind === "dead-letter")
      expect(r.error.message).toMatch(/handler exceeded its deadline of 3\d\d ms/);
    expect(seen?.aborted).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3 * 290); // 3 attempts, each at its extended deadline
  });
});

describe("a delivery cut short by the runtime's shutdown", () => {
  /** A handler that, once aborted, records its result on the way out for `recordMs`. */
  const recordsOnTheWayOut =
    (recordMs: number): EventHandler =>
    (_e, ctx) =>
      new Promise((resolve) =>
        ctx.signal.addEventListener("abort", () =>
          setTimeout(
            () =>
              resolve({
                outcome: { kind: "processed", detail: "round recorded as failed" },
                emit: [{ type: "io.fastfence.b.v1", subject: "n1", ffincident: "n1-x", data: {} }],
              }),
            recordMs,
          ),
        ),
      );

  it("delivers the outcome and events its handler records on the way out", async () => {
    const d = setup(recordsOnTheWayOut(30), undefined, systemClock);
    const stop = new AbortController();
    const r = d.dispatch(() => ev as never, stop.signal);
    setTimeout(() => stop.abort(new FastfenceError("FF_CANCELLED", "runtime stopping")), 20);
    const out = await r;
    expect(out.kind).toBe("done");
    if (out.kind === "done") expect(out.emitted.map((e) => e.type)).toEqual(["io.fastfence.b.v1"]);
  });

  it("leaves the event for redelivery when the handler fails on the abort, without waiting", async () => {
    const d = setup(
      (_e, ctx) =>
        new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason))),
      undefined,
      systemClock,
    );
    const stop = new AbortController();
    const r = d.dispatch(() => ev as never, stop.signal);
    const t0 = Date.now();
    stop.abort(new FastfenceError("FF_CANCELLED", "runtime stopping"));
    const out = await r;
    expect(out.kind).toBe("dead-letter");
    if (out.kind === "dead-letter") expect(out.error.code).toBe("FF_CANCELLED");
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("starts no handler once the runtime is stopping", async () => {
    let started = false;
    const d = setup(async () => {
      started = true;
      return { outcome: { kind: "processed" }, emit: [] };
    });
    const stop = new AbortController();
    stop.abort(new FastfenceError("FF_CANCELLED", "runtime stopping"));
    const out = await d.dispatch(() => ev as never, stop.signal);
    expect(out.kind).toBe("dead-letter");
    if (out.kind === "dead-letter") expect(out.error.code).toBe("FF_CANCELLED");
    expect(started).toBe(false);
  });

  it("waits at most SHUTDOWN_SETTLE_MS for a handler that does not settle", async () => {
    const clock = new ManualClock(0);
    const d = setup(() => new Promise(() => undefined), undefined, clock);
    const stop = new AbortController();
    let settled = false;
    const r = d.dispatch(() => ev as never, stop.signal).finally(() => (settled = true));
    stop.abort(new FastfenceError("FF_CANCELLED", "runtime stopping"));
    await new Promise((res) => setTimeout(res, 20));
    clock.advance(SHUTDOWN_SETTLE_MS - 1);
    await new Promise((res) => setTimeout(res, 20));
    expect(settled).toBe(false);
    clock.advance(1);
    const out = await r;
    expect(out.kind).toBe("dead-letter");
    if (out.kind === "dead-letter") expect(out.error.code).toBe("FF_CANCELLED");
  });
});

describe("handlerDeadline", () => {
  it("aborts at now + timeout, moves only later, and clears", async () => {
    const clock = new ManualClock(1000);
    const ctrl = new AbortController();
    const dl = handlerDeadline(ctrl, clock, 100);
    expect(dl.at()).toBe(1100);
    dl.extend(5000);
    dl.extend(2000);
    expect(dl.at()).toBe(5000);
    dl.clear();
    await new Promise((r) => setTimeout(r, 150));
    expect(ctrl.signal.aborted).toBe(false);
  });
});
