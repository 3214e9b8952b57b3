// The Kafka runtime's memory of handled event ids: bounded, forgets the oldest first,
// and an id seen again counts as recent.
import { describe, expect, it } from "vitest";
import { RecentIds } from "../../../infra/runtime/kafka-runtime.ts";

describe("RecentIds", () => {
  it("remembers up to its bound and forgets the oldest first", () => {
    const r = new RecentIds(2);
    r.add("e1");
    r.add("e2");
    r.add("e3");
    expect([r.has("e1"), r.has("e2"), r.has("e3")]).toEqual([false, true, true]);
  });

  it("an id added again becomes the newest", () => {
    const r = new RecentIds(2);
    r.add("e1");
    r.add("e2");
    r.add("e1");
    r.add("e3");
    expect([r.has("e1"), r.has("e2"), r.has("e3")]).toEqual([true, false, true]);
  });
});
