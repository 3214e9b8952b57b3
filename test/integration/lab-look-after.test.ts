// Needs real lab, ipmi_sim: a lying BMC and a hung node resuming, on real node processes.
// The look after the power-off on the lab (issue 18, item 2): node-b has two levels on the
// same emulated machine (`lab up --second-level`: Redfish, then IPMI through ipmi_sim). Its
// Redfish BMC lies (`bmc-fault --fault lying`: reads back Off, powers nothing off); node-b
// hangs, is fenced on that lie and its workloads released while its processes are only
// stopped; then it resumes. The look after must see its heartbeat renewed with the same boot
// ID, raise the alarm (incident FenceFailed reason BMCLied with the lie recorded, the Fenced
// condition False with that reason, a Kubernetes Event, fastfence_bmc_lied_total) and
// escalate to the IPMI level, which really powers node-b off (its processes gone). The lab's
// invariant checker reports the lying BMC in its own category and no fastfence violation.
// Prints the time from the resume to the IPMI level's read-back Off. Before that, on the
// same lab, the look before the power-off (issue 18, item 1): node-c (IPMI) hangs with its
// BMC unreachable, so round 1 fails without an off command; it resumes (same boot ID) during
// the backoff before round 2, whose last look must abandon the round: the incident ends
// Closed with NodeResponding, no off command sent, node-c never powered off. First, that the
// lab runs fastfence as shipped: each replica as its ServiceAccount of the openshift overlay,
// whose RBAC and admission policies refuse a stage's write outside its role. Needs root (the
// lab); runs the real lab: API server, Kafka, node agents, ipmi_sim, the Redfish emulator.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { labCli, labControl, labDown, until } from "../../harness/lab-driver.ts";
import type { NodeFence } from "../../core/incident.ts";
import { readState } from "../../lab/state.ts";
import { NAMESPACE, type AgentStatus } from "../../lab/types.ts";
import { replicaKubeConfig, serviceAccountOf } from "../../lab/replica-identity.ts";
import type { Component } from "../../events/catalog.ts";

const VICTIM = "node-b";
/** An IPMI-only node of the mixed lab (ipmi, redfish, ipmi): its one level can be cut off. */
const LOOK_VICTIM = "node-c";
/** The lab policy's backoff between rounds while the look-before test runs, ms. */
const LOOK_BACKOFF_MS = 10_000;
const root = process.getuid?.() === 0;

const cli = (...args: string[]) => labCli(args);

interface NodeStatus {
  name: string;
  ip: string;
  processes: number;
  power: string;
  bmc: string;
  bootId?: string;
}
const nodeStatus = (name: string): NodeStatus =>
  (JSON.parse(cli("status", "-o", "json")) as { nodes: NodeStatus[] }).nodes.find((n) => n.name === name)!;

