// The lab invariant checker (lab/invariants.ts): each rule fires on a history that breaks
// it and stays quiet on a clean fencing history.
import { describe, expect, it } from "vitest";
import type { NodeFence } from "../../../core/incident.ts";
import type { FfEvent } from "../../../events/envelope.ts";
import { checkInvariants, summarize, type TrialFacts } from "../../../lab/invariants.ts";
import { bmcLies } from "../../../lab/bmc-lies.ts";

const t = (ms: number) => new Date(1_000_000 + ms).toISOString();
const CONFIRM = "system:serviceaccount:fastfence-system:fastfence-confirm";

function incident(
  over: Partial<NonNullable<NodeFence["status"]>> = {},
  node = "node-a",
  bootId = "boot-a1",
): NodeFence {
  return {
    apiVersion: "fastfence.io/v1alpha1",
    kind: "NodeFence",
    metadata: { name: `${node}-${bootId}` },
    spec: { nodeName: node, bootId },
    status: {
      phase: "Released",
      timestamps: {
        suspected: t(500),
        confirmed: t(700),
        fencing: t(720),
        fencedOff: t(900),
        released: t(1000),
      },
      confirmedBy: CONFIRM,
      evidence: [
        { observer: "source-node-b", observerNode: "node-b", node, at: t(600), kind: "probe" },
        { observer: "source-node-c", observerNode: "node-c", node, at: t(650), kind: "probe" },
      ],
      round: 1,
      fencingBy: "fence-node-b",
      attempts: [
        {
          round: 1,
          level: 0,
          driver: "redfish",
          by: "fence-node-b",
          startedAt: t(720),
          commandAt: t(750),
          finishedAt: t(890),
          result: "off-confirmed",
          readBackState: "Off",
          readBackAt: t(880),
        },
      ],
      powerOffConfirmedAt: t(890),
      released: {
        taint: "node.kubernetes.io/out-of-service",
        podsDeleted: 2,
        volumeAttachmentsDeleted: 1,
        vmLaunchersDeleted: 1,
      },
      ...over,
    },
  };
}

function ev(type: string, incidentName: string, ms: number): FfEvent {
  return {
    specversion: "1.0",
    id: `${type}-${ms}`,
    source: "/fastfence/x/y",
    type,
    time: t(ms),
    ffincident: incidentName,
    data: { incident: incidentName },
  } as unknown as FfEvent;
}

const facts = (over: Partial<TrialFacts> = {}): TrialFacts => ({
  nodes: ["node-a", "node-b", "node-c"],
  faulted: ["node-a"],
  powerActions: [{ node: "node-a", at: 1_000_000 + 800, action: "off", by: "bmc" }],
  bootIds: [
    { node: "node-a", bootId: "boot-a1", since: 0 },
    { node: "node-b", bootId: "boot-b1", since: 0 },
  ],
  trustedConfirmers: [CONFIRM],
  ...over,
});

const chain = (name: string) => [
  ev("io.fastfence.fence.requested.v1", name, 710),
  ev("io.fastfence.node.fenced.v1", name, 895),
  ev("io.fastfence.workloads.released.v1", name, 1000),
];

