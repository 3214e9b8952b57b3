// detect: observation / condition → suspicion, as a table of named cases.
import { describe, expect, test } from "vitest";
import { decide, screen } from "../../../functions/detect/handler.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import type { NodeSuspected } from "../../../events/schemas.ts";
import type { IgnoreCode } from "../../../core/reasons.ts";
import {
  BOOT,
  CONFIRM,
  NEW_BOOT,
  T0,
  at,
  condition,
  confirmed,
  incident,
  node,
  observed,
  view,
} from "../../scenarios/fixtures.ts";

const NOW = 1_000;
type Case = [name: string, input: Parameters<typeof decide>[0], expected: "suspect" | IgnoreCode];

const cases: Case[] = [
  [
    "3 misses over 400 ms → suspected",
    {
      event: observed("b", "a", 3, NOW, { firstMissMs: NOW - 400 }),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "suspect",
  ],
  [
    "2 misses → below threshold",
    { event: observed("b", "a", 2, NOW), view: view({ node: node("a") }), now: T0 + NOW, self: CONFIRM },
    "TooFewMisses",
  ],
  [
    "3 misses in 100 ms → below time threshold",
    {
      event: observed("b", "a", 3, NOW, { firstMissMs: NOW - 100 }),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "StreakTooShort",
  ],
  [
    "4th miss after crossing at 3 → quiet",
    {
      event: observed("b", "a", 4, NOW, { firstMissMs: NOW - 800 }),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "SuspicionNotDue",
  ],
  [
    "8th miss (repeat every 5) → suspected again",
    {
      event: observed("b", "a", 8, NOW, { firstMissMs: NOW - 1600 }),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "suspect",
  ],
  [
    "restored → nothing",
    {
      event: observed("b", "a", 0, NOW, { result: "restored" }),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "ProbeRestored",
  ],
  [
    "observer on the observed node → nothing",
    { event: observed("a", "a", 5, NOW), view: view({ node: node("a") }), now: T0 + NOW, self: CONFIRM },
    "ObserverOnNode",
  ],
  [
    "unknown node → nothing",
    { event: observed("b", "a", 3, NOW), view: view({}), now: T0 + NOW, self: CONFIRM },
    "NodeNotFound",
  ],
  [
    "late replayed observation → nothing",
    {
      event: observed("b", "a", 3, NOW),
      view: view({ node: node("a") }),
      now: T0 + NOW + 60_000,
      self: CONFIRM,
    },
    "StaleEvent",
  ],
  [
    "misses of the previous boot, decided after the node rebooted (a lagging replica) → nothing",
    {
      event: observed("b", "a", 3, NOW, { targetBootId: "a-boot-before" }),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "StaleIncarnation",
  ],
  [
    "incident already Confirmed → quiet",
    {
      event: observed("b", "a", 3, NOW),
      view: view({ node: node("a"), incident: confirmed("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "PhasePassed",
  ],
  [
    "incident Blocked → still suspects (refreshes evidence)",
    {
      event: observed("b", "a", 3, NOW),
      view: view({ node: node("a"), incident: incident("a", { phase: "Blocked" }) }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "suspect",
  ],
  [
    "Ready=Unknown in the API → suspected (condition evidence)",
    {
      event: condition("a", "Unknown", BOOT.a, NOW),
      view: view({ node: node("a", { ready: "Unknown" }) }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "suspect",
  ],
  [
    "the event says Ready=Unknown but the API says Ready → nothing (the event's word is not taken)",
    {
      event: condition("a", "Unknown", BOOT.a, NOW),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "NodeReady",
  ],
  [
    "the event says Ready=True but the API says NotReady → suspected from the API",
    {
      event: condition("a", "True", BOOT.a, NOW),
      view: view({ node: node("a", { ready: "False" }) }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "suspect",
  ],
  [
    "a lease change whose kubelet Lease the API shows freshly renewed → nothing",
    {
      event: condition("a", "True", BOOT.a, NOW, "lease"),
      view: view({ node: node("a"), kubeletLease: { renewTime: at(NOW - 500), durationMs: 40_000 } }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "LeaseNotStale",
  ],
  [
    "a lease change with the kubelet Lease stale in the API → suspected",
    {
      event: condition("a", "True", BOOT.a, NOW, "lease"),
      view: view({ node: node("a"), kubeletLease: { renewTime: at(NOW - 45_000), durationMs: 40_000 } }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "suspect",
  ],
  [
    "Ready=True → nothing",
    {
      event: condition("a", "True", BOOT.a, NOW),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "NodeReady",
  ],
  [
    "condition for an old boot ID → nothing",
    {
      event: condition("a", "False", BOOT.a, NOW),
      view: view({ node: node("a", { bootId: NEW_BOOT }) }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "StaleIncarnation",
  ],
  [
    "boot ID change → not detect's business",
    {
      event: condition("a", "True", NEW_BOOT, NOW, "bootId"),
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "BootIdChanged",
  ],
  [
    "other event types → ignored",
    {
      event: { ...observed("b", "a", 3, NOW), type: EVENT_TYPES.nodeRecovered },
      view: view({ node: node("a") }),
      now: T0 + NOW,
      self: CONFIRM,
    },
    "UnhandledEventType",
  ],
];

describe("detect.decide", () => {
  test.each(cases)("%s", (_name, input, expected) => {
    const d = decide(input);
    expect(d.actions).toEqual([]); // detect never writes
    if (expected === "suspect") {
      expect(d.outcome.kind).toBe("processed");
      expect(d.emit).toHaveLength(1);
      const out = d.emit[0]!;
      expect(out.type).toBe(EVENT_TYPES.nodeSuspected);
      const data = out.data as NodeSuspected;
      expect(data.bootId).toBe(input.view.node!.bootId);
      expect(data.incident).toBe(`a-${input.view.node!.bootId.slice(0, 8)}`);
      expect(out.ffincident).toBe(data.incident);
    } else {
      expect(d.outcome).toEqual({ kind: "ignored", code: expected, reason: expect.any(String) });
      expect(d.emit).toEqual([]);
    }
  });
});

describe("detect.screen (the pre-check that skips reading the view)", () => {
  test.each(cases)("%s: never disagrees with decide", (_name, input) => {
    const early = screen({ event: input.event, policy: input.view.policy, now: input.now });
    // Whatever screen decides, decide decides too: skipping the view changes no outcome.
    if (early) expect(early).toEqual(decide(input));
  });
  test("screens out a dead node's misses between repeats, lets the crossing and repeats through", () => {
    const policy = view({ node: node("a") }).policy;
    const verdict = (misses: number) =>
      screen({
        event: observed("b", "a", misses, NOW, { firstMissMs: NOW - (misses - 1) * policy.probe.intervalMs }),
        policy,
        now: T0 + NOW,
      })?.outcome.kind ?? "read the view";
    // One miss per probe interval; policy: threshold 3 misses and 400 ms, repeat every 5.
    expect(policy.probe.intervalMs).toBeGreaterThanOrEqual(200);
    expect([3, 4, 5, 6, 7, 8, 9, 13].map(verdict)).toEqual([
      "read the view", // the crossing
      "ignored",
      "ignored",
      "ignored",
      "ignored",
      "read the view", // repeat (every 5 misses after the threshold)
      "ignored",
      "read the view",
    ]);
  });
});
