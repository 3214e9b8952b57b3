// Trace selection/formatting (`fastfence trace`) and runtime configuration parsing.
import { describe, expect, it } from "vitest";
import { formatTrace, selectChain, traceRows } from "../../../events/trace-format.ts";
import { InvalidInputError } from "../../../core/errors.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { identityFor, loadRuntimeConfig, trustedConfirmers } from "../../../infra/config.ts";

const e = (type: string, subject: string, t: number, incident?: string): FfEvent => ({
  specversion: "1.0",
  id: `${type}-${t}`,
  source: "/fastfence/x/r",
  type: `io.fastfence.${type}.v1`,
  subject,
  time: new Date(t).toISOString(),
  datacontenttype: "application/json",
  ...(incident ? { ffincident: incident } : {}),
  data: {},
});

describe("trace", () => {
  const events = [
    e("node.observed", "a", 1000),
    e("node.observed", "b", 1100),
    e("node.suspected", "a", 1300, "a-1"),
    e("fence.requested", "a", 1500, "a-1"),
    e("node.fenced", "a", 2100, "a-1"),
    e("node.observed", "a", 9000),
  ];

  it("selects an incident's chain with its lead-in observations, in time order", () => {
    const chain = selectChain(events, "a-1", 1000);
    expect(chain.map((x) => x.type)).toEqual([
      "io.fastfence.node.observed.v1",
      "io.fastfence.node.suspected.v1",
      "io.fastfence.fence.requested.v1",
      "io.fastfence.node.fenced.v1",
    ]);
  });

  it("gives per-stage latency and time since start", () => {
    const rows = traceRows(selectChain(events, "a-1", 1000));
    expect(rows.map((r) => [r.sinceStartMs, r.stageMs])).toEqual([
      [0, 0],
      [300, 300],
      [500, 200],
      [1100, 600],
    ]);
    expect(formatTrace(rows)).toContain("node.fenced.v1");
  });

  it("lists an event read from two topics once (the catalog topic and the Broker's, via the bridge)", () => {
    const twice = [...events, ...events.slice(2, 4)];
    expect(selectChain(twice, "a-1", 1000)).toEqual(selectChain(events, "a-1", 1000));
    // Same id from another source is another event.
    const other = { ...events[2]!, source: "/fastfence/y/r" };
    expect(selectChain([...events, other], "a-1", 1000)).toHaveLength(5);
  });

  it("selects by node name", () => {
    expect(selectChain(events, "b").length).toBe(1);
    expect(formatTrace(traceRows(selectChain(events, "zzz")))).toBe("no events found");
  });
});

describe("runtime config", () => {
  it("has defaults", () => {
    const c = loadRuntimeConfig({});
    expect(c.FASTFENCE_NAMESPACE).toBe("fastfence-system");
    expect(c.FASTFENCE_GROUP_MODE).toBe("each-replica");
    expect(identityFor(c, "confirm")).toBe("system:serviceaccount:fastfence-system:fastfence-confirm");
    expect(trustedConfirmers(c)).toEqual(["system:serviceaccount:fastfence-system:fastfence-confirm"]);
  });

  it("names the bad variable", () => {
    expect(() =>
      loadRuntimeConfig({ FASTFENCE_GROUP_MODE: "sometimes", FASTFENCE_KUBE_TIMEOUT_MS: "-5" }),
    ).toThrow(InvalidInputError);
    try {
      loadRuntimeConfig({ FASTFENCE_GROUP_MODE: "sometimes" });
    } catch (err) {
      expect((err as InvalidInputError).issues.join()).toMatch(/FASTFENCE_GROUP_MODE/);
    }
  });

  const issuesOf = (env: Record<string, string>): readonly string[] => {
    try {
      loadRuntimeConfig(env);
    } catch (err) {
      expect(err).toMatchObject({ code: "FF_INVALID_CONFIG" });
      expect((err as Error).message).toMatch(/^invalid environment.*FASTFENCE_KUBE_TIMEOUT_MS/);
      return (err as InvalidInputError).issues;
    }
    return [];
  };

  it("refuses settings that break the timeout chain, naming the variables", () => {
    expect(issuesOf({ FASTFENCE_KUBE_TIMEOUT_MS: "2000", FASTFENCE_HANDLER_TIMEOUT_MS: "1500" })).toEqual([
      "FASTFENCE_KUBE_TIMEOUT_MS: must be below FASTFENCE_HANDLER_TIMEOUT_MS (2000 ms ≥ 1500 ms): a handler makes at least one API request",
    ]);
    const [tooLong] = issuesOf({ FASTFENCE_KUBE_TIMEOUT_MS: "3000" });
    expect(tooLong).toMatch(/^FASTFENCE_KUBE_TIMEOUT_MS: must be at most 2500 ms \(is 3000\)/);
    expect(tooLong).toContain("5000 ms recording margin");
    expect(issuesOf({ FASTFENCE_KUBE_TIMEOUT_MS: "2500", FASTFENCE_HANDLER_TIMEOUT_MS: "2501" })).toEqual([]);
    expect(issuesOf({})).toEqual([]); // the defaults keep it
  });
});
