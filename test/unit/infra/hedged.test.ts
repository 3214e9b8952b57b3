import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { hedgedAttempts } from "../../../infra/kube/hedged.ts";

class Answer extends Error {}
const isAnswer = (e: unknown) => e instanceof Answer;
const never = () => new Promise<string>(() => undefined);

describe("hedged reads across API servers", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  /** Runs with `behave` per server; returns the result and which servers were asked, in order. */
  async function run(behave: Record<string, () => Promise<string>>, hedgeAfterMs = 500) {
    const asked: string[] = [];
    const p = hedgedAttempts(
      Object.keys(behave),
      (s) => {
        asked.push(s);
        return behave[s]!();
      },
      { hedgeAfterMs, isAnswer },
    );
    await vi.advanceTimersByTimeAsync(5_000);
    return { r: await p, asked };
  }

  it("a first server that answers at once is the only one asked", async () => {
    const { r, asked } = await run({ a: async () => "A", b: async () => "B" });
    expect(r).toEqual({ kind: "value", value: "A", server: "a", failed: [] });
    expect(asked).toEqual(["a"]);
  });

  it("a silent first server: the next is asked after the hedge delay, and its answer wins", async () => {
    const { r, asked } = await run({ a: never, b: async () => "B", c: async () => "C" });
    expect(r).toEqual({ kind: "value", value: "B", server: "b", failed: [] });
    expect(asked).toEqual(["a", "b"]);
  });

  it("not before the hedge delay", async () => {
    const asked: string[] = [];
    void hedgedAttempts(["a", "b"], (s) => (asked.push(s), never()), { hedgeAfterMs: 500, isAnswer });
    await vi.advanceTimersByTimeAsync(499);
    expect(asked).toEqual(["a"]);
    await vi.advanceTimersByTimeAsync(1);
    expect(asked).toEqual(["a", "b"]);
  });

  it("a server that fails without an answer hands over at once, and is named", async () => {
    const asked: string[] = [];
    const p = hedgedAttempts(
      ["a", "b"],
      (s) => (asked.push(s), s === "a" ? Promise.reject(new Error("ECONNREFUSED")) : Promise.resolve("B")),
      { hedgeAfterMs: 10_000, isAnswer },
    );
    expect(await p).toEqual({ kind: "value", value: "B", server: "b", failed: ["a"] });
  });

  it("an HTTP answer is the answer: no other server is asked", async () => {
    const err = new Answer("404");
    const { r, asked } = await run({ a: () => Promise.reject(err), b: async () => "B" });
    expect(r).toEqual({ kind: "answer", error: err, server: "a", failed: [] });
    expect(asked).toEqual(["a"]);
  });

  it("no server answers: none, with every server named and the last error", async () => {
    const last = new Error("timeout c");
    const { r, asked } = await run({
      a: () => Promise.reject(new Error("timeout a")),
      b: () => Promise.reject(new Error("timeout b")),
      c: () => Promise.reject(last),
    });
    expect(r).toEqual({ kind: "none", error: last, failed: ["a", "b", "c"] });
    expect(asked).toEqual(["a", "b", "c"]);
  });

  it("no server to ask is an error, not a hang", async () => {
    const r = await hedgedAttempts([], never, { hedgeAfterMs: 1, isAnswer });
    expect(r.kind).toBe("none");
  });

  describe("held answers (a guarded write's conflict)", () => {
    class Conflict extends Answer {}
    const held = (e: unknown) => e instanceof Conflict;
    const after = <T>(ms: number, f: () => T) =>
      new Promise<T>((res, rej) =>
        setTimeout(() => {
          try {
            res(f());
          } catch (e) {
            rej(e);
          }
        }, ms),
      );

    it("a conflict waits for the copy in flight, which wins if it lands", async () => {
      const asked: string[] = [];
      const p = hedgedAttempts(
        ["a", "b", "c"],
        (s) => {
          asked.push(s);
          if (s === "a") return after(800, () => "A");
          return Promise.reject(new Conflict("409"));
        },
        { hedgeAfterMs: 500, isAnswer, held },
      );
      await vi.advanceTimersByTimeAsync(5_000);
      expect(await p).toEqual({ kind: "value", value: "A", server: "a", failed: [] });
      expect(asked).toEqual(["a", "b"]); // no copy after the conflict
    });

    it("a conflict is the answer once no copy is left in flight; no further copy is sent", async () => {
      const asked: string[] = [];
      const conflict = new Conflict("409");
      const p = hedgedAttempts(
        ["a", "b", "c"],
        (s) => {
          asked.push(s);
          if (s === "a")
            return after(1000, () => {
              throw new Error("deadline");
            });
          return Promise.reject(conflict);
        },
        { hedgeAfterMs: 500, isAnswer, held },
      );
      await vi.advanceTimersByTimeAsync(999);
      let settled = false;
      void p.then(() => (settled = true));
      await vi.advanceTimersByTimeAsync(0);
      expect(settled).toBe(false);
      await vi.advanceTimersByTimeAsync(5_000);
      expect(await p).toEqual({ kind: "answer", error: conflict, server: "b", failed: ["a"] });
      expect(asked).toEqual(["a", "b"]);
    });

    it("the budget ends it: copies in flight count as failed, a held answer wins", async () => {
      const asked: string[] = [];
      const conflict = new Conflict("409");
      const run = (withConflict: boolean) =>
        hedgedAttempts(
          ["a", "b", "c"],
          (s) => (asked.push(s), withConflict && s === "b" ? Promise.reject(conflict) : never()),
          { hedgeAfterMs: 500, isAnswer, held, budgetMs: 1200 },
        );
      const none = run(false);
      await vi.advanceTimersByTimeAsync(1200);
      const r = await none;
      expect(r.kind).toBe("none");
      expect(r.failed).toEqual(["a", "b", "c"]);
      const answered = run(true);
      await vi.advanceTimersByTimeAsync(1200);
      expect(await answered).toEqual({ kind: "answer", error: conflict, server: "b", failed: ["a"] });
    });
  });
});
