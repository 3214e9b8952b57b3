// The dispatcher gives every delivered event exactly one recorded outcome (S5): invalid
// → dead-letter with the issues; handled → processed/ignored with emitted envelopes that
// continue the trace; retriable failures retried, then dead-lettered; rejected →
// dead-letter; unsubscribed types skipped; the handler deadline, which a handler may
// extend (a power-off round) but never shorten. Plain data, a manual clock, no servers.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../../core/clock.ts";
import { FastfenceError, InvalidInputError, RejectedEventError } from "../../../core/errors.ts";
import { envelope, type FfEvent } from "../../../events/envelope.ts";
import type { StageInfo } from "../../../functions/contract.ts";
import type { EventHandler } from "../../../infra/runtime/contract.ts";
import { createLogger } from "../../../infra/log.ts";
import { createFunctionMetrics } from "../../../infra/metrics.ts";
import { createDispatcher, handlerDeadline, type CatalogView } from "../../../infra/runtime/dispatch.ts";

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

function setup(handler: EventHandler, metrics = createFunctionMetrics({ defaultMetrics: false })) {
  const def: StageInfo = {
    name: "f",
    description: "",
    subscriptions: [{ topic: "t", types: ["io.fastfence.a.v1"] }],
    emits: ["io.fastfence.b.v1"],
    critical: true,
  };
  const clock = { now: () => Date.now(), sleep: async () => undefined };
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
