// The pure parts of `fastfence fence`: what it makes of an existing incident (add the
// request, nothing to write, refuse an ended one), the request's NodeFence, each poll while
// waiting (done or not, the progress line), and the notes on what will hold the request.
// No servers.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { existingVerdict, progressLine, stepKey, waitVerdict } from "../../../cli/fence-state.ts";
import { requestedIncident, requestNotes } from "../../../cli/fence.ts";
import {
  BOOT_ID_LABEL,
  emptyStatus,
  incidentName,
  newIncident,
  NODE_LABEL,
  transition,
  type NodeFence,
  type NodeFenceStatus,
} from "../../../core/incident.ts";
import { PAUSE_ANNOTATION } from "../../../core/planned.ts";
import { DEFAULT_POLICY, resolvePolicy } from "../../../core/policy.ts";

const at = "2030-01-01T00:00:00.000Z";
const request = { by: "alice", reason: "disk controller hangs", at };

function incident(status?: NodeFenceStatus, withRequest = false): NodeFence {
  const { status: _none, ...inc } = newIncident("node-b", "boot-1234abcd", emptyStatus());
  return {
    ...inc,
    metadata: { ...inc.metadata, namespace: "fastfence-system", resourceVersion: "7" },
    spec: { ...inc.spec, ...(withRequest ? { operatorRequest: request } : {}) },
    ...(status ? { status } : {}),
  };
}
const suspected = transition(emptyStatus(), "Suspected", at);
const blocked = transition(suspected, "Blocked", at, { reason: "StormGuard", message: "2 of 1 admitted" });
const confirmed = transition(suspected, "Confirmed", at, { reason: "OperatorRequested" });
const fencing = transition(confirmed, "Fencing", at, { round: 1 });
const fencedOff = transition(fencing, "FencedOff", at, { powerOffConfirmedAt: at });
const released = transition(fencedOff, "Released", at);
const failedFinal = transition(fencing, "FenceFailed", at, { round: 3, reason: "PowerOffNotConfirmed" });
const failedRetry = transition(fencing, "FenceFailed", at, { round: 1, retryNotBefore: at });
const closed = transition(suspected, "Closed", at, { reason: "Observed", message: "would use level 0" });

describe("fence: an existing incident", () => {
  it("not confirmed and nobody asked: add the request", () => {
    expect(existingVerdict(incident())).toEqual({ action: "patch" });
    expect(existingVerdict(incident(suspected))).toEqual({ action: "patch" });
    expect(existingVerdict(incident(blocked))).toEqual({ action: "patch" });
  });

  it("already requested, being fenced or fenced: nothing to write, and says which", () => {
    const asked = existingVerdict(incident(undefined, true));
    expect(asked).toMatchObject({ action: "none", state: "already-requested" });
    expect(asked.action === "none" && asked.message).toContain("already requested by alice");
    expect(existingVerdict(incident(fencing))).toMatchObject({ action: "none", state: "already-fencing" });
    expect(existingVerdict(incident(failedRetry))).toMatchObject({ state: "already-fencing" });
    expect(existingVerdict(incident(released, true))).toMatchObject({ state: "already-fenced" });
  });

  it("an ended incident is refused with why", () => {
    const v = existingVerdict(incident(closed));
    expect(v.action).toBe("ended");
    expect(v.action === "ended" && v.message).toMatch(/has ended: Closed \(Observed: would use level 0\)/);
    expect(v.action === "ended" && v.message).toContain("new incarnation or was recovered");
    // closed as back (its round abandoned by the last look): a new failure of the same boot
    // replaces it (core/superseded.ts supersededBy)
    const looked = {
      round: 1,
      level: 0,
      driver: "ipmi" as const,
      by: "fence-node-c",
      startedAt: at,
      finishedAt: at,
    };
    const abandoned = { ...confirmed, attempts: [{ ...looked, result: "abandoned" as const }] };
    const back = existingVerdict(incident(transition(abandoned, "Closed", at, { reason: "NodeResponding" })));
    expect(back.action === "ended" && back.message).toContain(
      "a new failure of this boot, seen by the observers, replaces it",
    );
  });

  it("the request's NodeFence: newIncident's name and labels, the request, no status", () => {
    const inc = requestedIncident("node-b", "boot-1234abcd", request);
    expect(inc.metadata.name).toBe(incidentName("node-b", "boot-1234abcd"));
    expect(inc.metadata.labels).toEqual({ [NODE_LABEL]: "node-b", [BOOT_ID_LABEL]: "boot-1234abcd" });
    expect(inc.spec).toEqual({ nodeName: "node-b", bootId: "boot-1234abcd", operatorRequest: request });
    expect(inc.status).toBeUndefined();
  });
});

