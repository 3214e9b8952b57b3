// The Strimzi KafkaUsers the manifests ship (knative/base/kafka/users.yaml) are exactly the
// ACL table derived from the event catalog (events/kafka-acls.ts), read through the same
// parser the harness and the lab use to create their brokers' users and ACLs
// (harness/env/kafka-auth.ts readKafkaUsers), so the manifests, the test brokers and the
// catalog cannot drift apart. Also: every rendered overlay carries them, the Kafka
// cluster has no plaintext listener, and each pod connects as its own component's user.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { load } from "js-yaml";
import { describe, expect, it } from "vitest";
import { aclTable, kafkaUserName, sortAcls, type KafkaPrincipal } from "../../../events/kafka-acls.ts";
import { STAGES } from "../../../functions/registry.ts";
import { readKafkaUsers } from "../../../harness/env/kafka-auth.ts";
import { render, type KubeObject } from "../../../harness/kustomize.ts";

const ROOT = join(import.meta.dirname, "../../..");
const runtimeConfig = load(readFileSync(join(ROOT, "knative/base/runtime-config.yaml"), "utf8")) as {
  data: Record<string, string>;
};
const brokerTopic = runtimeConfig.data["kafka.topic"]!;
// The stages Knative delivers through Triggers (the others consume the catalog topics).
const brokerComponents = STAGES.filter((s) => !s.critical).map((s) => s.name as KafkaPrincipal & string);

type Container = {
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string }[];
};
type PodSpec = { containers: Container[]; volumes?: { name: string; secret?: { secretName: string } }[] };

describe("KafkaUsers (knative/base/kafka/users.yaml)", () => {
  const users = readKafkaUsers();

  it("are exactly the catalog's principals, with exactly the derived ACLs", () => {
    const expected = aclTable({ brokerTopic, brokerComponents: brokerComponents as never });
    expect(users.map((u) => u.name).sort()).toEqual([...expected.keys()].map(kafkaUserName).sort());
    for (const [p, acls] of expected) {
      const u = users.find((x) => x.name === kafkaUserName(p))!;
      expect(sortAcls(u.acls), p).toEqual(acls);
    }
  });

  it("are in every overlay, in fastfence-system, for the fastfence-kafka cluster", () => {
    for (const overlay of ["openshift", "vanilla"]) {
      const rendered = render(join(ROOT, "knative/overlays", overlay)).filter((o) => o.kind === "KafkaUser");
      expect(rendered.map((o) => o.metadata.name).sort(), overlay).toEqual(users.map((u) => u.name).sort());
      for (const o of rendered) {
        expect(o.apiVersion).toBe("kafka.strimzi.io/v1");
        expect(o.metadata.namespace).toBe("fastfence-system");
        expect(o.metadata.labels?.["strimzi.io/cluster"]).toBe("fastfence-kafka");
      }
    }
  });

  it("the Kafka cluster: TLS listeners with SCRAM only, simple authorization, users watched in fastfence-system", () => {
    const kafka = render(join(ROOT, "knative/kafka-cluster")).find(
      (o) => o.kind === "Kafka",
    ) as KubeObject & {
      spec: {
        kafka: {
          listeners: { tls: boolean; authentication?: { type: string } }[];
          authorization?: { type: string };
        };
        entityOperator: { userOperator?: { watchedNamespace?: string } };
      };
    };
    expect(kafka.spec.kafka.listeners.length).toBeGreaterThan(0);
    for (const l of kafka.spec.kafka.listeners) {
      expect(l.tls).toBe(true);
      expect(l.authentication?.type).toBe("scram-sha-512");
    }
    expect(kafka.spec.kafka.authorization?.type).toBe("simple");
    expect(kafka.spec.entityOperator.userOperator?.watchedNamespace).toBe("fastfence-system");
  });

  it("each function and the event source connect as their own user, with its Secret and the CA mounted", () => {
    const objs = render(join(ROOT, "knative/overlays/vanilla"));
    const pods: [KafkaPrincipal, PodSpec][] = [];
    for (const o of objs) {
      const spec = (o as KubeObject & { spec: { template: { spec: PodSpec } } }).spec?.template?.spec;
      if (o.kind === "Service" && o.apiVersion === "serving.knative.dev/v1")
        pods.push([o.metadata.name as KafkaPrincipal, spec]);
      if (o.kind === "DaemonSet" && o.metadata.name === "fastfence-source") pods.push(["event-source", spec]);
    }
    expect(pods).toHaveLength(6);
    for (const [p, spec] of pods) {
      const c = spec.containers[0]!;
      const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
      expect(env.FASTFENCE_KAFKA_USERNAME, p).toBe(kafkaUserName(p));
      expect(env.FASTFENCE_KAFKA_INSECURE, p).toBeUndefined();
      const mountOf = (file: string | undefined) =>
        c.volumeMounts?.find((m) => file?.startsWith(`${m.mountPath}/`))?.name;
      const secretOf = (vol: string | undefined) =>
        spec.volumes?.find((v) => v.name === vol)?.secret?.secretName;
      // Strimzi names a user's Secret after the KafkaUser.
      expect(secretOf(mountOf(env.FASTFENCE_KAFKA_PASSWORD_FILE)), p).toBe(kafkaUserName(p));
      expect(secretOf(mountOf(env.FASTFENCE_KAFKA_CA_FILE)), p).toBe("fastfence-kafka-cluster-ca-cert");
    }
  });

  it("the Broker and the dead-letter KafkaSink name the Knative auth Secret", () => {
    const objs = render(join(ROOT, "knative/overlays/vanilla"));
    const cm = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === "fastfence-broker-config") as
      (KubeObject & { data: Record<string, string> }) | undefined;
    expect(cm?.data["auth.secret.ref.name"]).toBe("fastfence-kafka-knative-auth");
    const sink = objs.find((o) => o.kind === "KafkaSink") as KubeObject & {
      spec: { auth?: { secret?: { ref?: { name?: string } } } };
    };
    expect(sink.spec.auth?.secret?.ref?.name).toBe("fastfence-kafka-knative-auth");
  });
});
