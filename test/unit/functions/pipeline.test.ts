// The whole chain on an in-memory API (resourceVersion-guarded writes, as the adapters do):
// observations → suspected → Confirmed → Fencing → FencedOff → Released → Recovered, with
// every event delivered twice (duplicates) and a late replay at the end (stale incarnation).
import { describe, expect, test } from "vitest";
import * as detect from "../../../functions/detect/handler.ts";
import * as confirm from "../../../functions/confirm/handler.ts";
import * as fence from "../../../functions/fence/handler.ts";
import * as remediate from "../../../functions/remediate-workloads/handler.ts";
import * as recover from "../../../functions/recover/handler.ts";
import { canTransition, PHASES, TRANSITIONS, type NodeFence } from "../../../core/incident.ts";
import type { Action, Decision, NodeInfo } from "../../../core/decision.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { envelope } from "../../../events/envelope.ts";
import { parseEvent } from "../../../events/catalog.ts";
import {
  CONFIRM,
  FENCE,
  NEW_BOOT,
  T0,
  TRUSTED,
  condition,
  node,
  observed,
  offAttempt,
  policy,
} from "../../scenarios/fixtures.ts";

class World {
  incidents = new Map<string, NodeFence>();
  rv = 1;
  taints = new Set<string>();
  nodes: NodeInfo[] = [node("a"), node("b"), node("c")];
  log: string[] = [];
  /** Executes actions in order like an adapter; false on a guard failure (409). */
  apply(actions: Action[]): boolean {
    for (const a of actions) {
      if (a.kind === "createIncident") {
        if (this.incidents.has(a.incident.metadata.name)) return false;
        this.incidents.set(a.incident.metadata.name, {
          ...a.incident,
          metadata: { ...a.incident.metadata, resourceVersion: String(++this.rv) },
        });
      } else if (a.kind === "updateIncidentStatus") {
        const cur = this.incidents.get(a.name);
        if (!cur || cur.metadata.resourceVersion !== a.expectedResourceVersion) return false;
        this.incidents.set(a.name, {
          ...cur,
          status: a.status,
          metadata: { ...cur.metadata, resourceVersion: String(++this.rv) },
        });
        this.log.push(a.status.phase);
      } else if (a.kind === "setTaint") this.taints.add(a.node);
      else if (a.kind === "removeTaint") this.taints.delete(a.node);
    }
    return true;
  }
  view(nodeName: string) {
    const open = [...this.incidents.values()].filter(
      (i) => !["Recovered", "Closed"].includes(i.status?.phase ?? ""),
    );
    const mine = [...this.incidents.values()].filter((i) => i.spec.nodeName === nodeName).at(-1);
    return {
      incident: mine,
      node: this.nodes.find((n) => n.name === nodeName),
      openIncidents: open,
      nodes: this.nodes,
      policy: policy(),
    };
  }
}