describe("fence --wait: each poll", () => {
  it("Released (or ended after a power-off) is done and ok", () => {
    expect(waitVerdict(incident(released), "x", 3)).toMatchObject({
      done: true,
      ok: true,
      outcome: "released",
    });
    const recovered = transition(released, "Recovered", at);
    expect(waitVerdict(incident(recovered), "x", 3)).toMatchObject({ ok: true, outcome: "released" });
  });

  it("Blocked, a final FenceFailed, an end without fencing, a deletion are done and not ok", () => {
    expect(waitVerdict(incident(blocked), "x", 3)).toMatchObject({
      done: true,
      ok: false,
      outcome: "blocked",
    });
    const b = waitVerdict(incident(blocked), "x", 3);
    expect(b.done && b.message).toContain("StormGuard: 2 of 1 admitted");
    expect(waitVerdict(incident(failedFinal), "x", 3)).toMatchObject({ ok: false, outcome: "failed" });
    expect(waitVerdict(incident(closed), "x", 3)).toMatchObject({ ok: false, outcome: "ended" });
    expect(waitVerdict(undefined, "x", 3)).toMatchObject({ ok: false, outcome: "deleted" });
  });

  it("anything on the way is not done", () => {
    for (const st of [undefined, suspected, confirmed, fencing, failedRetry, fencedOff])
      expect(waitVerdict(incident(st), "x", 3)).toEqual({ done: false });
  });

  it("a progress line per phase, reason or round", () => {
    expect(progressLine(incident(), "x", 0, 3)).toBe(
      "+0.0s x: Suspected (not taken up yet: confirm looks for requests every reconcile.intervalMs)",
    );
    expect(progressLine(incident(blocked), "x", 5100, 3)).toBe(
      "+5.1s x: Blocked (StormGuard: 2 of 1 admitted)",
    );
    expect(progressLine(incident(failedRetry), "x", 0, 3)).toContain(
      `round 1 of 3 failed, next not before ${at}`,
    );
    expect(stepKey(incident())).not.toBe(stepKey(incident(suspected)));
    expect(stepKey(incident(fencing))).not.toBe(
      stepKey(incident(transition(fencing, "Fencing", at, { round: 2 }))),
    );
  });
});

describe("fence: notes", () => {
  const n = (annotations: Record<string, string> = {}, ready = "False"): V1Node => ({
    metadata: { name: "node-b", annotations },
    status: { conditions: [{ type: "Ready", status: ready }] },
  });
  it("none for a NotReady node under the default policy", () => {
    expect(requestNotes(n(), DEFAULT_POLICY)).toEqual([]);
  });
  it("pauses, Observe mode and a Ready node are said", () => {
    const notes = requestNotes(
      n({ [PAUSE_ANNOTATION]: "firmware" }, "True"),
      resolvePolicy({ paused: true, pausedReason: "upgrade", mode: "Observe" }),
    );
    expect(notes.join("\n")).toContain("paused cluster-wide (upgrade)");
    expect(notes.join("\n")).toContain(
      'fencing of node-b is paused (firmware): the request is held (Blocked, NodePaused) until "fastfence resume node-b"',
    );
    expect(notes.join("\n")).toContain("Observe mode");
    expect(notes.join("\n")).toContain("node-b is Ready");
  });
});