const LOOK_AFTER = "the look after the power-off (lab, lying Redfish BMC + hang + resume)";
// In the order written, also under --sequence.shuffle: the second case leaves node-b powered
// off, and the first needs node-c's two observers up (node-a alone is no quorum, S2).
describe.skipIf(!root)(LOOK_AFTER, { shuffle: false }, () => {
  let custom: CustomObjectsApi;
  let core: CoreV1Api;
  let ours = false;

  beforeAll(() => {
    cli("up", "--second-level", "--control-plane", "host"); // its bounds assume the host control plane
    ours = true;
    const kc = new KubeConfig();
    kc.loadFromFile(readState()!.kubeconfig!);
    custom = kc.makeApiClient(CustomObjectsApi);
    core = kc.makeApiClient(CoreV1Api);
  }, 320_000);

  afterAll(() => {
    // only a lab this file brought up (.cache/lab may be another checkout's lab too)
    if (ours) labDown();
  }, 130_000);

  const incidentOf = async (node: string): Promise<NodeFence | undefined> => {
    const list = (await custom.listNamespacedCustomObject({
      group: "fastfence.io",
      version: "v1alpha1",
      namespace: NAMESPACE,
      plural: "nodefences",
    })) as { items: NodeFence[] };
    return list.items.find((i) => i.spec.nodeName === node);
  };
  /** The node's incident once `ok` holds for it. */
  const incidentWhen = (node: string, what: string, ok: (i: NodeFence) => boolean, ms = 60_000) =>
    until(
      what,
      async () => {
        const inc = await incidentOf(node);
        return inc && ok(inc) ? inc : undefined;
      },
      ms,
    );

  const patchBackoff = (retryBackoffMs: number) =>
    custom.patchClusterCustomObject(
      {
        group: "fastfence.io",
        version: "v1alpha1",
        plural: "fencingpolicies",
        name: "default",
        body: { spec: { fencing: { retryBackoffMs } } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );

  it("every replica runs as its shipped ServiceAccount, and the API server refuses a stage's write outside its role", async () => {
    const s = readState()!;
    expect(s.access?.overlay).toBe("knative/overlays/openshift");
    expect(s.access?.renderHash).toMatch(/^[0-9a-f]{16}$/);
    const sa = (c: string) => `system:serviceaccount:${NAMESPACE}:${serviceAccountOf(c as Component)}`;
    for (const n of s.nodes) {
      const agent = JSON.parse(readFileSync(join(n.dir, "agent.json"), "utf8")) as AgentStatus;
      const ids = agent.identities ?? {};
      expect(Object.keys(ids).sort(), n.name).toEqual(["event-source", ...agent.functions].sort());
      for (const [c, user] of Object.entries(ids)) expect(user, `${n.name} ${c}`).toBe(sa(c));
    }
    // A token minted as the agents mint theirs: fence may patch Nodes only for its
    // fenced-off fact; a label is outside its role (knative/base/admission node-writers).
    const admin = new KubeConfig();
    admin.loadFromFile(s.kubeconfig!);
    const fence = await replicaKubeConfig(admin, {
      namespace: NAMESPACE,
      node: "node-a",
      component: "fence",
      boot: "test",
    });
    const err = await fence
      .makeApiClient(CoreV1Api)
      .patchNode(
        { name: "node-a", body: { metadata: { labels: { "lab.fastfence.io/forged": "yes" } } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      )
      .then(
        () => undefined,
        (e: { code?: number; body?: unknown }) => e,
      );
    expect(err?.code, "fence labelling a Node").toBe(403);
    expect(
      (await core.readNode({ name: "node-a" })).metadata?.labels?.["lab.fastfence.io/forged"],
    ).toBeUndefined();
    // And a write no stage's RBAC grants at all: creating a Pod.
    const pod = await fence
      .makeApiClient(CoreV1Api)
      .createNamespacedPod({
        namespace: NAMESPACE,
        body: { metadata: { name: "forged" }, spec: { containers: [{ name: "c", image: "x" }] } },
      })
      .then(
        () => undefined,
        (e: { code?: number }) => e,
      );
    expect(pod?.code, "fence creating a Pod").toBe(403);
  });

  it("the look before the off command: a node back (same boot) before round 2 is not powered off", async () => {
    const before = nodeStatus(LOOK_VICTIM);
    expect(before.bmc).toMatch(/^ipmi /);
    await patchBackoff(LOOK_BACKOFF_MS);
    try {
      await new Promise((r) => setTimeout(r, 2_000)); // every stage reads the new policy
      await labControl("/mark");
      cli("bmc-fault", LOOK_VICTIM, "--fault", "unreachable");
      const hungAt = Date.now();
      cli("hang", LOOK_VICTIM);
      // Round 1 fails without an off command: the BMC answers nothing.
      const failed = await incidentWhen(LOOK_VICTIM, "round 1 of node-c ended unreachable", (i) =>
        i.status!.attempts.some((a) => a.round === 1 && a.result === "unreachable"),
      );
      const round1At = Date.now();
      cli("bmc-fault", LOOK_VICTIM, "--fault", "none");
      cli("resume", LOOK_VICTIM);
      const resumedAt = Date.now();
      const closed = await incidentWhen(
        LOOK_VICTIM,
        "node-c's incident Closed",
        (i) => i.status?.phase === "Closed",
      );
      const st = closed.status!;
      console.log(
        `look before: hang → round 1 unreachable ${round1At - hungAt} ms; resumed ${resumedAt - round1At} ms later; Closed ${Date.now() - resumedAt} ms after the resume (${st.reason}: ${st.message}); attempts: ${st.attempts.map((a) => `r${a.round}/l${a.level}:${a.result}${a.lastLook ? `(${JSON.stringify(a.lastLook)})` : ""}`).join(", ")}`,
      );
      expect(failed.metadata.name).toBe(closed.metadata.name);
      expect(st.reason).toBe("NodeResponding");
      const looked = st.attempts.filter((a) => a.result === "abandoned");
      expect(looked.length).toBeGreaterThanOrEqual(1);
      expect(looked.at(-1)!.lastLook).toMatchObject({ reason: "NodeResponding", back: true });
      expect(st.attempts.every((a) => a.commandAt === undefined)).toBe(true);
      expect(st.powerOffConfirmedAt).toBeUndefined();
      // Never powered off: still On, its processes running, the same boot.
      const after = nodeStatus(LOOK_VICTIM);
      expect(after.power).toBe("On");
      expect(after.processes).toBeGreaterThan(0);
      expect(after.bootId).toBe(before.bootId);
      const checked = (await labControl("/check", { node: LOOK_VICTIM })) as { violations: unknown[] };
      expect(checked.violations).toEqual([]);
    } finally {
      cli("bmc-fault", LOOK_VICTIM, "--fault", "none");
      cli("resume", LOOK_VICTIM);
      await patchBackoff(500);
    }
  }, 180_000);

  it("raises the alarm and escalates to the IPMI level, which really powers the node off", async () => {
    // node-b's own fence replica is stopped first: a replica on the node that gets powered
    // off would take the alarm's counter (and a round it drives) down with it.
    cli("fn-crash", VICTIM, "--functions", "fence");
    await labControl("/mark");
    cli("bmc-fault", VICTIM, "--fault", "lying");
    const hungAt = Date.now();
    cli("hang", VICTIM);

    // Fenced on the lie: released while its processes are only stopped.
    const lied = await incidentWhen(
      VICTIM,
      "node-b Released on the Redfish level's read-back Off",
      (i) => i.status?.phase === "Released",
    );
    const first = lied.status!.attempts.find((a) => a.result === "off-confirmed")!;
    expect(first).toMatchObject({ level: 0, driver: "redfish", readBackState: "Off" });
    expect(nodeStatus(VICTIM).processes).toBeGreaterThan(0); // the lie: nothing was powered off
    console.log(
      `released on the lie ${Date.parse(lied.status!.timestamps.released!) - hungAt} ms after the hang`,
    );

    const resumedAt = Date.now();
    cli("resume", VICTIM);

    // The alarm, then the escalation: level 2 (IPMI) reads back Off.
    const escalated = await incidentWhen(VICTIM, "the IPMI level's read-back Off after the alarm", (i) => {
      const st = i.status;
      const ipmi = st?.attempts.find((a) => a.level === 1 && a.result === "off-confirmed");
      return Boolean(st?.bmcLied?.length && ipmi && st.powerOffConfirmedAt);
    });
    const st = escalated.status!;
    expect(st.bmcLied).toHaveLength(1);
    expect(st.bmcLied![0]).toMatchObject({ level: 0, driver: "redfish", readBackAt: first.readBackAt });
    const ipmi = st.attempts.find((a) => a.level === 1 && a.result === "off-confirmed")!;
    expect(ipmi).toMatchObject({ driver: "ipmi", readBackState: "Off" });
    // No attempt of the lying level after the lie.
    expect(
      st.attempts.filter(
        (a) => a.level === 0 && Date.parse(a.startedAt) > Date.parse(st.bmcLied![0]!.seenAt),
      ),
    ).toEqual([]);
    const toAlarm = Date.parse(st.bmcLied![0]!.seenAt) - resumedAt;
    const toOff = Date.parse(ipmi.readBackAt!) - resumedAt;
    console.log(`resume → BMCLied seen ${toAlarm} ms; resume → IPMI read-back Off ${toOff} ms`);

    // Really off: every process of node-b is gone.
    await until(
      "node-b's processes gone",
      async () => (nodeStatus(VICTIM).processes === 0 ? true : undefined),
      10_000,
    );

    // The alarm: a Kubernetes Event with the reason, and the metric on a surviving node.
    const events = await core.listNamespacedEvent({ namespace: NAMESPACE });
    const alarm = events.items.filter(
      (e) => e.reason === "BMCLied" && e.involvedObject.name === escalated.metadata.name,
    );
    expect(alarm.length).toBeGreaterThan(0);
    expect(alarm[0]!.type).toBe("Warning");
    const survivors = ["node-a", "node-c"].map(nodeStatus);
    const texts = await Promise.all(
      survivors.map((n) => fetch(`http://${n.ip}:7070/metrics`).then((r) => r.text())),
    );
    const lies = texts
      .join("\n")
      .split("\n")
      .filter((l) => l.startsWith('fastfence_bmc_lied_total{level="1",driver="redfish"}'))
      .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
    expect(lies).toBe(1);

    // The invariant checker: the lie in its own category, no fastfence violation. The
    // incident goes on to Released again (the Fenced condition said BMCLied meanwhile).
    await incidentWhen(VICTIM, "Released again", (i) => i.status?.phase === "Released", 20_000);
    const checked = (await labControl("/check", { node: VICTIM })) as {
      violations: unknown[];
      bmcLied: { driver: string; level: number; noticed: boolean }[];
    };
    expect(checked.violations).toEqual([]);
    expect(checked.bmcLied).toEqual([
      expect.objectContaining({ driver: "redfish", level: 0, noticed: true }),
    ]);
  }, 240_000);
});