describe("pipeline", () => {
  test("crash of node a: every stage, duplicates harmless, late replay harmless", () => {
    const w = new World();
    let now = T0;
    const run = (d: Decision): FfEvent[] => {
      if (!w.apply(d.actions)) return [];
      // the runtime builds envelopes and every consumer re-validates them (S5)
      return d.emit.map((o) =>
        parseEvent(JSON.parse(JSON.stringify(envelope(o, "/fastfence/test/r-0", now)))),
      );
    };
    const twice = (f: () => Decision) => [...run(f()), ...run(f())];

    // b and c miss a's probes
    now = T0 + 1000;
    const s1 = twice(() =>
      detect.decide({ event: observed("b", "a", 3, 1000), view: w.view("a"), now, self: CONFIRM }),
    );
    const s2 = twice(() =>
      detect.decide({ event: observed("c", "a", 3, 1000), view: w.view("a"), now, self: CONFIRM }),
    );
    expect(s1.length + s2.length).toBe(4); // detect is stateless; confirm dedupes
    const requests = [...s1, ...s2].flatMap((e) =>
      run(confirm.decide({ event: e, view: w.view("a"), now, self: CONFIRM })),
    );
    expect(requests.map((e) => e.type)).toEqual(["io.fastfence.fence.requested.v1"]);
    const name = requests[0]!.ffincident!;
    expect(w.incidents.get(name)!.status!.phase).toBe("Confirmed");

    // fence (duplicate request after Fencing is ignored because this replica holds it)
    const fd = fence.decide({
      event: requests[0]!,
      view: w.view("a"),
      now,
      self: FENCE,
      trustedConfirmers: TRUSTED,
    });
    expect(w.apply(fd.actions)).toBe(true);
    expect(
      fence.decide({
        event: requests[0]!,
        view: {
          ...w.view("a"),
          lease: { holder: FENCE.replica, renewTime: new Date(now).toISOString(), durationMs: 15000 },
        },
        now,
        self: { ...FENCE, replica: "fence-1" },
        trustedConfirmers: TRUSTED,
      }).outcome.kind,
    ).toBe("ignored");
    now += 500;
    const fenced = run(
      fence.onPowerOffResult({
        incident: w.incidents.get(name)!,
        result: { attempts: [offAttempt(1, 1050)] },
        policy: policy(),
        now,
        self: FENCE,
      }),
    );
    expect(fenced.map((e) => e.type)).toEqual(["io.fastfence.node.fenced.v1"]);

    // remediate (twice: the second is ignored)
    for (let i = 0; i < 2; i++) {
      const rd = remediate.decide({ event: fenced[0]!, view: w.view("a"), now, self: FENCE });
      if (i === 1) expect(rd.outcome).toMatchObject({ kind: "ignored" });
      if (!w.apply(rd.actions) || rd.actions.length === 0) continue;
      const released = run(
        remediate.onReleased({
          incident: w.incidents.get(name)!,
          counts: { podsDeleted: 2, volumeAttachmentsDeleted: 1, vmisDeleted: 1 },
          policy: policy(),
          now,
          self: FENCE,
        }),
      );
      expect(released[0]!.type).toBe("io.fastfence.workloads.released.v1");
    }
    expect(w.taints.has("a")).toBe(true);

    // the node comes back with a new boot; recover (twice)
    w.nodes = [node("a", { bootId: NEW_BOOT }), node("b"), node("c")];
    now += 60_000;
    for (let i = 0; i < 2; i++)
      run(
        recover.decide({
          event: condition("a", "True", NEW_BOOT, now - T0),
          view: w.view("a"),
          now,
          self: FENCE,
        }),
      );
    expect(w.taints.has("a")).toBe(false);
    expect(w.log).toEqual(
      ["Suspected", "Confirmed", "Fencing", "FencedOff", "Released", "Recovered"].slice(1),
    );

    // a late replay of the original fence request never powers off the recovered node
    const late = fence.decide({
      event: requests[0]!,
      view: w.view("a"),
      now,
      self: FENCE,
      trustedConfirmers: TRUSTED,
    });
    expect(late.actions.some((a) => a.kind === "powerOff")).toBe(false);
    // a late replay of the old suspicion is a stale incarnation
    expect(confirm.decide({ event: s1[0]!, view: w.view("a"), now, self: CONFIRM }).outcome).toMatchObject({
      kind: "ignored",
    });
  });

  test("transition table: every phase has a row, terminal phases lead nowhere but Closed", () => {
    for (const p of PHASES) expect(TRANSITIONS[p]).toBeDefined();
    expect(TRANSITIONS.Closed).toEqual([]);
    expect(canTransition("Suspected", "FencedOff")).toBe(false); // no skipping power-off confirmation
    expect(canTransition("Confirmed", "Released")).toBe(false);
    expect(canTransition("Fencing", "Released")).toBe(false);
    expect(canTransition("FenceFailed", "Released")).toBe(false); // S1
    expect(canTransition("FencedOff", "Released")).toBe(true);
  });
});
