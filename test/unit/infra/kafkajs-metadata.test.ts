// kafkajs-failover.ts fix 5: metadata that is merely old is refreshed beside the request
// (one background refresh at a time), never before it; missing metadata, a topic it does
// not name, or an expiry set on purpose after a connection error still refresh first.
import { describe, expect, test } from "vitest";
import { refreshIfNecessaryBeside } from "../../../infra/bus/kafkajs-failover.ts";

/** A broker pool as kafkajs keeps it, with a refresh that stays pending until released. */
function pool(md: string[] | undefined, expireAt: number | null) {
  const refreshes: { topics: string[]; release: () => void }[] = [];
  const p = {
    metadata: md ? { topicMetadata: md.map((topic) => ({ topic })) } : null,
    metadataExpireAt: expireAt,
    refreshMetadata: (topics: string[]) =>
      new Promise<void>((release) => refreshes.push({ topics, release })),
    __ffRefresh: undefined as Promise<void> | undefined,
  };
  const blocking: string[][] = [];
  const block = (topics: string[]) => {
    blocking.push(topics);
    return Promise.resolve();
  };
  return { p, refreshes, blocking, block };
}

const NOW = 10_000;

describe("refreshIfNecessaryBeside (kafkajs fix 5)", () => {
  test("fresh metadata: left to kafkajs' own check (which refreshes nothing), nothing in the background", async () => {
    const x = pool(["a"], NOW + 1);
    await refreshIfNecessaryBeside(x.p, ["a"], x.block, NOW);
    expect(x.blocking).toEqual([["a"]]);
    expect(x.refreshes).toEqual([]);
  });

  test("old metadata naming every topic: the request goes on at once, one refresh runs beside it", async () => {
    const x = pool(["a", "b"], NOW - 1);
    await refreshIfNecessaryBeside(x.p, ["a"], x.block, NOW); // resolved while the refresh is pending
    await refreshIfNecessaryBeside(x.p, ["a", "b"], x.block, NOW);
    expect(x.blocking).toEqual([]);
    expect(x.refreshes.map((r) => r.topics)).toEqual([["a"]]); // one at a time
    x.refreshes[0]!.release();
    await x.p.__ffRefresh;
    await new Promise((r) => setImmediate(r));
    expect(x.p.__ffRefresh).toBeUndefined();
    await refreshIfNecessaryBeside(x.p, ["a"], x.block, NOW); // still old: the next one starts
    expect(x.refreshes).toHaveLength(2);
  });

  test("a failed background refresh is forgotten, and the next request starts another", async () => {
    const x = pool(["a"], NOW - 1);
    let fail!: (e: Error) => void;
    x.p.refreshMetadata = () => new Promise<void>((_, rej) => (fail = rej));
    await refreshIfNecessaryBeside(x.p, ["a"], x.block, NOW);
    fail(new Error("connect ECONNREFUSED"));
    await x.p.__ffRefresh; // swallowed, never thrown at the caller
    await new Promise((r) => setImmediate(r));
    expect(x.p.__ffRefresh).toBeUndefined();
  });

  test.each<[string, string[] | undefined, number | null, string[]]>([
    ["no metadata yet", undefined, NOW - 1, ["a"]],
    ["a topic the metadata does not name", ["a"], NOW - 1, ["a", "b"]],
    ["expired on purpose after a connection error (metadataExpireAt null)", ["a"], null, ["a"]],
  ])("%s: refreshed before the request", async (_n, md, expireAt, topics) => {
    const x = pool(md, expireAt);
    await refreshIfNecessaryBeside(x.p, topics, x.block, NOW);
    expect(x.blocking).toEqual([topics]);
    expect(x.refreshes).toEqual([]);
  });
});
