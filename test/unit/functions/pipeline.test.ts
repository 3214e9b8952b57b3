// The whole chain through the real stage executor and the registered stages
// (functions/registry.ts), wired as app/host.ts wires them, on in-memory adapters with the API server's guards
// (test/scenarios/memory-adapters.ts): observations → suspected → Confirmed → Fencing →
// FencedOff → Released → Recovered, with every event delivered twice (duplicates), a
// duplicate fence request while the power-off runs, and a late replay at the end (stale
// incarnation).
import { describe, expect, test } from "vitest";
import { canTransition, PHASES, TRANSITIONS } from "../../../core/incident.ts";
import type { Self } from "../../../core/decision.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { envelope } from "../../../events/envelope.ts";
import { EVENT_TYPES, parseEvent } from "../../../events/catalog.ts";
import { findStage } from "../../../functions/registry.ts";
import type { EventHandler, HandlerResult } from "../../../infra/runtime/contract.ts";
import { stageHandler } from "../../../infra/runtime/stage-executor.ts";
import {
  CONFIRM,
  FENCE,
  NEW_BOOT,
  OTHER_FENCE,
  T0,
  TRUSTED,
  condition,
  node,
  keyOf,
  observed,
  policy,
} from "../../scenarios/fixtures.ts";
import {
  confirmedOff,
  handlerContext,
  MemoryCluster,
  MemoryPower,
  memoryAdapters,
  TestClock,
} from "../../scenarios/memory-adapters.ts";

describe("pipeline", () => {
  test("crash of node a: every stage, duplicates harmless, late replay harmless", async () => {
    const clock = new TestClock(T0);
    const c = new MemoryCluster({
      policy: policy(),
      nodes: [node("a"), node("b"), node("c")],
      now: () => clock.now(),
    });
    for (const n of ["a", "b", "c"]) c.publishObserver(n, keyOf(n).annotation, T0);
    c.pods = [
      { namespace: "default", name: "web-1", node: "a" },
      { namespace: "default", name: "web-2", node: "b" },
    ];
    c.volumeAttachments = [{ namespace: "", name: "csi-a", node: "a" }];
    c.vmLaunchers = [{ namespace: "vms", name: "vm-1", node: "a" }];
    const power = new MemoryPower(c, clock);
    const adapters = memoryAdapters(c, { power });
    const handler = (name: string, self: Self): EventHandler =>
      stageHandler(findStage(name)!, adapters, self, { trustedConfirmers: TRUSTED });
    const detect = handler("detect", CONFIRM);
    const confirm = handler("confirm", CONFIRM);
    const fence = handler("fence", FENCE);
    const fenceOther = handler("fence", OTHER_FENCE);
    const remediate = handler("remediate-workloads", FENCE);
    const recover = handler("recover", FENCE);
    const ctx = handlerContext(clock);

    // the runtime builds envelopes and every consumer re-validates them (S5)
    const deliver = async (h: EventHandler, e: FfEvent): Promise<HandlerResult & { events: FfEvent[] }> => {
      const r = await h(e, ctx);
      const events = r.emit.map((o) =>
        parseEvent(JSON.parse(JSON.stringify(envelope(o, "/fastfence/test/r-0", clock.now(), e)))),
      );
      return { ...r, events };
    };
    const run = async (h: EventHandler, e: FfEvent) => (await deliver(h, e)).events;
    const twice = async (h: EventHandler, e: FfEvent) => [...(await run(h, e)), ...(await run(h, e))];

    // b and c miss a's probes
    clock.set(T0 + 1000);
    const s1 = await twice(detect, observed("b", "a", 3, 1000));
    const s2 = await twice(detect, observed("c", "a", 3, 1000));
    expect(s1.length + s2.length).toBe(4); // detect is stateless; confirm dedupes
    const requests: FfEvent[] = [];
    for (const e of [...s1, ...s2]) requests.push(...(await run(confirm, e)));
    expect(requests.map((e) => e.type)).toEqual([EVENT_TYPES.fenceRequested]);
    const name = requests[0]!.ffincident!;
    expect(c.incident(name)!.status!.phase).toBe("Confirmed");

    // fence (a duplicate request while the power-off runs is ignored: fence-0 holds the Lease)
    let duplicate: HandlerResult | undefined;
    power.offScript = async (a) => {
      duplicate = await deliver(fenceOther, requests[0]!);
      clock.advance(500);
      return confirmedOff(a, clock.now());
    };
    const fenced = await run(fence, requests[0]!);
    expect(duplicate?.outcome.kind).toBe("ignored");
    expect(duplicate?.emit).toEqual([]);
    expect(fenced.map((e) => e.type)).toEqual([EVENT_TYPES.nodeFenced]);
    expect(c.power.get("a")).toBe("Off");
    expect(await run(fenceOther, requests[0]!)).toEqual([]); // and after FencedOff
    expect(c.count("power.powerOff")).toBe(1);

    // remediate (twice: the second is ignored)
    for (let i = 0; i < 2; i++) {
      const r = await deliver(remediate, fenced[0]!);
      if (i === 1) {
        expect(r.outcome).toMatchObject({ kind: "ignored" });
        expect(r.events).toEqual([]);
        continue;
      }
      expect(r.events.map((e) => e.type)).toEqual([EVENT_TYPES.workloadsReleased]);
      expect(r.events[0]!.data).toMatchObject({
        podsDeleted: 1,
        volumeAttachmentsDeleted: 1,
        vmLaunchersDeleted: 1,
      });
    }
    expect(c.taints("a")).toEqual(["node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"]);
    expect(c.pods.map((p) => p.name)).toEqual(["web-2"]);
    expect(c.count("nodes.forceDeletePods")).toBe(1);

    // the node comes back with a new boot; recover (twice)
    c.setNode(node("a", { bootId: NEW_BOOT }));
    clock.advance(60_000);
    for (let i = 0; i < 2; i++) await run(recover, condition("a", "True", NEW_BOOT, clock.now() - T0));
    expect(c.taints("a")).toEqual([]);
    // every phase written exactly once, in order (the first by the create)
    expect(c.phases(name)).toEqual([
      "Suspected",
      "Confirmed",
      "Fencing",
      "FencedOff",
      "Released",
      "Recovered",
    ]);

    const effects = c.effects().length;
    // a late replay of the original fence request never powers off the recovered node
    const late = await deliver(fence, requests[0]!);
    expect(late.outcome.kind).toBe("ignored");
    expect(c.count("power.powerOff")).toBe(1);
    // a late replay of the old suspicion is a stale incarnation
    expect((await deliver(confirm, s1[0]!)).outcome).toMatchObject({ kind: "ignored" });
    expect(c.effects().length).toBe(effects);
    expect(c.incident(name)!.status!.phase).toBe("Recovered");
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
