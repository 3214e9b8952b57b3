// nodesNotReady: what the lab's start-up wait names when nodes stay not Ready — each node
// not Ready with its condition's status, reason and heartbeat; nothing when all are Ready.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { nodesNotReady } from "../../../lab/node-ready.ts";

const node = (name: string, ready?: { status: string; reason?: string; beat?: string }): V1Node => ({
  metadata: { name },
  status: {
    conditions: ready
      ? [
          { type: "MemoryPressure", status: "False" },
          {
            type: "Ready",
            status: ready.status,
            ...(ready.reason ? { reason: ready.reason } : {}),
            ...(ready.beat ? { lastHeartbeatTime: new Date(ready.beat) } : {}),
          },
        ]
      : [],
  },
});

describe("nodesNotReady", () => {
  it("is empty when every named node is Ready; nodes not named are not looked at", () => {
    const items = [node("node-a", { status: "True" }), node("node-b", { status: "True" }), node("x")];
    expect(nodesNotReady(items, ["node-a", "node-b"])).toEqual([]);
  });

  it("names each node not Ready with its status, reason and heartbeat, in the order named", () => {
    const items = [
      node("node-a", { status: "True" }),
      node("node-b", { status: "Unknown", reason: "NodeStatusUnknown", beat: "2026-12-07T03:00:00Z" }),
      node("node-c"),
    ];
    expect(nodesNotReady(items, ["node-c", "node-b", "node-a", "node-d"])).toEqual([
      "node-c no Ready condition",
      "node-b Unknown (NodeStatusUnknown, heartbeat 2026-12-07T03:00:00.000Z)",
      "node-d no Node object",
    ]);
  });

  it("says when a condition has no reason or never beat", () => {
    expect(nodesNotReady([node("node-a", { status: "False" })], ["node-a"])).toEqual([
      "node-a False (no reason, heartbeat never)",
    ]);
  });
});
