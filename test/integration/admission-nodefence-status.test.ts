// Needs real kube-apiserver (+ etcd): admission on NodeFence status writes, per stage token.
// NodeFence status integrity (issue 13), enforced by a real kube-apiserver with the
// policies of knative/base/admission: each stage's real ServiceAccount token (TokenRequest)
// writes through the product's IncidentStore. Every identity is given generous RBAC on
// purpose (as if a Role had been granted by mistake), so each refusal here is the
// admission policy's, not RBAC's: a non-fence identity cannot write FencedOff or the
// power-off proof, only remediate-workloads can write Released, illegal transitions are
// refused even for the phase's owner, and the legal path under the right identities works;
// a stage deletes only an incident closed as back (nodefence-delete-policy.yaml).
import { RbacAuthorizationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  emptyStatus,
  newIncident,
  transition,
  type Attempt,
  type NodeFence,
  type NodeFenceStatus,
} from "../../core/incident.ts";
import { Kube, KubeApiError } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sleep } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { FASTFENCE_NAMESPACE as NS } from "../../harness/kube/fencing-policy.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";

const STAGES = ["detect", "confirm", "fence", "remediate-workloads", "recover"] as const;
type Who = (typeof STAGES)[number] | "admin";
const sa = (stage: string) => `system:serviceaccount:${NS}:fastfence-${stage}`;

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kc = cp.kubeConfig;
  await applyObjects(kc, shippedAccessControl());
  // Too-generous RBAC for every stage: the admission policy must hold on its own.
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: "too-generous" },
      rules: [
        {
          apiGroups: ["fastfence.io"],
          resources: ["nodefences", "nodefences/status"],
          verbs: ["get", "list", "create", "update", "patch", "delete"],
        },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "too-generous" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "too-generous" },
      subjects: STAGES.map((s) => ({ kind: "ServiceAccount", name: `fastfence-${s}`, namespace: NS })),
    },
  });
  const stores = {} as Record<Who, IncidentStore>;
  const store = (k: KubeConfig) => new IncidentStore(new Kube(k, { requestTimeoutMs: 5000 }), NS);
  for (const s of STAGES)
    stores[s] = store(
      await serviceAccountKubeConfig(kc, { namespace: NS, serviceAccount: `fastfence-${s}` }),
    );
  stores.admin = store(kc);
  await sleep(1500); // the policies' type checking and bindings settle in the apiserver
  return stores;
});

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 12, 0, s)).toISOString();
const evidence = (observer: string, node: string) => ({
  observer: `source-${observer}`,
  observerNode: observer,
  node,
  at: at(1),
  kind: "probe" as const,
  consecutiveMisses: 3,
  firstMissAt: at(0),
});
const offAttempt: Attempt = {
  round: 1,
  level: 0,
  driver: "redfish",
  by: "fence-node-c",
  startedAt: at(3),
  commandAt: at(3),
  finishedAt: at(4),
  result: "off-confirmed",
  readBackState: "Off",
  readBackAt: at(4),
};

/** The statuses of the legal path, as the stages' decisions build them (core/incident.ts). */
function path(node: string) {
  const suspected = transition(emptyStatus(), "Suspected", at(1), { evidence: [evidence("node-b", node)] });
  const confirmed = transition(
    { ...suspected, evidence: [...suspected.evidence, evidence("node-c", node)] },
    "Confirmed",
    at(2),
    { confirmedBy: sa("confirm"), reason: "Corroborated" },
  );
  const fencing = transition(confirmed, "Fencing", at(3), { round: 1, fencingBy: "fence-node-c" });
  const fencedOff = transition(fencing, "FencedOff", at(4), {
    attempts: [offAttempt],
    powerOffConfirmedAt: at(4),
    reason: "PowerOffConfirmed",
  });
  const released = transition(fencedOff, "Released", at(5), {
    released: {
      taint: "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
      podsDeleted: 2,
      volumeAttachmentsDeleted: 0,
      vmLaunchersDeleted: 0,
    },
  });
  const powerOn = { ...released, powerOnRequestedAt: at(6) };
  const recovered = transition(powerOn, "Recovered", at(7), { recoveredBootId: "boot-2" });
  return { suspected, confirmed, fencing, fencedOff, released, powerOn, recovered };
}

/** Writes `status` as `who` on top of the incident's current version. */
async function write(who: Who, name: string, status: NodeFenceStatus): Promise<NodeFence> {
  const s = env()[who];
  const cur = await s.get(name);
  return s.writeStatus(name, cur!.metadata.resourceVersion!, status);
}

async function refused(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 403) return err.message;
    throw err;
  }
  throw new Error("the write was admitted");
}

