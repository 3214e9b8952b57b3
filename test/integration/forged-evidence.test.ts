// Needs real pipeline cluster: forgeries made with a node's real token and Kafka credentials.
// Evidence bound to its origin and time that cannot be shifted, on the real stack (real
// kube-apiserver with the manifests' RBAC and admission policies, real Kafka with TLS,
// SCRAM and ACLs, lab BMCs, every function running): root on node-a holds node-a's
// event-source identity and Kafka credentials, and even puts a key of its own making on
// node-a's heartbeat Lease (which that identity may write). With that it forges
// observations that name node-b's observer about healthy node-c (signed with node-a's
// published key, unsigned, or under node-b's key id), observations timestamped in the
// future (the claim and the envelope), and — holding detect's credentials too — suspicions
// whose evidence names node-b's observer or comes from the future. Asserts: no BMC
// received a power command, no incident got past Suspected, every forged input was
// dead-lettered with its reason code, and fastfence_inputs_refused_total rose.
// Then root on the node of a confirm replica (confirm's token and Kafka credentials):
// writes a NodeFence of healthy node-b Confirmed with evidence no observer signed (its
// status is confirm's to write) and asks fence to act on it. fence re-counts the stored
// evidence by signature before any round: the request is dead-lettered
// StoredEvidenceUnverified, no BMC gets a command, the incident stays Confirmed.
import { CoordinationV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { heartbeatLeaseName } from "../../core/decision.ts";
import { OBSERVER_KEY_ANNOTATION } from "../../core/evidence-proof.ts";
import { emptyStatus, incidentName, newIncident, transition, type Evidence } from "../../core/incident.ts";
import type { RejectCode } from "../../core/reasons.ts";
import { EVENT_TYPES, TOPICS } from "../../events/catalog.ts";
import { encodeKafka } from "../../events/codec.ts";
import { envelope, type FfEvent } from "../../events/envelope.ts";
import { DeadLetterSchema, type NodeObserved, type NodeSuspected } from "../../events/schemas.ts";
import { evidenceOfObservation } from "../../events/observation-claim.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { Kube } from "../../infra/kube/client.ts";
import { IncidentStore } from "../../infra/kube/incidents.ts";
import { NAMESPACE, startPipelineCluster, sleep } from "../../harness/env/pipeline-cluster.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { serviceAccountKubeConfig } from "../../harness/kube/identity.ts";
import { publishObserverKey } from "../../harness/kube/observer.ts";
import { ObserverKey } from "../../source/observer-key.ts";
import { incidents, waitFor } from "./pipeline-helpers.ts";

const env = withEnv(async (scope) => scope.add(await startPipelineCluster()));
const [A, B, C] = ["node-a", "node-b", "node-c"] as const;
const iso = (ms: number) => new Date(ms).toISOString();

/** `observer`'s node saw `target` (boot `bootId`) miss enough probes to suspect it, at `atMs`. */
const missedClaim = (observer: string, target: string, bootId: string, atMs: number): NodeObserved => ({
  observer: { replica: `event-source-${observer}`, node: observer },
  target,
  targetBootId: bootId,
  result: "missed",
  consecutiveMisses: 3,
  firstMissAt: iso(atMs - 400),
  at: iso(atMs),
  probe: { kind: "tcp", port: 10250 },
  heartbeatSynced: true,
});

describe("forged and time-shifted evidence", () => {
  it("root on node-a cannot speak for node-b's observer, nor shift time: nothing is fenced, every forgery is dead-lettered", async () => {
    const c = env();
    const coord = c.kc.makeApiClient(CoordinationV1Api);
    const keys = await waitFor("every node's observer key on its heartbeat Lease", async () => {
      const l = await coord.listNamespacedLease({ namespace: NAMESPACE });
      const byNode = new Map(
        l.items.map((x) => [x.metadata?.name, x.metadata?.annotations?.[OBSERVER_KEY_ANNOTATION]]),
      );
      const out = [A, B, C].map((n) => byNode.get(heartbeatLeaseName(n)));
      return out.every(Boolean) ? (out as string[]) : undefined;
    });
    const keyIdOfB = keys[1]!.split(":")[0]!;

    // Root on node-a: node-a's own event-source identity (a token bound to a pod on
    // node-a) publishes a key of its making on node-a's own heartbeat Lease. Allowed: that
    // key then IS node-a's key material, as if it had read the replica's memory.
    const rogue = new ObserverKey();
    const asA = await serviceAccountKubeConfig(c.kc, {
      namespace: NAMESPACE,
      serviceAccount: "fastfence-source",
      node: A,
      podName: "attacker-on-node-a",
    });
    // (beside the real replica's key, which it keeps renewing every 250 ms)
    await publishObserverKey(asA, {
      namespace: NAMESPACE,
      node: A,
      annotation: rogue.annotation,
      slot: "previous",
    });
    await waitFor("the rogue key published for node-a", async () => {
      const l = await coord.readNamespacedLease({ name: heartbeatLeaseName(A), namespace: NAMESPACE });
      return Object.values(l.metadata?.annotations ?? {}).includes(rogue.annotation) ? true : undefined;
    });

    const asSource = createKafkaBus({
      brokers: c.kafka.bootstrap,
      clientId: "attacker-on-node-a",
      security: c.kafka.clientSecurity("event-source"),
    });
    const asDetect = createKafkaBus({
      brokers: c.kafka.bootstrap,
      clientId: "attacker-with-detect-credentials",
      security: c.kafka.clientSecurity("detect"),
    });
    const now = Date.now();
    const FUTURE = 60_000;
    const boot = (await c.core.readNode({ name: C })).status!.nodeInfo!.bootID!;
    /** An observation of healthy node-c by `observer`'s node that crosses the suspicion threshold. */
    const claim = (observer: string, atMs = now): NodeObserved => missedClaim(observer, C, boot, atMs);
    const observation = (data: NodeObserved, timeMs = now): FfEvent =>
      envelope(
        { type: EVENT_TYPES.nodeObserved, subject: C, data },
        `/fastfence/event-source/event-source-${A}`,
        timeMs,
      );

    const expected = new Map<string, RejectCode>();
    const observations: FfEvent[] = [];
    const forge = (ev: FfEvent, code: RejectCode) => {
      expected.set(ev.id, code);
      observations.push(ev);
    };
    // speaking for node-b's observer
    forge(observation(rogue.signObservation(claim(B))), "UnknownObserverKey");
    forge(observation(claim(B)), "MissingProof");
    const underB = rogue.signObservation(claim(B));
    forge(observation({ ...underB, proof: { keyId: keyIdOfB, sig: underB.proof!.sig } }), "BadSignature");
    // node-a's own claim, time-shifted into the future: the claim, then only the envelope
    forge(observation(rogue.signObservation(claim(A, now + FUTURE))), "FutureTimestamp");
    forge(observation(rogue.signObservation(claim(A)), now + FUTURE), "FutureTimestamp");
    // node-a's own claim, honest in form: one observer, never a quorum; and one from the past
    observations.push(observation(rogue.signObservation(claim(A))));
    observations.push(observation(rogue.signObservation(claim(A, now - FUTURE)), now - FUTURE));
    await asSource.publish(
      TOPICS.observations,
      observations.map((e) => encodeKafka(e)),
    );

    // The event source's credentials cannot write suspicions at all (the broker refuses).
    const incident = incidentName(C, boot);
    const suspicion = (evidence: Evidence, timeMs = now): FfEvent =>
      envelope(
        {
          type: EVENT_TYPES.nodeSuspected,
          subject: C,
          ffincident: incident,
          data: { node: C, bootId: boot, incident, reason: "ProbeMisses", evidence } satisfies NodeSuspected,
        },
        `/fastfence/detect/detect-${A}`,
        timeMs,
      );
    await expect(
      asSource.publish(TOPICS.suspicions, [
        encodeKafka(suspicion(evidenceOfObservation(rogue.signObservation(claim(B))))),
      ]),
    ).rejects.toBeDefined();

    // With detect's credentials: suspicions naming node-b's observer, or from the future.
    const suspicions = [
      [suspicion(evidenceOfObservation(rogue.signObservation(claim(B)))), "UnknownObserverKey"],
      [suspicion(evidenceOfObservation(claim(B))), "MissingProof"],
      [suspicion(evidenceOfObservation(rogue.signObservation(claim(A, now + FUTURE)))), "FutureTimestamp"],
      // Its own evidence time: detect turns node-a's honest claim(A) above into a real
      // suspicion, and a copy of a fact already handled is skipped, not rejected.
      [
        suspicion(evidenceOfObservation(rogue.signObservation(claim(A, now - 1))), now + FUTURE),
        "FutureTimestamp",
      ],
    ] as const;
    for (const [ev, code] of suspicions) expected.set(ev.id, code);
    await asDetect.publish(
      TOPICS.suspicions,
      suspicions.map(([ev]) => encodeKafka(ev)),
    );

    // Every forgery is dead-lettered with its reason code.
    const audit = createKafkaBus({
      brokers: c.kafka.bootstrap,
      clientId: "forged-evidence-audit",
      security: c.kafka.clientSecurity("audit"),
    });
    const dead = await waitFor(
      "every forged input dead-lettered",
      async () => {
        const recs = await audit.readAll([TOPICS.deadLetter], { timeoutMs: 3000 });
        const byId = new Map(
          recs
            .map((r) => DeadLetterSchema.parse(JSON.parse(r.value!.toString())))
            .map((d) => [d.originalHeaders.ce_id, d] as const),
        );
        return [...expected.keys()].every((id) => byId.has(id)) ? byId : undefined;
      },
      60_000,
      500,
    );
    for (const [id, code] of expected) expect(dead.get(id)?.reasonCode, id).toBe(code);
    await Promise.all([asSource.close(), asDetect.close(), audit.close()]);

    // The refusals were counted, by the stage that refused them.
    const refused = async (fn: string) => {
      const out: Record<string, number> = {};
      for (const p of c.nodes.values())
        for (const f of p.functions.filter((x) => x.name === fn))
          for (const v of (await f.metrics.inputsRefused.get()).values)
            out[String(v.labels.reason)] = (out[String(v.labels.reason)] ?? 0) + v.value;
      return out;
    };
    // (at least: Kafka delivers at least once)
    const atLeast = (got: Record<string, number>, want: Record<string, number>) => {
      for (const [reason, n] of Object.entries(want))
        expect(got[reason] ?? 0, reason).toBeGreaterThanOrEqual(n);
    };
    atLeast(await refused("detect"), {
      UnknownObserverKey: 1,
      MissingProof: 1,
      BadSignature: 1,
      FutureTimestamp: 2,
    });
    atLeast(await refused("confirm"), { UnknownObserverKey: 1, MissingProof: 1, FutureTimestamp: 2 });

    // Give every stage time to act on anything that got through: nothing may be fenced.
    await sleep(3000);
    for (const [name, parts] of c.nodes) {
      expect(parts.bmc.stats.resets, `power commands to ${name}'s BMC`).toEqual([]);
      expect(parts.bmc.power).toBe("On");
    }
    const ofC = (await incidents(c)).filter((i) => i.spec.nodeName === C);
    // node-a's one honest-looking claim may open a Suspected incident; nothing more.
    for (const i of ofC) {
      expect(i.status?.phase).toBe("Suspected");
      expect(new Set(i.status?.evidence.map((e) => e.observerNode))).toEqual(new Set([A]));
    }
  });

  it("root on a confirm replica's node cannot fence with evidence no observer signed: fence re-counts it", async () => {
    const c = env();
    const boot = (await c.core.readNode({ name: B })).status!.nodeInfo!.bootID!;
    const incident = incidentName(B, boot);
    const confirmKc = await serviceAccountKubeConfig(c.kc, {
      namespace: NAMESPACE,
      serviceAccount: "fastfence-confirm",
      node: A,
      podName: "attacker-as-confirm-on-node-a",
    });
    const confirmedBy = `system:serviceaccount:${NAMESPACE}:fastfence-confirm`;
    const now = Date.now();
    // Two observers' worth of "missed" pieces about healthy node-b: one unsigned, one signed
    // with a key no node publishes (so under a key id nobody can check).
    const rogue = new ObserverKey();
    const claim = (observer: string): NodeObserved => missedClaim(observer, B, boot, now);
    const evidence = [
      evidenceOfObservation(claim(A)),
      evidenceOfObservation(rogue.signObservation(claim(C))),
    ];
    const status = transition(
      { ...emptyStatus(), timestamps: { suspected: iso(now - 100) } },
      "Confirmed",
      iso(now),
      { evidence, confirmedBy },
    );
    // confirm's own writer, as confirm's identity: the API server admits it (confirm owns
    // the evidence and the phase Confirmed); an incident node-b's earlier probes opened is
    // taken over, not duplicated.
    const store = new IncidentStore(new Kube(confirmKc), NAMESPACE);
    const existing = await store.get(incident);
    const written = existing
      ? await store.writeStatus(incident, existing.metadata.resourceVersion ?? "", status)
      : await store.create(newIncident(B, boot, status));
    expect(written.status?.phase).toBe("Confirmed");

    const asConfirm = createKafkaBus({
      brokers: c.kafka.bootstrap,
      clientId: "attacker-with-confirm-credentials",
      security: c.kafka.clientSecurity("confirm"),
    });
    const request = envelope(
      {
        type: EVENT_TYPES.fenceRequested,
        subject: B,
        ffincident: incident,
        data: { incident, node: B, bootId: boot, confirmedAt: iso(now), observers: [A, C] },
      },
      `/fastfence/confirm/confirm-${A}`,
      now,
    );
    await asConfirm.publish(TOPICS.fenceRequests, [encodeKafka(request)]);
    const audit = createKafkaBus({
      brokers: c.kafka.bootstrap,
      clientId: "stored-evidence-audit",
      security: c.kafka.clientSecurity("audit"),
    });
    const letter = await waitFor(
      "the fence request dead-lettered",
      async () =>
        (await audit.readAll([TOPICS.deadLetter], { timeoutMs: 3000 }))
          .map((r) => DeadLetterSchema.parse(JSON.parse(r.value!.toString())))
          .find((d) => d.originalHeaders.ce_id === request.id),
      60_000,
      500,
    );
    expect(letter.reasonCode).toBe("StoredEvidenceUnverified");
    await Promise.all([asConfirm.close(), audit.close()]);

    // Give fence (its event path and its resync) time to act: nothing is powered off.
    await sleep(3000);
    for (const [name, parts] of c.nodes) {
      expect(parts.bmc.stats.resets, `power commands to ${name}'s BMC`).toEqual([]);
      expect(parts.bmc.power).toBe("On");
    }
    const now2 = (await incidents(c)).find((i) => i.metadata.name === incident);
    expect(now2?.status?.phase).toBe("Confirmed");
    expect(now2?.status?.attempts ?? []).toEqual([]);
  });
});
