// The settings the lab gives each pipeline replica, taken from what we ship: a stage's
// command mode and environment are its Knative Service's in the rendered vanilla overlay
// (literal values, and the keys of the fastfence-runtime ConfigMap it references), not kept
// by hand beside the manifests; the event source's are its DaemonSet's, less the watchdog
// device (the lab's emulated one, or none). Only the settings that say where things are in this
// environment (ENVIRONMENT_SETTINGS: Kafka's addresses, credential
// files, namespace, log level) are the lab's own; the lab-only differences are
// LAB_ONLY_STAGES, each with its reason (docs/lab.md "What the lab runs").
// test/unit/lab/replica-settings.test.ts fails when the lab and the manifests drift apart.
// Renders with the real kustomize; never writes, never talks to a cluster.
import { join } from "node:path";
import { KNATIVE_DIR, render, type KubeObject } from "../harness/kustomize.ts";

/** The overlay whose Services the lab runs (the upstream-Knative one; openshift differs in RBAC only). */
export const LAB_OVERLAY = join(KNATIVE_DIR, "overlays/vanilla");

/**
 * Settings that name this environment rather than choose a behaviour: the lab sets them
 * itself (its brokers' addresses, its credential files laid out like the Secret mounts, its
 * log level), so they are not taken from the manifests. FASTFENCE_KUBE_ENDPOINTS is not
 * among them: the manifests ship `auto` (follow the `kubernetes` EndpointSlice), which names
 * no address, so the lab's stages fail over across its API servers as shipped.
 */
export const ENVIRONMENT_SETTINGS: readonly string[] = [
  "FASTFENCE_NAMESPACE",
  "FASTFENCE_KAFKA_BROKERS",
  "FASTFENCE_KAFKA_CA_FILE",
  "FASTFENCE_KAFKA_USERNAME",
  "FASTFENCE_KAFKA_PASSWORD_FILE",
  "FASTFENCE_LOG_LEVEL",
  "FASTFENCE_METAL3_NAMESPACES",
];

/**
 * Stages the lab runs differently from the manifests, and why. The lab has no Knative data
 * plane, so a stage the manifests deliver over HTTP through Triggers runs as a Kafka
 * consumer of its catalog topics with the defaults, like the critical stages.
 */
export const LAB_ONLY_STAGES: Readonly<Record<string, string>> = {
  recover:
    "shipped as `--http` behind Triggers, off the critical path since it acts after the release; the lab has no Broker, so it runs `--kafka` with its Service's other settings",
};

/**
 * Settings of a stage the manifests deliver over HTTP (through Knative Triggers and the
 * Broker): the lab runs such a stage as a Kafka consumer, so it drops them and keeps the rest.
 */
export const HTTP_DELIVERY_SETTINGS: readonly string[] = [
  "FASTFENCE_HTTP_AUDIENCE",
  "FASTFENCE_HTTP_ALLOWED_SUBJECTS",
  "FASTFENCE_SINK_TOKEN_FILE",
  "FASTFENCE_KAFKA_TOPIC",
  "K_SINK",
];

/** A stage's Service as the manifests ship it. */
export interface ShippedStage {
  name: string;
  /** The container's arguments (`run <stage> --kafka --metrics 8080`, or `--http 8080`). */
  args: string[];
  /** Its environment: literal values and ConfigMap keys resolved; Secret references left out. */
  env: Record<string, string>;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { configMapKeyRef?: { name: string; key: string } };
}
type Ksvc = KubeObject & {
  spec: { template: { spec: { containers: { args?: string[]; env?: EnvVar[] }[] } } };
};

/** Thrown when the manifests cannot give a stage's settings; names what is missing. */
export class ReplicaSettingsError extends Error {
  override name = "ReplicaSettingsError";
}

type ConfigMaps = Map<string, Record<string, string>>;

function configMaps(objects: KubeObject[]): ConfigMaps {
  return new Map(
    objects
      .filter((o) => o.kind === "ConfigMap")
      .map((o) => [o.metadata.name, (o as KubeObject & { data?: Record<string, string> }).data ?? {}]),
  );
}

/** A container's literal values and ConfigMap keys; Secret and field references left out. */
function resolveEnv(owner: string, vars: EnvVar[], maps: ConfigMaps): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of vars) {
    if (e.value !== undefined) env[e.name] = e.value;
    const ref = e.valueFrom?.configMapKeyRef;
    if (!ref) continue;
    const v = maps.get(ref.name)?.[ref.key];
    if (v === undefined)
      throw new ReplicaSettingsError(
        `${owner}: ${e.name} references ConfigMap ${ref.name} key ${ref.key}, which the overlay does not have`,
      );
    env[e.name] = v;
  }
  return env;
}