/** A new incident for `node`, moved along the legal path up to `upTo` by the owners. */
async function incidentAt(node: string, upTo: "Suspected" | "Confirmed" | "Fencing" | "FencedOff") {
  const p = path(node);
  const inc = await env().confirm.create(newIncident(node, "boot-1", p.suspected));
  const name = inc.metadata.name;
  if (upTo === "Suspected") return { name, p };
  await write("confirm", name, p.confirmed);
  if (upTo === "Confirmed") return { name, p };
  await write("fence", name, p.fencing);
  if (upTo === "Fencing") return { name, p };
  await write("fence", name, p.fencedOff);
  return { name, p };
}

describe("NodeFence status admission: phases by their owners, along the allowed transitions", () => {
  it("the legal path under the right identities succeeds", async () => {
    const { name, p } = await incidentAt("node-legal", "FencedOff");
    await write("remediate-workloads", name, p.released);
    await write("recover", name, p.powerOn);
    const done = await write("recover", name, p.recovered);
    expect(done.status).toMatchObject({
      phase: "Recovered",
      confirmedBy: sa("confirm"),
      powerOffConfirmedAt: at(4),
      recoveredBootId: "boot-2",
      powerOnRequestedAt: at(6),
    });
  });

  it.each(["detect", "confirm", "remediate-workloads", "recover", "admin"] as const)(
    "%s cannot write phase FencedOff (nor the power-off proof)",
    async (who) => {
      const { name, p } = await incidentAt(`node-off-${who}`, "Fencing");
      const msg = await refused(write(who, name, p.fencedOff));
      expect(msg).toMatch(new RegExp(`only ${sa("fence")} may set phase FencedOff`));
      // the proof alone, phase unchanged
      const proof = await refused(
        write(who, name, { ...p.fencing, attempts: [offAttempt], powerOffConfirmedAt: at(4) }),
      );
      expect(proof).toMatch(/only .*fastfence-fence may change status.round, fencingBy, attempts/);
      expect((await env().admin.get(name))?.status?.phase).toBe("Fencing");
    },
  );

  it.each(["detect", "confirm", "fence", "recover", "admin"] as const)(
    "%s cannot write phase Released",
    async (who) => {
      const { name, p } = await incidentAt(`node-rel-${who}`, "FencedOff");
      const msg = await refused(write(who, name, p.released));
      expect(msg).toMatch(new RegExp(`only ${sa("remediate-workloads")} may set phase Released`));
      expect((await env().admin.get(name))?.status?.phase).toBe("FencedOff");
    },
  );

  it("the look after: only fence may take a Released incident back to FenceFailed and record a lie", async () => {
    const { name, p } = await incidentAt("node-lied", "FencedOff");
    await write("remediate-workloads", name, p.released);
    const lie = {
      level: 0,
      driver: "redfish" as const,
      round: 1,
      readBackAt: at(4),
      renewTime: at(8),
      seenAt: at(9),
    };
    const alarm = transition(p.released, "FenceFailed", at(9), {
      reason: "BMCLied",
      bmcLied: [lie],
      powerOffConfirmedAt: undefined,
      retryNotBefore: at(9),
    });
    for (const who of ["detect", "confirm", "remediate-workloads", "recover", "admin"] as const) {
      const msg = await refused(write(who, name, alarm));
      expect(msg).toMatch(/only .*fastfence-fence may set phase FenceFailed/);
      // the lie alone, phase unchanged
      const field = await refused(write(who, name, { ...p.released, bmcLied: [lie] }));
      expect(field).toMatch(/only .*fastfence-fence may change status.round, fencingBy, attempts/);
    }
    const done = await write("fence", name, alarm);
    expect(done.status).toMatchObject({ phase: "FenceFailed", reason: "BMCLied", bmcLied: [lie] });
    expect(done.status!.powerOffConfirmedAt).toBeUndefined();
    expect(done.status!.timestamps.released).toBe(at(5)); // history stays
  });

  it("illegal transitions are refused even for the phase's owner", async () => {
    const s = await incidentAt("node-skip", "Suspected");
    // Suspected → Released (remediate-workloads owns Released)
    const r1 = await refused(
      write("remediate-workloads", s.name, {
        ...s.p.released,
        timestamps: s.p.suspected.timestamps,
        confirmedBy: undefined,
      }),
    );
    expect(r1).toMatch(/NodeFence phase Suspected -> Released is not an allowed transition/);
    // Suspected → FencedOff, skipping confirmation (fence owns FencedOff)
    const r2 = await refused(
      write("fence", s.name, {
        ...s.p.fencedOff,
        timestamps: s.p.suspected.timestamps,
        confirmedBy: undefined,
      }),
    );
    expect(r2).toMatch(/Suspected -> FencedOff is not an allowed transition/);
    // FencedOff → Suspected (confirm owns Suspected)
    const f = await incidentAt("node-back", "FencedOff");
    const r3 = await refused(write("confirm", f.name, { ...f.p.fencedOff, phase: "Suspected" }));
    expect(r3).toMatch(/FencedOff -> Suspected is not an allowed transition/);
    // Confirmed → FencedOff without Fencing
    const c = await incidentAt("node-jump", "Confirmed");
    const r4 = await refused(write("fence", c.name, transitionUnchecked(c.p.confirmed, "FencedOff")));
    expect(r4).toMatch(/Confirmed -> FencedOff is not an allowed transition/);
  });

  it("fields belong to their stage: evidence, released, recovery, recorded timestamps", async () => {
    const { name, p } = await incidentAt("node-fields", "FencedOff");
    // fence adding an observer to the evidence
    const ev = await refused(
      write("fence", name, { ...p.fencedOff, evidence: [...p.fencedOff.evidence, evidence("node-d", "x")] }),
    );
    expect(ev).toMatch(/only .*fastfence-confirm may change status.evidence/);
    // recover claiming the workloads were released
    const rel = await refused(write("recover", name, { ...p.fencedOff, released: p.released.released! }));
    expect(rel).toMatch(/only .*fastfence-remediate-workloads may change status.released/);
    // remediate-workloads moving the confirmation time (evidence freshness is measured from it)
    const ts = await refused(
      write("remediate-workloads", name, {
        ...p.fencedOff,
        timestamps: { ...p.fencedOff.timestamps, confirmed: at(30) },
      }),
    );
    expect(ts).toMatch(/a recorded time never changes/);
    // fence writing a recovery
    const rec = await refused(write("fence", name, { ...p.fencedOff, recoveredBootId: "boot-9" }));
    expect(rec).toMatch(/only .*fastfence-recover may change status.recoveredBootId/);
  });
});

