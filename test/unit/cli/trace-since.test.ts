// `fastfence trace` reading options: --since (a duration back from now, an RFC 3339 time,
// or "all"), bad values refused naming the flag, and the Broker topic the trace reads by
// default being the one the shipped manifests use.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseSince } from "../../../cli/trace.ts";
import { UsageError } from "../../../cli/args.ts";
import { BROKER_TOPIC } from "../../../events/catalog.ts";
import { ROOT } from "../../../harness/env/base.ts";

const NOW = Date.parse("2026-12-02T12:00:00.000Z");

describe("--since", () => {
  it.each([
    ["90s", NOW - 90_000],
    ["30m", NOW - 1_800_000],
    ["6h", NOW - 21_600_000],
    ["7d", NOW - 604_800_000],
    ["2026-12-01T08:00:00Z", Date.parse("2026-12-01T08:00:00Z")],
    ["all", undefined],
  ])("%s", (v, want) => {
    expect(parseSince(v, NOW)).toBe(want);
  });
  it.each(["yesterday", "10", "5w", "-3h", "2026-13-45"])("%s is refused naming --since", (v) => {
    expect(() => parseSince(v, NOW)).toThrow(UsageError);
    expect(() => parseSince(v, NOW)).toThrow(/--since/);
  });
});

describe("the Broker topic", () => {
  it("is the topic the shipped Broker, its KafkaTopic and the runtime config name", () => {
    for (const f of [
      "knative/base/kafka/topics.yaml",
      "knative/base/eventing/broker.yaml",
      "knative/base/runtime-config.yaml",
    ])
      expect(readFileSync(join(ROOT, f), "utf8"), f).toContain(BROKER_TOPIC);
  });
});

describe("Kubernetes Events in the timeline", () => {
  it("are merged by time, offsets recomputed over both", async () => {
    const { mergeRows } = await import("../../../events/trace-format.ts");
    const row = (time: string, type: string) => ({
      time,
      sinceStartMs: 0,
      stageMs: 0,
      type,
      source: "s",
      summary: "",
    });
    const merged = mergeRows(
      [
        row("2026-12-02T12:00:01.000Z", "node.suspected.v1"),
        row("2026-12-02T12:00:03.000Z", "node.fenced.v1"),
      ],
      [
        {
          time: "2026-12-02T12:00:00.000Z",
          type: "k8s-event/OperatorFenceRequested",
          source: "cli",
          summary: "by alice",
        },
      ],
    );
    expect(merged.map((r) => [r.type, r.sinceStartMs, r.stageMs])).toEqual([
      ["k8s-event/OperatorFenceRequested", 0, 0],
      ["node.suspected.v1", 1000, 1000],
      ["node.fenced.v1", 3000, 2000],
    ]);
  });
});
