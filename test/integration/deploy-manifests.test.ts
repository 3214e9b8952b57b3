// Needs real kustomize: the overlays as kustomize renders them.
// Static checks of the rendered overlays (no servers; part of make test-deploy): every
// critical-path function keeps >= 2 replicas spread across nodes, can never scale to
// zero and consumes its catalog topics itself (`--kafka`, each replica its own group); the
// Triggers deliver exactly the event types each other function consumes per the catalog,
// and the bridge KafkaSource fills the Broker from every catalog topic; every catalog topic has a durable KafkaTopic; the event source is never
// evicted. Reads manifests only; never talks to a cluster.
import { describe, expect, it } from "vitest";
import { join } from "node:path";
import { TOPICS, consumedBy, type Component } from "../../events/catalog.ts";
import { BRIDGED_TOPICS, KNATIVE_GROUP_PREFIX } from "../../events/kafka-acls.ts";
import { stage as confirm } from "../../functions/confirm/handler.ts";
import { stage as detect } from "../../functions/detect/handler.ts";
import { stage as fence } from "../../functions/fence/handler.ts";
import { stage as recover } from "../../functions/recover/handler.ts";
import { stage as remediate } from "../../functions/remediate-workloads/handler.ts";
import { render, type KubeObject } from "../../harness/kustomize.ts";
import { strimziAllows } from "../../lab/broker-settings.ts";

const ROOT = join(import.meta.dirname, "../..");
const STAGES = [detect, confirm, fence, remediate, recover];
const OVERLAYS = ["openshift", "vanilla"] as const;

