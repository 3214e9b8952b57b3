// Needs real pipeline cluster: fence requests replayed with confirm's Kafka credentials.
// Replayed fence requests, on the real stack (real kube-apiserver with the manifests' RBAC
// and admission policies, real Kafka with TLS, SCRAM and ACLs, lab BMCs, every function
// running as its own identity): an incident is written exactly as confirm writes one —
// created, then Suspected → Confirmed with confirmedBy = confirm's own ServiceAccount, so
// the admission policies accept it — and the fence.requested CloudEvent confirm would send
// is kept. Then, with confirm's own Kafka credentials (the holder of one component's
// credentials, or someone who recorded that record off the wire):
//  (a) the node recovered without rebooting and its incident was closed (by recover's
//      identity, a legal transition): the request is replayed byte for byte, then again as
//      a fresh copy (new event id, so no replica's duplicate filter catches it);
//  (b) the node rebooted (a new status.nodeInfo.bootID, as its kubelet reports) while its
//      incident still says Confirmed: the request from before the reboot is replayed.
// Asserts: no BMC received a power command and every node still reads On; no fence replica
// started a fencing round (no "processed" outcome, no fencing Lease for the node); the
// incident never left its phase for Fencing; every fence replica recorded an "ignored"
// outcome (fastfence_event_outcomes_total) for each request; and the refusal's code —
// read from a fourth fence replica run here as fence's identity with fence's Kafka
// credentials (each fence replica reads every record), whose structured outcome records
// are kept — is PhasePassed in (a) and StaleIncarnation in (b); the byte-exact copy is
// skipped as a copy of a fact already handled.
import { CoordinationV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { hostFunction } from "../../app/host.ts";
import type { IgnoreCode } from "../../core/reasons.ts";
import {
  emptyStatus,
  incidentName,
  newIncident,
  transition,
  type Evidence,
  type NodeFence,
} from "../../core/incident.ts";
import { EVENT_TYPES, TOPICS } from "../../events/catalog.ts";
import { encodeKafka } from "../../events/codec.ts";
import { envelope, type FfEvent } from "../../events/envelope.ts";
import type { FenceRequested } from "../../events/schemas.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { Kube } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { fenceLeaseName } from "../../infra/kube/lease.ts";
import { loadRuntimeConfig } from "../../infra/config.ts";
import { createLogger } from "../../infra/log.ts";
import { NAMESPACE, startPipelineCluster, sleep } from "../../harness/env/pipeline-cluster.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { waitFor } from "./pipeline-helpers.ts";

const [A, B, C] = ["node-a", "node-b", "node-c"] as const;
const CONFIRM = `system:serviceaccount:${NAMESPACE}:fastfence-confirm`;
const iso = (ms: number) => new Date(ms).toISOString();

interface OutcomeLine {
  eventId?: string;
  incident?: string;
  outcome?: { kind: string; code?: string; reason?: string };
}

const env = withEnv(async (scope) => {
  const c = scope.add(await startPipelineCluster());
  // A fourth fence replica "on no node", as fence's own identity and Kafka principal, whose
  // structured log (every outcome with its code) is kept. In the default group mode each
  // replica reads every record, so it sees exactly what the three pipeline replicas see.
  const outcomes: OutcomeLine[] = [];
  const bus = createKafkaBus({
    brokers: c.kafka.bootstrap,
    clientId: "fence-witness",
    sessionTimeoutMs: 3000,
    security: c.kafka.clientSecurity("fence"),
  });
  scope.add({ stop: () => bus.close() });
  const witness = scope.add(
    await hostFunction({
      name: "fence",
      mode: { kafka: true },
      config: loadRuntimeConfig({
        FASTFENCE_NAMESPACE: NAMESPACE,
        FASTFENCE_REPLICA: "fence-witness",
      }),
      kubeConfig: await serviceAccountKubeConfig(c.kc, {
        namespace: NAMESPACE,
        serviceAccount: "fastfence-fence",
      }),
      bus,
      log: createLogger("fence", {
        level: "info",
        destination: { write: (l: string) => void outcomes.push(JSON.parse(l) as OutcomeLine) },
      }),
    }),
  );
  await witness.ready;
  const as = async (stage: string) =>
    new IncidentStore(
      new Kube(
        await serviceAccountKubeConfig(c.kc, { namespace: NAMESPACE, serviceAccount: `fastfence-${stage}` }),
        {
          requestTimeoutMs: 5000,
        },
      ),
      NAMESPACE,
    );
  const asConfirmOnKafka = createKafkaBus({
    brokers: c.kafka.bootstrap,
    clientId: "confirm-credentials-replayer",
    security: c.kafka.clientSecurity("confirm"),
  });
  scope.add({ stop: () => asConfirmOnKafka.close() });
  return {
    c,
    witness,
    outcomes,
    asConfirm: await as("confirm"),
    asRecover: await as("recover"),
    asConfirmOnKafka,
  };
});

/** The incident confirm writes for `node` (created, Suspected, then Confirmed by confirm), and its fence request. */
async function confirmedIncident(node: string, observers: readonly string[]) {
  const { c, asConfirm } = env();
  const boot = (await c.core.readNode({ name: node })).status!.nodeInfo!.bootID!;
  const t0 = Date.now();
  const evidence: Evidence[] = observers.map((o, i) => ({
    observer: `source-${o}`,
    observerNode: o,
    node,
    targetBootId: boot,
    at: iso(t0 - 200 + i * 50),
    kind: "probe",
    consecutiveMisses: 3,
    firstMissAt: iso(t0 - 600),
    heartbeatSynced: true,
  }));
  const suspected = transition(emptyStatus(), "Suspected", iso(t0 - 200), { evidence: evidence.slice(0, 1) });
  const created = await asConfirm.create(newIncident(node, boot, suspected));
  const confirmed = transition({ ...suspected, evidence }, "Confirmed", iso(t0), {
    confirmedBy: CONFIRM,
    reason: "Corroborated",
    message: `confirmed by ${observers.length} independent observers`,
  });
  const name = incidentName(node, boot);
  const inc = await asConfirm.writeStatus(name, created.metadata.resourceVersion!, confirmed);
  expect(inc.status?.phase).toBe("Confirmed");
  const data: FenceRequested = {
    incident: name,
    node,
    bootId: boot,
    confirmedAt: confirmed.timestamps.confirmed!,
    observers: evidence.map((e) => `${e.observer}@${e.observerNode}`).sort(),
  };
  const request = envelope(
    { type: EVENT_TYPES.fenceRequested, subject: node, ffincident: name, data },
    `/fastfence/confirm/confirm-${A}`,
    t0,
  );
  return { inc, boot, request };
}

/** The witness's recorded outcome of event `id`, once it has one. */
async function outcomeOf(id: string): Promise<NonNullable<OutcomeLine["outcome"]>> {
  return waitFor(
    `fence's outcome of event ${id}`,
    async () => env().outcomes.find((l) => l.eventId === id && l.outcome)?.outcome,
    30_000,
    100,
  );
}

/** Per fence replica (the pipeline's three and the witness): outcome kind → count. */
async function fenceOutcomes(): Promise<Map<string, Record<string, number>>> {
  const { c, witness } = env();
  const out = new Map<string, Record<string, number>>();
  const fences = [
    ...[...c.nodes.values()].flatMap((p) =>
      p.functions.filter((f) => f.name === "fence").map((f) => [p.name, f] as const),
    ),
    ["witness", witness] as const,
  ];
  for (const [where, f] of fences) {
    const kinds: Record<string, number> = {};
    for (const v of (await f.metrics.outcomes.get()).values) kinds[String(v.labels.outcome)] = v.value;
    out.set(where, kinds);
  }
  return out;
}

/** Nothing was powered off, no fencing round started, and the incident is in one of `phases`. */
async function expectNothingFenced(inc: NodeFence, phases: readonly string[]): Promise<void> {
  const { c } = env();
  // a fencing round would have started within this time (the BMCs answer in milliseconds)
  await sleep(2000);
  for (const [name, parts] of c.nodes) {
    expect(parts.bmc.stats.resets, `power commands to ${name}'s BMC`).toEqual([]);
    expect(parts.bmc.power, `${name}'s power`).toBe("On");
  }
  for (const [where, kinds] of await fenceOutcomes())
    expect(kinds.processed ?? 0, `fencing rounds started by the fence replica on ${where}`).toBe(0);
  const coord = c.kc.makeApiClient(CoordinationV1Api);
  await expect(
    coord.readNamespacedLease({ name: fenceLeaseName(inc.spec.nodeName), namespace: NAMESPACE }),
    "the node's fencing Lease",
  ).rejects.toMatchObject({ code: 404 });
  const now = await env().asConfirm.get(inc.metadata.name);
  expect(phases).toContain(now?.status?.phase);
  expect(now?.status?.timestamps.fencing).toBeUndefined();
}

const ignoredWith = (code: IgnoreCode) => expect.objectContaining({ kind: "ignored", code });

/** Every fence replica recorded at least `n` more "ignored" outcomes than in `before`. */
async function expectIgnoredBy(before: Map<string, Record<string, number>>, n: number): Promise<void> {
  await waitFor(`every fence replica recorded ${n} more ignored outcomes`, async () => {
    const now = await fenceOutcomes();
    return [...now].every(([where, k]) => (k.ignored ?? 0) - (before.get(where)?.ignored ?? 0) >= n)
      ? true
      : undefined;
  });
}

describe("replayed fence requests", () => {
  it("after the node recovered without rebooting (incident closed): refused PhasePassed, byte-exact copy skipped, nothing powered off", async () => {
    const { asRecover, asConfirmOnKafka, witness } = env();
    const { inc, request } = await confirmedIncident(B, [A, C]);
    // node-b came back by itself (no reboot): its incident is closed, by recover's identity
    const current = (await asRecover.get(inc.metadata.name))!;
    const closed = await asRecover.writeStatus(
      inc.metadata.name,
      current.metadata.resourceVersion!,
      transition(current.status!, "Closed", iso(Date.now()), {
        reason: "NodeRecovered",
        message: `${B} answers its peers again without a reboot`,
      }),
    );
    expect(closed.status?.phase).toBe("Closed");

    // The recorded request, replayed with confirm's Kafka credentials.
    const before = await fenceOutcomes();
    const record = encodeKafka(request);
    await asConfirmOnKafka.publish(TOPICS.fenceRequests, [record]);
    expect(await outcomeOf(request.id)).toEqual(ignoredWith("PhasePassed"));
    // The very same record again (same bytes: key, value, headers): a copy of a fact this
    // replica handled is not even handed to the stage again.
    const duplicates = async () =>
      (await witness.metrics.outcomes.get()).values.find((v) => v.labels.outcome === "duplicate")?.value ?? 0;
    const copies = await duplicates();
    await asConfirmOnKafka.publish(TOPICS.fenceRequests, [record]);
    await waitFor("the byte-exact copy skipped", async () =>
      (await duplicates()) > copies ? true : undefined,
    );
    // A fresh copy (new id and time, same request) gets past that filter: fence re-reads the
    // incident and refuses it on its state.
    const fresh: FfEvent = envelope(
      { type: request.type, subject: request.subject, ffincident: request.ffincident!, data: request.data },
      request.source,
      Date.now(),
    );
    await asConfirmOnKafka.publish(TOPICS.fenceRequests, [encodeKafka(fresh)]);
    expect(await outcomeOf(fresh.id)).toEqual(ignoredWith("PhasePassed"));
    // the pipeline's own fence replicas refused both too
    await expectIgnoredBy(before, 2);

    await expectNothingFenced(inc, ["Closed"]);
  });

  it("after the node rebooted (incident still Confirmed for the old boot): refused StaleIncarnation, nothing powered off", async () => {
    const { c, asConfirmOnKafka } = env();
    const { inc, boot, request } = await confirmedIncident(C, [A, B]);
    // node-c rebooted before it was fenced: its kubelet reports a new boot ID.
    await c.kwok.byName(C).restart({ reboot: true });
    const rebooted = (await c.core.readNode({ name: C })).status!.nodeInfo!.bootID!;
    expect(rebooted).not.toBe(boot);

    const before = await fenceOutcomes();
    await asConfirmOnKafka.publish(TOPICS.fenceRequests, [encodeKafka(request)]);
    expect(await outcomeOf(request.id)).toEqual(ignoredWith("StaleIncarnation"));
    await expectIgnoredBy(before, 1);
    // recover may close the incident meanwhile (a new boot before fencing, reason
    // NodeRebooted): either way it never moves to Fencing
    await expectNothingFenced(inc, ["Confirmed", "Closed"]);
  });
});
