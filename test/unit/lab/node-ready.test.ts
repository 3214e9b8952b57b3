// nodesNotReady / agentsNotReady / agentStartLine: what the lab's start-up waits name when
// nodes or node agents stay not ready, and where a ready agent's start went.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { agentStartLine, agentsNotReady, nodesNotReady } from "../../../lab/node-ready.ts";
import type { AgentStatus } from "../../../lab/types.ts";

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

const agent = (o: Partial<AgentStatus>): AgentStatus => ({
  ready: false,
  source: false,
  functions: [],
  startedAt: "2026-12-07T07:00:00.000Z",
  step: "starting",
  ...o,
});

describe("agentsNotReady", () => {
  it("names each agent not ready with its step, pending replicas and last error; none when all are", () => {
    const got = agentsNotReady([
      { name: "node-a", status: agent({ ready: true, step: "ready" }) },
      { name: "node-b" },
      {
        name: "node-c",
        status: agent({
          step: "starting replicas",
          pending: ["fence", "confirm"],
          lastError: "acls: timeout",
        }),
      },
    ]);
    expect(got).toEqual([
      "node-b: not started",
      "node-c: starting replicas (waiting for fence, confirm) [last error: acls: timeout]",
    ]);
    expect(agentsNotReady([{ name: "node-a", status: agent({ ready: true }) }])).toEqual([]);
  });
});

describe("agentStartLine", () => {
  it("gives a ready agent's time from start to ready and each step's time, in order", () => {
    const s = agent({
      ready: true,
      readyAt: "2026-12-07T07:00:41.250Z",
      steps: [
        { step: "starting", ms: 3000 },
        { step: "creating topics", ms: 12_140 },
        { step: "starting replicas", ms: 26_000 },
      ],
    });
    expect(agentStartLine("node-a", s)).toBe(
      "node-a 41.3 s (starting 3.0 s, creating topics 12.1 s, starting replicas 26.0 s)",
    );
  });

  it("says an agent is not ready rather than inventing a time", () => {
    expect(agentStartLine("node-b", agent({}))).toBe("node-b not ready");
    expect(agentStartLine("node-c", undefined)).toBe("node-c not ready");
  });
});
