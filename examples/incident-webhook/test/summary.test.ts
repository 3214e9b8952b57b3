// The summary of each handled event, as plain data in and out (no server): what the line
// says per type and severity, that free text from the event stays on one line, and that
// an overlong line is cut at MAX_TEXT.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EVENT_TYPES, parseEvent, type AnyFfEvent } from "@fastfence/events";
import { MAX_TEXT, isHandled, summarize, type HandledEvent } from "../src/summary.ts";
import { HANDLED_EVENTS, UNHANDLED_EVENT } from "./events.ts";

/** A handled event through the catalog's validation, with its data changed first. */
function handled(type: keyof typeof HANDLED_EVENTS, data: Record<string, unknown> = {}): HandledEvent {
  const base = HANDLED_EVENTS[type];
  const ev = parseEvent({ ...base, data: { ...base.data, ...data } });
  assert.ok(isHandled(ev));
  return ev;
}

describe("summarize", () => {
  const cases: [string, HandledEvent, "info" | "warning" | "critical", RegExp][] = [
    [
      "a failed round that fence retries",
      handled(EVENT_TYPES.fenceFailed),
      "warning",
      /^fastfence: fencing worker-3 failed in round 2 \(FF_BMC_UNREACHABLE\): every level failed: BMC 10\.0\.8\.3 unreachable; fastfence retries after 2026-11-30T10:00:30\.000Z\.$/,
    ],
    [
      "the final failed round",
      handled(EVENT_TYPES.fenceFailed, { final: true, retryNotBefore: undefined }),
      "critical",
      /No more rounds: its workloads stay put until an operator acts\.$/,
    ],
    [
      "a storm-guard hold",
      handled(EVENT_TYPES.incidentBlocked),
      "warning",
      /^fastfence: fencing worker-3 is held by StormGuard \(3 of 2\): 3 nodes fenced/,
    ],
    [
      "a hold with no limit",
      handled(EVENT_TYPES.incidentBlocked, { reason: "NodePaused", count: 0, limit: 0, message: "paused" }),
      "warning",
      /^fastfence: fencing worker-3 is held by NodePaused: paused$/,
    ],
    [
      "observe mode",
      handled(EVENT_TYPES.fenceObserved),
      "info",
      /would have powered worker-3 off through ipmi at 10\.0\.8\.3:623 \(level 1 of 2\); nothing was sent\.$/,
    ],
    [
      "released workloads",
      handled(EVENT_TYPES.workloadsReleased),
      "warning",
      /worker-3 was powered off at 2026-11-30T09:59:41\.000Z and its workloads released: 14 pods, 3 volume attachments and 1 VM launcher pods deleted \(KubeVirt restarts their VMs\)\.$/,
    ],
    [
      "a recovered node",
      handled(EVENT_TYPES.nodeRecovered),
      "info",
      /worker-3 is back with a new boot ID; incident worker-3-5f1c2a9e is over and its out-of-service taint removed\.$/,
    ],
    [
      "an incident closed unfenced",
      handled(EVENT_TYPES.nodeRecovered, { phase: "Closed", taintRemoved: false }),
      "info",
      /^fastfence: incident worker-3-5f1c2a9e on worker-3 closed without fencing\.$/,
    ],
  ];
  for (const [name, ev, severity, text] of cases) {
    it(name, () => {
      const s = summarize(ev);
      assert.equal(s.severity, severity);
      assert.match(s.text, text);
      assert.deepEqual(
        { type: s.type, node: s.node, incident: s.incident, id: s.id, time: s.time },
        { type: ev.type, node: "worker-3", incident: "worker-3-5f1c2a9e", id: ev.id, time: ev.time },
      );
    });
  }

  it("cuts a line longer than MAX_TEXT, ending it with …", () => {
    const s = summarize(handled(EVENT_TYPES.fenceFailed, { reason: "x".repeat(2000) }));
    assert.equal(s.text.length, MAX_TEXT);
    assert.ok(s.text.endsWith("…"));
  });
});

describe("isHandled", () => {
  it("is false for a catalog type outside HANDLED_TYPES", () => {
    assert.equal(isHandled(parseEvent(UNHANDLED_EVENT) as AnyFfEvent), false);
  });
});