/** Every fastfence Knative Service of the rendered overlay, with its resolved environment. */
export function shippedStages(objects: KubeObject[] = render(LAB_OVERLAY)): ShippedStage[] {
  const maps = configMaps(objects);
  return objects
    .filter((o): o is Ksvc => o.kind === "Service" && o.apiVersion === "serving.knative.dev/v1")
    .map((svc) => {
      const c = svc.spec.template.spec.containers[0];
      if (!c) throw new ReplicaSettingsError(`Service ${svc.metadata.name}: no container`);
      return {
        name: svc.metadata.name,
        args: c.args ?? [],
        env: resolveEnv(`Service ${svc.metadata.name}`, c.env ?? [], maps),
      };
    });
}

/** The event source's DaemonSet as shipped (its container runs `source`): its resolved environment. */
export function shippedSourceEnv(objects: KubeObject[] = render(LAB_OVERLAY)): Record<string, string> {
  const ds = objects.find(
    (o): o is Ksvc =>
      o.kind === "DaemonSet" && (o as Ksvc).spec.template.spec.containers[0]?.args?.[0] === "source",
  );
  if (!ds) throw new ReplicaSettingsError(`no DaemonSet runs \`source\` in ${LAB_OVERLAY}`);
  return resolveEnv(
    `DaemonSet ${ds.metadata.name}`,
    ds.spec.template.spec.containers[0]!.env ?? [],
    configMaps(objects),
  );
}

/**
 * The event source's shipped FASTFENCE_* settings the lab keeps: all but ENVIRONMENT_SETTINGS
 * and the watchdog device's (the lab gives its emulated watchdog, or none: the node's
 * /dev/watchdog is never opened here).
 */
export function labSourceSettings(shipped: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(shipped).filter(
      ([k]) =>
        k.startsWith("FASTFENCE_") &&
        !ENVIRONMENT_SETTINGS.includes(k) &&
        !k.startsWith("FASTFENCE_WATCHDOG_"),
    ),
  );
}

/**
 * The environment the lab gives a stage, from its shipped Service: the manifest's settings
 * minus ENVIRONMENT_SETTINGS (and HTTP_DELIVERY_SETTINGS for a LAB_ONLY_STAGES stage). The
 * lab hosts every stage as a Kafka consumer, so a stage the manifests run otherwise must be
 * listed in LAB_ONLY_STAGES.
 */
export function labStageEnv(stage: string, shipped: ShippedStage[]): Record<string, string> {
  const s = shipped.find((x) => x.name === stage);
  if (!s) throw new ReplicaSettingsError(`no Knative Service runs stage ${stage} in ${LAB_OVERLAY}`);
  const behaviour = (drop: readonly string[]) =>
    Object.fromEntries(
      Object.entries(s.env).filter(([k]) => !ENVIRONMENT_SETTINGS.includes(k) && !drop.includes(k)),
    );
  if (stage in LAB_ONLY_STAGES) return behaviour(HTTP_DELIVERY_SETTINGS);
  if (s.args[0] !== "run" || s.args[1] !== stage || !s.args.includes("--kafka"))
    throw new ReplicaSettingsError(
      `Service ${stage} runs ${JSON.stringify(s.args)}, not "run ${stage} --kafka": the lab can run only Kafka-consuming stages (or list it in LAB_ONLY_STAGES with a reason)`,
    );
  return behaviour([]);
}

/**
 * What a bench or demo report says it measured: each stage's mode as the lab runs it, and
 * the lab-only stages. One line of prose, and the same as data for the RESULT line.
 */
export function describeTopology(shipped: ShippedStage[] = shippedStages()): {
  text: string;
  stages: Record<string, string>;
  labOnly: string[];
} {
  const stages = Object.fromEntries(
    shipped.map((s) => [
      s.name,
      s.name in LAB_ONLY_STAGES
        ? "kafka (lab only)"
        : `kafka, group mode ${labStageEnv(s.name, shipped).FASTFENCE_GROUP_MODE ?? "default"}`,
    ]),
  );
  const labOnly = Object.keys(LAB_ONLY_STAGES);
  const text = `stages as knative/overlays/vanilla ships them, one replica per node (${Object.entries(stages)
    .map(([n, m]) => `${n}: ${m}`)
    .join("; ")}); lab-only: ${labOnly.map((n) => `${n} (${LAB_ONLY_STAGES[n]})`).join("; ")}`;
  return { text, stages, labOnly };
}
