// A lab node's link (lab/link-state.ts): up only while the machine runs and nothing cut it
// off; a heal never lights a silently crashed machine, a power-on never mends a partition.
import { describe, expect, test } from "vitest";
import { describeLink, LINK_UP, linkAfter, linkUp, type LinkEvent } from "../../../lab/link-state.ts";

const run = (...events: LinkEvent[]) => events.reduce(linkAfter, LINK_UP);

describe("lab node link", () => {
  test("a silent crash takes it down until power-on; a heal in between leaves it down", () => {
    expect(linkUp(run("crash"))).toBe(false);
    expect(linkUp(run("crash", "heal"))).toBe(false);
    expect(linkUp(run("crash", "power-off"))).toBe(false);
    expect(linkUp(run("crash", "power-off", "power-on"))).toBe(true);
    expect(linkUp(run("crash", "heal", "power-on"))).toBe(true);
  });

  test("a powered-off machine is silent too, until it is powered on", () => {
    expect(linkUp(run("power-off"))).toBe(false);
    expect(linkUp(run("power-off", "power-on"))).toBe(true);
  });

  test("a partition holds across a power cycle until its heal", () => {
    expect(linkUp(run("partition"))).toBe(false);
    expect(linkUp(run("partition", "heal"))).toBe(true);
    expect(linkUp(run("partition", "power-off", "power-on"))).toBe(false);
    expect(linkUp(run("partition", "power-off", "power-on", "heal"))).toBe(true);
    // partitioned, then crashed: both must end
    expect(linkUp(run("partition", "crash", "heal"))).toBe(false);
    expect(linkUp(run("partition", "crash", "power-on"))).toBe(false);
    expect(linkUp(run("partition", "crash", "power-on", "heal"))).toBe(true);
  });

  test("events that change nothing leave it up; repeats are idempotent", () => {
    expect(linkUp(run())).toBe(true);
    expect(linkUp(run("heal", "power-on"))).toBe(true);
    expect(run("crash", "crash")).toEqual(run("crash"));
    expect(run("partition", "partition", "heal")).toEqual(LINK_UP);
  });

  test("lab status names why it is down", () => {
    expect(describeLink(undefined)).toBe("up");
    expect(describeLink(run("crash"))).toBe("down (dark)");
    expect(describeLink(run("partition"))).toBe("down (cut)");
    expect(describeLink(run("partition", "crash"))).toBe("down (dark, cut)");
    expect(describeLink(run("crash", "power-on"))).toBe("up");
  });
});