type Container = {
  name: string;
  image: string;
  args?: string[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  env?: { name: string; value?: string }[];
  readinessProbe?: { httpGet?: { path: string } };
  livenessProbe?: { httpGet?: { path: string } };
  securityContext?: Record<string, unknown>;
};
type PodSpec = {
  serviceAccountName?: string;
  containers: Container[];
  topologySpreadConstraints?: {
    maxSkew: number;
    topologyKey: string;
    whenUnsatisfiable: string;
    labelSelector?: { matchLabels?: Record<string, string> };
  }[];
  tolerations?: { key?: string; operator?: string; effect?: string; tolerationSeconds?: number }[];
  priorityClassName?: string;
};
type Ksvc = KubeObject & {
  spec: { template: { metadata?: { annotations?: Record<string, string> }; spec: PodSpec } };
};

for (const overlay of OVERLAYS) {
  describe(`deploy manifests: ${overlay}`, () => {
    const objs = render(join(ROOT, "knative/overlays", overlay));
    const ksvcs = objs.filter(
      (o): o is Ksvc => o.apiVersion === "serving.knative.dev/v1" && o.kind === "Service",
    );

    it("has one Knative Service per function: `run <fn> --kafka --metrics 8080` when critical, else `--http 8080`", () => {
      expect(ksvcs.map((s) => s.metadata.name).sort()).toEqual(STAGES.map((s) => s.name).sort());
      for (const s of ksvcs) {
        const c = s.spec.template.spec.containers;
        expect(c).toHaveLength(1);
        const critical = STAGES.find((st) => st.name === s.metadata.name)!.critical;
        expect(c[0]!.args).toEqual(
          critical
            ? ["run", s.metadata.name, "--kafka", "--metrics", "8080"]
            : ["run", s.metadata.name, "--http", "8080"],
        );
        const env = Object.fromEntries((c[0]!.env ?? []).map((e) => [e.name, e.value]));
        if (critical) {
          // The catalog topics, each replica its own group; nothing routes it through the Broker.
          expect(env.FASTFENCE_GROUP_MODE, s.metadata.name).toBe("each-replica");
          for (const n of ["FASTFENCE_KAFKA_TOPIC", "K_SINK"])
            expect(env, `${s.metadata.name} ${n}`).not.toHaveProperty(n);
        }
        expect(c[0]!.readinessProbe?.httpGet?.path).toBe("/health/readiness");
        expect(c[0]!.livenessProbe?.httpGet?.path).toBe("/health/liveness");
        expect(c[0]!.resources?.requests?.cpu && c[0]!.resources?.requests?.memory).toBeTruthy();
        expect(c[0]!.resources?.limits?.cpu && c[0]!.resources?.limits?.memory).toBeTruthy();
        expect(c[0]!.securityContext).toMatchObject({
          runAsNonRoot: true,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
        });
        expect(s.spec.template.spec.serviceAccountName).toBe(`fastfence-${s.metadata.name}`);
      }
    });

    it("critical-path functions: min-scale >= 2, a hostname spread constraint, never scaled to zero", () => {
      for (const st of STAGES) {
        const s = ksvcs.find((k) => k.metadata.name === st.name)!;
        const ann = s.spec.template.metadata?.annotations ?? {};
        const min = Number(ann["autoscaling.knative.dev/min-scale"]);
        // Nothing may scale to zero, critical or not (a cold start is a stall).
        expect(min, `${st.name} min-scale`).toBeGreaterThanOrEqual(1);
        expect(
          ann["autoscaling.knative.dev/max-scale"] === undefined ||
            Number(ann["autoscaling.knative.dev/max-scale"]) >= min,
        ).toBe(true);
        if (ann["autoscaling.knative.dev/initial-scale"] !== undefined)
          expect(Number(ann["autoscaling.knative.dev/initial-scale"])).toBeGreaterThanOrEqual(min);
        expect(ann["autoscaling.knative.dev/scale-to-zero-pod-retention-period"]).toBeUndefined();
        if (!st.critical) continue;
        expect(min, `${st.name} min-scale`).toBeGreaterThanOrEqual(2);
        expect(s.metadata.labels?.["fastfence.io/critical-path"]).toBe("true");
        const spread = s.spec.template.spec.topologySpreadConstraints ?? [];
        expect(
          spread.some(
            (t) =>
              t.topologyKey === "kubernetes.io/hostname" &&
              t.maxSkew === 1 &&
              t.whenUnsatisfiable === "DoNotSchedule" &&
              t.labelSelector?.matchLabels?.["serving.knative.dev/service"] === st.name,
          ),
          `${st.name} spread constraint`,
        ).toBe(true);
      }
    });

    it("critical stages: a PodDisruptionBudget, the PriorityClass, 5 s not-ready/unreachable tolerations", () => {
      const pdbs = objs.filter((o) => o.kind === "PodDisruptionBudget") as (KubeObject & {
        spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } };
      })[];
      const pc = objs.find((o) => o.kind === "PriorityClass" && o.metadata.name === "fastfence-critical") as
        (KubeObject & { value: number }) | undefined;
      const source = objs.find(
        (o) => o.kind === "PriorityClass" && o.metadata.name === "fastfence-node-critical",
      )!;
      expect(pc?.value).toBeGreaterThan(0);
      expect(pc!.value).toBeLessThan((source as KubeObject & { value: number }).value);
      for (const st of STAGES) {
        const spec = ksvcs.find((k) => k.metadata.name === st.name)!.spec.template.spec;
        const pdb = pdbs.find((p) => p.spec.selector.matchLabels["serving.knative.dev/service"] === st.name);
        if (!st.critical) {
          expect(pdb, st.name).toBeUndefined();
          expect(spec.priorityClassName, st.name).toBeUndefined();
          continue;
        }
        expect(pdb?.spec.minAvailable, st.name).toBe(1);
        expect(spec.priorityClassName, st.name).toBe("fastfence-critical");
        for (const key of ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"])
          expect(spec.tolerations, `${st.name} ${key}`).toContainEqual({
            key,
            operator: "Exists",
            effect: "NoExecute",
            tolerationSeconds: 5,
          });
      }
    });

    it("Triggers deliver exactly the event types each non-critical function consumes (events/catalog.ts)", () => {
      const triggers = objs.filter((o) => o.kind === "Trigger") as (KubeObject & {
        spec: {
          broker: string;
          filter: { attributes: Record<string, string> };
          subscriber: { ref: { kind: string; name: string } };
          delivery: {
            retry: number;
            backoffPolicy: string;
            backoffDelay: string;
            timeout: string;
            deadLetterSink: unknown;
          };
        };
      })[];
      for (const st of STAGES) {
        const got = triggers
          .filter((t) => t.spec.subscriber.ref.name === st.name)
          .map((t) => t.spec.filter.attributes.type)
          .sort();
        expect(got, st.name).toEqual(st.critical ? [] : [...consumedBy(st.name as Component)].sort());
      }
      for (const t of triggers) {
        expect(t.spec.broker).toBe("fastfence");
        expect(Object.keys(t.spec.filter.attributes)).toEqual(["type"]);
        expect(t.spec.delivery.retry).toBeGreaterThanOrEqual(3);
        expect(t.spec.delivery.backoffPolicy).toBe("exponential");
        expect(t.spec.delivery.backoffDelay).toMatch(/^PT/);
        expect(t.spec.delivery.timeout).toMatch(/^PT/);
        expect(t.spec.delivery.deadLetterSink).toBeTruthy();
      }
      const broker = objs.find((o) => o.kind === "Broker")!;
      expect(broker.metadata.annotations?.["eventing.knative.dev/broker.class"]).toBe("Kafka");
      const sink = objs.find((o) => o.kind === "KafkaSink")! as KubeObject & { spec: { topic: string } };
      expect(sink.spec.topic).toBe(TOPICS.deadLetter);
    });

    it("the bridge KafkaSource copies every catalog topic but the dead letters into the Broker", () => {
      const sources = objs.filter((o) => o.kind === "KafkaSource") as (KubeObject & {
        spec: { topics: string[]; consumerGroup: string; sink: { ref: { kind: string; name: string } } };
      })[];
      expect(sources.map((o) => o.metadata.name)).toEqual(["fastfence-bridge"]);
      const bridge = sources[0]!.spec;
      expect([...bridge.topics].sort()).toEqual([...BRIDGED_TOPICS].sort());
      expect(bridge.topics).not.toContain(TOPICS.deadLetter);
      // Its group falls under the knative-eventing user's group ACL (knative/base/kafka/users.yaml).
      expect(bridge.consumerGroup.startsWith(KNATIVE_GROUP_PREFIX)).toBe(true);
      expect(bridge.sink.ref).toMatchObject({ kind: "Broker", name: "fastfence" });
    });

    it("every catalog topic (and the broker's) is a KafkaTopic with replicas 3, min.insync.replicas 2", () => {
      const topics = objs.filter((o) => o.kind === "KafkaTopic") as (KubeObject & {
        spec: { topicName: string; replicas: number; config: Record<string, unknown> };
      })[];
      const broker = objs.find((o) => o.kind === "Broker")!;
      const wanted = [
        ...Object.values(TOPICS),
        broker.metadata.annotations!["kafka.eventing.knative.dev/external.topic"]!,
      ];
      expect(topics.map((t) => t.spec.topicName).sort()).toEqual(wanted.sort());
      for (const t of topics) {
        expect(t.apiVersion).toBe("kafka.strimzi.io/v1");
        expect(t.spec.replicas).toBe(3);
        expect(t.spec.config["min.insync.replicas"]).toBe(2);
        expect(t.metadata.labels?.["strimzi.io/cluster"]).toBeTruthy();
      }
    });

    it("the event source runs on every node and is never evicted", () => {
      const ds = objs.find((o) => o.kind === "DaemonSet") as KubeObject & {
        spec: { template: { spec: PodSpec & { hostNetwork?: boolean } } };
      };
      const spec = ds.spec.template.spec;
      expect(spec.containers[0]!.args?.[0]).toBe("source");
      expect(spec.priorityClassName).toBeTruthy();
      expect(objs.some((o) => o.kind === "PriorityClass" && o.metadata.name === spec.priorityClassName)).toBe(
        true,
      );
      const tolerates = (key: string) =>
        (spec.tolerations ?? []).some(
          (t) =>
            t.tolerationSeconds === undefined &&
            ((t.operator === "Exists" && !t.key) || t.key === key) &&
            (!t.effect || t.effect === "NoExecute"),
        );
      expect(tolerates("node.kubernetes.io/not-ready")).toBe(true);
      expect(tolerates("node.kubernetes.io/unreachable")).toBe(true);
    });

    it("every ServiceAccount a workload runs as exists", () => {
      const sas = new Set(objs.filter((o) => o.kind === "ServiceAccount").map((o) => o.metadata.name));
      for (const o of objs) {
        const sa = (
          (o.spec as { template?: { spec?: PodSpec } } | undefined)?.template?.spec as PodSpec | undefined
        )?.serviceAccountName;
        if (sa) expect(sas.has(sa), `${o.kind}/${o.metadata.name} runs as ${sa}`).toBe(true);
      }
    });
  });
}

