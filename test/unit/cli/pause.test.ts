// The pure parts of `fastfence pause` and `resume` and of what every operator action
// shares: what pause and resume write for each state (nothing when already there), their
// merge patches, the Events' shape, how an API refusal is shown and which exit code each
// error gives. No servers.
import { describe, expect, it } from "vitest";
import { EXIT } from "../../../cli/exit-codes.ts";
import { describeError, exitCodeOf, isDenial, NotFoundError } from "../../../cli/operator.ts";
import { pausePatch, planPause, type PauseScope } from "../../../cli/pause.ts";
import { FastfenceError } from "../../../core/errors.ts";
import { PAUSE_ANNOTATION } from "../../../core/planned.ts";
import { KubeApiError } from "../../../infra/kube/client.ts";
import { eventBody, eventNamespace } from "../../../infra/kube/events.ts";

const cluster: PauseScope = { kind: "cluster", policy: "default" };
const node: PauseScope = { kind: "node", node: "node-b" };

describe("pause and resume: the plan", () => {
  it("pause: patch, create a missing policy, nothing when already paused for that reason", () => {
    expect(planPause(cluster, { exists: true, paused: false }, { paused: true, reason: "r" })).toEqual({
      write: "patch",
      message: "fencing paused cluster-wide: r",
    });
    const create = planPause(cluster, { exists: false, paused: false }, { paused: true, reason: "r" });
    expect(create.write).toBe("create");
    expect(create.message).toContain("FencingPolicy default did not exist: created it");
    const same = planPause(node, { exists: true, paused: true, reason: "r" }, { paused: true, reason: "r" });
    expect(same).toEqual({
      write: "none",
      message: "fencing of node-b was already paused: r; nothing changed",
    });
    const other = planPause(
      node,
      { exists: true, paused: true, reason: "old" },
      { paused: true, reason: "new" },
    );
    expect(other.write).toBe("patch");
    expect(other.message).toContain("reason was: old); its reason is now: new");
  });

  it("resume: patch when paused, nothing when not (a missing policy does not pause)", () => {
    expect(planPause(node, { exists: true, paused: true, reason: "r" }, { paused: false }).write).toBe(
      "patch",
    );
    expect(planPause(node, { exists: true, paused: false }, { paused: false })).toEqual({
      write: "none",
      message: "fencing of node-b was not paused; nothing changed",
    });
    const missing = planPause(cluster, { exists: false, paused: false }, { paused: false });
    expect(missing.write).toBe("none");
    expect(missing.message).toContain("no FencingPolicy default");
    expect(planPause(cluster, { exists: true, paused: false, reason: "left" }, { paused: false }).write).toBe(
      "none",
    );
  });

  it("the merge patches set or remove exactly the pause fields", () => {
    expect(pausePatch(cluster, { paused: true, reason: "r" })).toEqual({
      spec: { paused: true, pausedReason: "r" },
    });
    expect(pausePatch(cluster, { paused: false })).toEqual({ spec: { paused: false, pausedReason: null } });
    expect(pausePatch(node, { paused: true, reason: "r" })).toEqual({
      metadata: { annotations: { [PAUSE_ANNOTATION]: "r" } },
    });
    expect(pausePatch(node, { paused: false })).toEqual({
      metadata: { annotations: { [PAUSE_ANNOTATION]: null } },
    });
  });
});

describe("Events and errors", () => {
  it("an Event about a cluster-scoped object goes to default, a namespaced one to its namespace", () => {
    expect(eventNamespace({ apiVersion: "v1", kind: "Node", name: "node-b" })).toBe("default");
    const sub = {
      apiVersion: "fastfence.io/v1alpha1",
      kind: "NodeFence",
      name: "x",
      namespace: "ff",
      uid: "u",
    };
    expect(eventNamespace(sub)).toBe("ff");
    const body = eventBody(sub, {
      type: "Normal",
      reason: "OperatorFenceRequested",
      message: "m".repeat(2000),
      component: "cli",
      instance: "host",
      nowMs: 0,
    });
    expect(body).toMatchObject({
      metadata: { generateName: "x.", namespace: "ff" },
      involvedObject: sub,
      reason: "OperatorFenceRequested",
      reportingComponent: "fastfence.io/cli",
      source: { component: "fastfence-cli" },
    });
    expect(body.message).toHaveLength(1024);
  });

  it("an API refusal is shown with the API server's message; not found exits 3", () => {
    const denied = new KubeApiError(
      403,
      "create nodefence x",
      { message: "ValidatingAdmissionPolicy 'fastfence-operator-request' denied request: by must be you" },
      undefined,
    );
    expect(isDenial(denied)).toBe(true);
    expect(isDenial(new KubeApiError(409, "w", {}, undefined))).toBe(false);
    expect(describeError(denied)).toMatch(
      /^denied by the API server \(HTTP 403\): create nodefence x: .*fastfence-operator-request/,
    );
    expect(exitCodeOf(new NotFoundError("no node"))).toBe(EXIT.notFound);
    expect(exitCodeOf(denied)).toBe(EXIT.failed);
    expect(describeError(new FastfenceError("FF_KUBE_UNAVAILABLE", "no API server answered"))).toBe(
      "FF_KUBE_UNAVAILABLE: no API server answered",
    );
  });
});
