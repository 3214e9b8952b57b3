// fencing.discovery: the pure fence and recover stages use levels the adapter discovered
// (metal3 BareMetalHost) only when no policy entry matches the node and the policy opts
// in; a policy entry always wins; with nothing found the incident fails with the reason.
import { describe, expect, test } from "vitest";
import { decide } from "../../../functions/fence/handler.ts";
import type { DecideInput, View } from "../../../core/decision.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { decide as recoverDecide } from "../../../functions/recover/handler.ts";
import { EVENT_TYPES } from "../../../events/catalog.ts";
import { resolvePolicy, type ResolvedFencingLevel } from "../../../core/policy.ts";
import { resolveLevels } from "../../../core/policy-levels.ts";
import { statusOf } from "../../../core/incident.ts";
import { FENCE, T0, TRUSTED, at, confirmed, event, node, policy, view } from "../../scenarios/fixtures.ts";

const HOST_LEVEL: ResolvedFencingLevel = {
  driver: "redfish",
  address: "redfish+http://127.0.0.1:9000/redfish/v1/Systems/a",
  credentialsSecret: "a-bmc",
  timeoutMs: 10_000,
  insecure: true,
  discovered: { kind: "BareMetalHost", namespace: "metal3", name: "a" },
};

const req = () => {
  const inc = confirmed("a");
  return event(
    EVENT_TYPES.fenceRequested,
    "a",
    {
      incident: inc.metadata.name,
      node: "a",
      bootId: inc.spec.bootId,
      confirmedAt: at(0),
      observers: ["b", "c"],
    },
    { incident: inc.metadata.name },
  );
};

function input(
  discovery: "None" | "Metal3",
  labels: Record<string, string>,
  discovered: Pick<View, "discoveredLevels" | "discoveryError"> = {},
): DecideInput<FfEvent> {
  const p = policy({ fencing: { discovery } });
  return {
    event: req(),
    view: view({
      incident: confirmed("a"),
      node: node("a", { labels }),
      policy: p,
      trustedConfirmers: TRUSTED,
      ...discovered,
    }),
    now: T0 + 1000,
    self: FENCE,
  };
}

const powerOffLevels = (d: ReturnType<typeof decide>) =>
  d.actions.flatMap((a) => (a.kind === "powerOff" ? [a.levels] : []));

describe("fence with fencing.discovery", () => {
  test("Metal3 and no policy entry: the discovered level is powered off", () => {
    const d = decide(input("Metal3", {}, { discoveredLevels: [HOST_LEVEL] }));
    expect(powerOffLevels(d)).toEqual([[HOST_LEVEL]]);
  });

  test("None: discovered levels are ignored (NoFencingLevels)", () => {
    const d = decide(input("None", {}, { discoveredLevels: [HOST_LEVEL] }));
    expect(powerOffLevels(d)).toEqual([]);
    const w = d.actions.find((a) => a.kind === "updateIncidentStatus");
    expect(w && statusOf({ ...confirmed("a"), status: w.status }).reason).toBe("NoFencingLevels");
  });

  test("a policy entry wins over discovery", () => {
    const d = decide(
      input(
        "Metal3",
        { "node-restriction.kubernetes.io/fastfence-fence": "true" },
        { discoveredLevels: [HOST_LEVEL] },
      ),
    );
    const levels = powerOffLevels(d)[0]!;
    expect(levels.map((l) => l.driver)).toEqual(["redfish", "ipmi"]);
    expect(levels.some((l) => l.discovered)).toBe(false);
  });

  test("Metal3 with nothing found: FenceFailed naming the discovery reason", () => {
    const d = decide(input("Metal3", {}, { discoveryError: "node a: BareMetalHost metal3/a not found" }));
    expect(powerOffLevels(d)).toEqual([]);
    const w = d.actions.find((a) => a.kind === "updateIncidentStatus");
    expect(w?.kind === "updateIncidentStatus" && w.status.message).toMatch(
      /no fencing levels match node a \(discovery Metal3: node a: BareMetalHost metal3\/a not found\)/,
    );
  });

  test("resolveLevels keeps only discovered levels", () => {
    const p = resolvePolicy({ fencing: { discovery: "Metal3" } });
    const { discovered: _d, ...plain } = HOST_LEVEL;
    expect(resolveLevels(p, { name: "a" }, [plain])).toBeUndefined();
    expect(resolveLevels(p, { name: "a" }, [])).toBeUndefined();
    expect(resolveLevels(p, { name: "a" }, [HOST_LEVEL])).toEqual([HOST_LEVEL]);
  });
});

describe("recover power-on with fencing.discovery", () => {
  test("uses the discovered level when the policy opts in", () => {
    const inc = confirmed("a", 0, { phase: "Released" });
    const ev = event(
      EVENT_TYPES.workloadsReleased,
      "a",
      {
        incident: inc.metadata.name,
        node: "a",
        bootId: inc.spec.bootId,
        taint: "node.kubernetes.io/out-of-service",
        podsDeleted: 0,
        volumeAttachmentsDeleted: 0,
        vmLaunchersDeleted: 0,
        powerOffConfirmedAt: at(1),
        releasedAt: at(2),
      },
      { incident: inc.metadata.name },
    );
    const p = policy({ powerOnAfterFence: true, fencing: { discovery: "Metal3" } });
    const d = recoverDecide({
      event: ev,
      view: view({
        incident: inc,
        node: node("a", { labels: {} }),
        policy: p,
        discoveredLevels: [HOST_LEVEL],
      }),
      now: T0 + 5000,
      self: FENCE,
    });
    expect(d.actions.find((a) => a.kind === "powerOn")).toMatchObject({ levels: [HOST_LEVEL] });
  });
});
