import { describe, expect, it } from "vitest";
import { planRoles, roleClass, type HeldRoles } from "../../../lab/victim-roles.ts";
import { apiErrorsOf } from "../../../lab/api-probe.ts";
import { planeText, rolesSection } from "../../../lab/bench-roles.ts";
import type { TrialResult } from "../../../lab/trial.ts";

const none: HeldRoles = {
  etcdLeader: false,
  controllerManager: false,
  scheduler: false,
  vmController: false,
  kraftController: false,
};

describe("bench victims by control-plane role", () => {
  it("spreads the etcd-leader and Lease trials over the run, alternating, and marks the KRaft ones", () => {
    const plan = planRoles(20, { etcdLeader: 5, leases: 5, controller: 3 });
    expect(plan).toHaveLength(20);
    expect(plan.filter((p) => p.role === "etcd-leader")).toHaveLength(5);
    expect(plan.filter((p) => p.role === "leases")).toHaveLength(5);
    // every other trial, starting with etcd, then leases
    expect(plan.slice(0, 4).map((p) => p.role)).toEqual(["etcd-leader", "any", "leases", "any"]);
    // the first of each role also wants the KRaft controller, then the first trial left
    const k = plan.flatMap((p, i) => (p.kraftController ? [`${i}:${p.role}`] : []));
    expect(k).toEqual(["0:etcd-leader", "1:any", "2:leases"]);
  });

  it("gives every trial a role when asked for more than there are trials, and none without", () => {
    const plan = planRoles(3, { etcdLeader: 5, leases: 5, controller: 0 });
    expect(plan.map((p) => p.role)).toEqual(["etcd-leader", "leases", "etcd-leader"]);
    expect(plan.some((p) => p.kraftController)).toBe(false);
    expect(
      planRoles(4, { etcdLeader: 0, leases: 0, controller: 1 }).map(
        (p) => `${p.role}${p.kraftController ? "*" : ""}`,
      ),
    ).toEqual(["any*", "any", "any", "any"]);
  });

  it("names a victim's roles as one class", () => {
    expect(roleClass(none)).toBe("no control-plane leader");
    expect(roleClass({ ...none, etcdLeader: true })).toBe("etcd leader");
    expect(roleClass({ ...none, controllerManager: true, scheduler: true })).toBe("both Leases");
    expect(roleClass({ ...none, etcdLeader: true, scheduler: true, kraftController: true })).toBe(
      "etcd leader + scheduler Lease",
    );
    expect(roleClass({ ...none, controllerManager: true })).toBe("controller-manager Lease");
  });
});

describe("the API probe's count", () => {
  it("counts failures and the longest run of them, in start order", () => {
    const s = (at: number, ok: boolean) => ({ at, ok });
    expect(
      apiErrorsOf([s(0, true), s(250, false), s(500, false), s(750, false), s(1000, true), s(1250, false)]),
    ).toEqual({ requests: 6, failed: 4, longestOutageMs: 500 });
    // answers come back out of order (a timed-out request is recorded late)
    expect(apiErrorsOf([s(500, false), s(0, true), s(250, false)])).toEqual({
      requests: 3,
      failed: 2,
      longestOutageMs: 250,
    });
    expect(apiErrorsOf([])).toEqual({ requests: 0, failed: 0, longestOutageMs: 0 });
  });
});

describe("the report's role section", () => {
  const trial = (n: number, roles: HeldRoles, releasedMs: number): TrialResult =>
    ({
      scenario: "crash",
      trial: n,
      node: "node-a",
      t0: 0,
      releasedMs,
      replacementRunningMs: releasedMs + 100,
      vmsReleased: 0,
      fencedNodes: ["node-a"],
      safetyViolations: 0,
      violations: [],
      timeline: [],
      events: [],
      roles,
      etcdElections: roles.etcdLeader ? 1 : 0,
      apiErrors: {
        requests: 8,
        failed: roles.etcdLeader ? 3 : 0,
        longestOutageMs: roles.etcdLeader ? 500 : 0,
      },
    }) as TrialResult;

  it("gives percentiles per role and every trial's roles, elections and API errors", () => {
    const rs = [
      trial(1, { ...none, etcdLeader: true, kraftController: true }, 3000),
      trial(2, { ...none, etcdLeader: true }, 2000),
      trial(3, none, 1000),
    ];
    const { lines, rows } = rolesSection(rs, "settings");
    expect(rows.map((r) => [r.role, r.trials, r.kraftController, r.releasedMs.p50])).toEqual([
      ["etcd leader", 2, 1, 2000],
      ["no control-plane leader", 1, 0, 1000],
      ["every trial", 3, 1, 2000],
    ]);
    expect(lines.join("\n")).toContain(
      "- #1 node-a: etcd leader + KRaft controller; etcd elections 1; API errors 3/8 (longest 500 ms); released 3000 ms",
    );
  });

  it("states the compact plane's settings, or that the plane is on the host", () => {
    expect(planeText("compact", "openshift")).toMatch(
      /scheduler \(Lease 137 s, renew deadline 107 s, retry 26 s\)/,
    );
    expect(planeText("compact", "upstream")).toMatch(
      /scheduler \(Lease 15 s, renew deadline 10 s, retry 2 s\)/,
    );
    expect(planeText("host", "openshift")).toMatch(/on the host/);
  });
});