describe("lab invariants", () => {
  it("a clean crash → fence → release history has no violations", () => {
    const i = incident();
    expect(checkInvariants({ events: chain(i.metadata.name), incidents: [i], facts: facts() })).toEqual([]);
  });

  it("S1: released before the Off read-back, or on a read-back other than exactly Off", () => {
    const early = incident({ powerOffConfirmedAt: t(1200) });
    expect(
      summarize(checkInvariants({ events: chain(early.metadata.name), incidents: [early], facts: facts() }))
        .S1,
    ).toBeGreaterThan(0);
    const poweringOff = incident({
      attempts: [{ ...incident().status!.attempts[0]!, readBackState: "PoweringOff" }],
    });
    expect(
      checkInvariants({
        events: chain(poweringOff.metadata.name),
        incidents: [poweringOff],
        facts: facts(),
      }).map((v) => v.rule),
    ).toContain("S1");
  });

  it("S1, the watchdog proof: clean only when the node's processes were really gone before the release", () => {
    const wd = incident({
      attempts: [
        {
          round: 1,
          level: 1,
          driver: "watchdog",
          by: "fence-node-b",
          startedAt: t(720),
          finishedAt: t(890),
          result: "watchdog-expired",
          watchdog: { timeoutMs: 5000, renewGraceMs: 2000, marginMs: 1500, quietMs: 8600, bootId: "boot-a1" },
        },
      ],
    });
    const run = (resets: TrialFacts["resets"]) =>
      checkInvariants({
        events: chain(wd.metadata.name),
        incidents: [wd],
        facts: facts({ powerActions: [], ...(resets ? { resets } : {}) }),
      });
    expect(run([{ node: "node-a", at: 1_000_000 + 300, kind: "power-loss" }])).toEqual([]);
    expect(run([{ node: "node-a", at: 1_000_000 + 950, kind: "watchdog-reset" }])).toEqual([]);
    const late = run([{ node: "node-a", at: 1_000_000 + 1001, kind: "watchdog-reset" }]);
    expect(late.map((v) => v.detail)).toContain(
      "released on a watchdog proof while the node's processes still ran",
    );
    expect(run(undefined).map((v) => v.rule)).toContain("S1");
  });

  it("a BMC that read back Off but powered nothing off is its own category, not an S1 violation", () => {
    const lie = incident();
    const input = { events: chain(lie.metadata.name), incidents: [lie], facts: facts({ powerActions: [] }) };
    expect(checkInvariants(input)).toEqual([]);
    expect(bmcLies(input)).toEqual([
      expect.objectContaining({ node: "node-a", level: 0, driver: "redfish", noticed: false }),
    ]);
    // an honest BMC: no lie
    expect(bmcLies({ ...input, facts: facts() })).toEqual([]);
    // the node was already off when the attempt began: an honest Off, not a lie
    const alreadyOff = facts({
      powerActions: [{ node: "node-a", at: 1_000_000 + 100, action: "off", by: "bmc" }],
    });
    expect(bmcLies({ ...input, facts: alreadyOff })).toEqual([]);
  });

  it("the look after: a lie fastfence noticed, then a second level that really powered the node off", () => {
    const lie = incident().status!.attempts[0]!;
    const ipmi = {
      ...lie,
      round: 2,
      level: 1,
      driver: "ipmi" as const,
      startedAt: t(5000),
      commandAt: t(5050),
      readBackAt: t(5400),
      finishedAt: t(5410),
    };
    const inc = incident({
      attempts: [lie, ipmi],
      powerOffConfirmedAt: t(5400),
      bmcLied: [
        { level: 0, driver: "redfish", round: 1, readBackAt: t(880), renewTime: t(4000), seenAt: t(4500) },
      ],
    });
    const input = {
      events: [...chain(inc.metadata.name), ev("io.fastfence.fence.failed.v1", inc.metadata.name, 4500)],
      incidents: [inc],
      facts: facts({ powerActions: [{ node: "node-a", at: 1_000_000 + 5200, action: "off", by: "bmc" }] }),
    };
    expect(checkInvariants(input)).toEqual([]);
    expect(bmcLies(input)).toEqual([expect.objectContaining({ level: 0, driver: "redfish", noticed: true })]);
    // the same history without the lie recorded: the later proof is fastfence's S1 violation
    const unnoticed = incident({ attempts: [lie, ipmi], powerOffConfirmedAt: t(5400) });
    expect(checkInvariants({ ...input, incidents: [unnoticed] }).map((v) => v.rule)).toContain("S1");
  });

  it("S2: one observer, or the node testifying about itself, is not a quorum", () => {
    const base = incident().status!.evidence;
    const one = incident({ evidence: [base[0]!, { ...base[0]!, observer: "other-replica" }] });
    expect(
      checkInvariants({ events: chain(one.metadata.name), incidents: [one], facts: facts() }).map(
        (v) => v.rule,
      ),
    ).toContain("S2");
    const self = incident({ evidence: [base[0]!, { ...base[1]!, observerNode: "node-a" }] });
    expect(
      checkInvariants({ events: chain(self.metadata.name), incidents: [self], facts: facts() }).map(
        (v) => v.rule,
      ),
    ).toContain("S2");
  });

  it("S2: an operator's request the trial made needs no observers; any other request still does", () => {
    const req = { by: "kubernetes-admin", reason: "bench", at: t(600) };
    const requested: NodeFence = { ...incident({ evidence: [] }) };
    requested.spec = { ...requested.spec, operatorRequest: req };
    const rules = (f: TrialFacts) =>
      checkInvariants({ events: chain(requested.metadata.name), incidents: [requested], facts: f }).map(
        (v) => v.rule,
      );
    expect(rules({ ...facts(), operatorRequested: ["node-a"] })).not.toContain("S2");
    // Not made by the trial (another node's request, or none recorded): no quorum, a violation.
    expect(rules({ ...facts(), operatorRequested: ["node-b"] })).toContain("S2");
    expect(rules(facts())).toContain("S2");
    // The trial's request does not excuse an incident without the request on it.
    const plain = incident({ evidence: [] });
    expect(
      checkInvariants({
        events: chain(plain.metadata.name),
        incidents: [plain],
        facts: { ...facts(), operatorRequested: ["node-a"] },
      }).map((v) => v.rule),
    ).toContain("S2");
  });

  it("S3: overlapping drivers, and a power action after the node rebooted", () => {
    const a = incident().status!.attempts[0]!;
    const two = incident({
      attempts: [a, { ...a, by: "fence-node-c", startedAt: t(800), finishedAt: t(900) }],
    });
    expect(
      checkInvariants({ events: chain(two.metadata.name), incidents: [two], facts: facts() }).map(
        (v) => v.rule,
      ),
    ).toContain("S3");
    const late = incident();
    const rebooted = facts({
      bootIds: [
        { node: "node-a", bootId: "boot-a1", since: 0 },
        { node: "node-a", bootId: "boot-a2", since: 1_000_000 + 700 },
      ],
    });
    expect(
      checkInvariants({ events: chain(late.metadata.name), incidents: [late], facts: rebooted }).map(
        (v) => v.rule,
      ),
    ).toContain("S3");
  });

  it("S4: two nodes fenced at once beyond the storm limit", () => {
    const a = incident();
    const b = incident({}, "node-b", "boot-b1");
    const vs = checkInvariants({
      events: [...chain(a.metadata.name), ...chain(b.metadata.name)],
      incidents: [a, b],
      facts: facts({
        faulted: ["node-a", "node-b"],
        powerActions: [...facts().powerActions, { node: "node-b", at: 1_000_800, action: "off", by: "bmc" }],
      }),
    });
    expect(vs.map((v) => v.rule)).toContain("S4");
  });

  it("S5: a fenced incident without a release event, and a dead letter without a reason", () => {
    const i = incident();
    const vs = checkInvariants({
      events: chain(i.metadata.name).slice(0, 2),
      incidents: [i],
      deadLetters: [{ code: "FF_INVALID_EVENT" }],
      facts: facts(),
    });
    expect(vs.filter((v) => v.rule === "S5").length).toBeGreaterThanOrEqual(2);
  });

  it("S6: fencing on an incident not confirmed by the confirm identity, or a request for no incident", () => {
    const forged = incident({ confirmedBy: "system:serviceaccount:x:attacker" });
    expect(
      checkInvariants({ events: chain(forged.metadata.name), incidents: [forged], facts: facts() }).map(
        (v) => v.rule,
      ),
    ).toContain("S6");
    const vs = checkInvariants({
      events: [ev("io.fastfence.fence.requested.v1", "ghost", 1)],
      incidents: [],
      facts: facts(),
    });
    expect(vs.map((v) => v.rule)).toContain("S6");
    const older = checkInvariants({
      events: [ev("io.fastfence.fence.requested.v1", "old-incident", 1)],
      incidents: [],
      knownIncidents: ["old-incident"],
      facts: facts(),
    });
    expect(older).toEqual([]);
  });

  it("H: a healthy node fenced (incident side and BMC side)", () => {
    const i = incident({}, "node-b", "boot-b1");
    const vs = checkInvariants({
      events: chain(i.metadata.name),
      incidents: [i],
      facts: facts({
        faulted: [],
        powerActions: [{ node: "node-b", at: 1_000_800, action: "off", by: "bmc" }],
      }),
    });
    expect(vs.filter((v) => v.rule === "H").length).toBe(2);
  });
});