describe("knative/overlays", () => {
  it("the openshift overlay runs fence with the fence-agents image, the others with the plain one", () => {
    const objs = render(join(ROOT, "knative/overlays/openshift"));
    const images = Object.fromEntries(
      objs
        .filter((o): o is Ksvc => o.kind === "Service" && o.apiVersion.startsWith("serving"))
        .map((s) => [s.metadata.name, s.spec.template.spec.containers[0]!.image]),
    );
    expect(images.fence).toMatch(/fastfence-fence-agents:/);
    expect(images.detect).toMatch(/\/fastfence:/);
  });
});

describe("knative/kafka-cluster", () => {
  const kafka = render(join(ROOT, "knative/kafka-cluster")).find((o) => o.kind === "Kafka") as KubeObject & {
    spec: { kafka: { config: Record<string, unknown> } };
  };

  it("sets only broker options Strimzi passes on (a refused one would be silently ignored)", () => {
    // Strimzi's own lists of what it refuses (lab/broker-settings.ts).
    const refused = Object.keys(kafka.spec.kafka.config).filter((k) => !strimziAllows(k));
    expect(refused).toEqual([]);
  });

  it("is rack-aware by node, one broker per node: a node's death takes one replica of each partition", () => {
    const spec = kafka.spec as unknown as { kafka: { rack?: { topologyKey: string }; version: string } };
    expect(spec.kafka.rack?.topologyKey).toBe("kubernetes.io/hostname");
    expect(spec.kafka.version).toBe("4.2.1");
    const pool = render(join(ROOT, "knative/kafka-cluster")).find(
      (o) => o.kind === "KafkaNodePool",
    ) as KubeObject & {
      spec: {
        template: {
          pod: {
            affinity: {
              podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { topologyKey: string }[] };
            };
          };
        };
      };
    };
    const anti =
      pool.spec.template.pod.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution;
    expect(anti.map((t) => t.topologyKey)).toContain("kubernetes.io/hostname");
  });

  it("keeps durability (RF 3, min ISR 2, no unclean election) and the failover settings", () => {
    const c = kafka.spec.kafka.config;
    expect(c["default.replication.factor"]).toBe(3);
    expect(c["min.insync.replicas"]).toBe(2);
    expect(c["unclean.leader.election.enable"]).toBe(false);
    expect(Number(c["replica.lag.time.max.ms"])).toBeLessThanOrEqual(2000);
    expect(Number(c["controller.quorum.fetch.timeout.ms"])).toBeGreaterThanOrEqual(
      3 * Number(c["metadata.max.idle.interval.ms"]),
    );
  });
});