describe("NodeFence delete admission: a stage deletes only an incident closed as back", () => {
  it("confirm may replace one closed as back, never an open one, an observed one or the record of a power-off", async () => {
    // open (Confirmed): confirm and fence refused, whatever RBAC says
    const open = await incidentAt("node-del-open", "Confirmed");
    const rv = async (name: string) => (await env().admin.get(name))!.metadata.resourceVersion!;
    for (const who of ["confirm", "fence"] as const) {
      const why = await refused(env()[who].removeClosed(open.name, await rv(open.name)));
      expect(why).toMatch(/a fastfence stage may delete only a NodeFence closed as back/);
    }
    // fenced, then recovered and closed: the record of a power-off stays
    const fenced = await incidentAt("node-del-fenced", "FencedOff");
    await write("remediate-workloads", fenced.name, fenced.p.released);
    await write("recover", fenced.name, fenced.p.recovered);
    await write("recover", fenced.name, transition(fenced.p.recovered, "Closed", at(8)));
    await refused(env().confirm.removeClosed(fenced.name, await rv(fenced.name)));
    // closed without a round (observed): the node may still be down, the record stays
    const observed = await incidentAt("node-del-observed", "Confirmed");
    const seen = transition(observed.p.confirmed, "Closed", at(3), { reason: "Observed" });
    await write("recover", observed.name, seen);
    await refused(env().confirm.removeClosed(observed.name, await rv(observed.name)));
    // closed as back (fence's last look abandoned the round, nothing powered off): confirm may delete it
    const back = await incidentAt("node-del-back", "Fencing");
    const looked: Attempt = {
      ...offAttempt,
      result: "abandoned",
      commandAt: undefined,
      readBackState: undefined,
      readBackAt: undefined,
    };
    const failed = transition(back.p.fencing, "FenceFailed", at(4), {
      attempts: [looked],
      reason: "NodeResponding",
    });
    await write("fence", back.name, failed);
    await write("recover", back.name, transition(failed, "Closed", at(5), { reason: "NodeResponding" }));
    await env().confirm.removeClosed(back.name, await rv(back.name));
    expect(await env().admin.get(back.name)).toBeUndefined();
    // an identity that is no stage (an operator, an uninstall) is RBAC's business
    await env().admin.removeClosed(open.name, await rv(open.name));
    expect(await env().admin.get(open.name)).toBeUndefined();
  });
});

/** A status in phase `to` with its timestamp, without the transition table's check. */
function transitionUnchecked(st: NodeFenceStatus, to: NodeFenceStatus["phase"]): NodeFenceStatus {
  return { ...st, phase: to, timestamps: { ...st.timestamps } };
}
