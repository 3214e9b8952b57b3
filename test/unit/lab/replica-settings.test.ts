// The lab runs what the manifests ship (issue 16, item 2): each pipeline replica of the lab
// gets its stage's Knative Service settings from the rendered vanilla overlay, with only
// this environment's addresses and files its own, and builds its Kafka bus from that
// config as `fastfence run` does. A setting added to a Service, or an override added to the
// lab's node agent, fails here.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { kafkaBusSettings } from "../../../app/host.ts";
import { STAGES } from "../../../functions/registry.ts";
import type { KubeObject } from "../../../harness/kustomize.ts";
import { loadRuntimeConfig } from "../../../infra/config.ts";
import { createLogger } from "../../../infra/log.ts";
import {
  ENVIRONMENT_SETTINGS,
  HTTP_DELIVERY_SETTINGS,
  LAB_ONLY_STAGES,
  ReplicaSettingsError,
  describeTopology,
  labSourceSettings,
  labStageEnv,
  shippedSourceEnv,
  shippedStages,
} from "../../../lab/replica-settings.ts";
import { labSourceEnv } from "../../../lab/agent-env.ts";

const ROOT = join(import.meta.dirname, "../../..");
const shipped = shippedStages();
const log = createLogger("test", { level: "silent" });
afterAll(() => rmSync(auth, { recursive: true, force: true }));

// Credential files laid out as the lab lays them (lab/kafka.ts), with placeholder contents.
const auth = mkdtempSync(join(tmpdir(), "ff-replica-settings-"));
mkdirSync(join(auth, "fastfence-x"));
writeFileSync(join(auth, "ca.crt"), "placeholder CA\n");
writeFileSync(join(auth, "fastfence-x", "password"), "placeholder\n");
/** What the lab's node agent sets for itself (lab/node-agent.ts componentEnv, brokers, replica). */
const labEnvironment = {
  FASTFENCE_NAMESPACE: "fastfence-system",
  FASTFENCE_KAFKA_BROKERS: "10.77.0.1:9092",
  FASTFENCE_KAFKA_CA_FILE: join(auth, "ca.crt"),
  FASTFENCE_KAFKA_USERNAME: "fastfence-x",
  FASTFENCE_KAFKA_PASSWORD_FILE: join(auth, "fastfence-x", "password"),
  FASTFENCE_REPLICA: "x-node-a",
};

describe.each(STAGES.filter((s) => !(s.name in LAB_ONLY_STAGES)).map((s) => [s.name] as const))(
  "stage %s",
  (name) => {
    const svc = shipped.find((s) => s.name === name)!;

    it("ships as a Kafka consumer, which is how the lab hosts it", () => {
      expect(svc.args.slice(0, 3)).toEqual(["run", name, "--kafka"]);
    });

    it("gets every behaviour setting of its Service in the lab", () => {
      const env = labStageEnv(name, shipped);
      for (const [k, v] of Object.entries(svc.env))
        if (!ENVIRONMENT_SETTINGS.includes(k)) expect(env[k], k).toBe(v);
      expect(Object.keys(env).filter((k) => ENVIRONMENT_SETTINGS.includes(k))).toEqual([]);
      expect(env.FASTFENCE_GROUP_MODE).toBe("each-replica");
    });

    it("runs the same config and Kafka client settings as the shipped replica, in the same environment", () => {
      const lab = loadRuntimeConfig({ ...labStageEnv(name, shipped), ...labEnvironment });
      const pod = loadRuntimeConfig({ ...svc.env, ...labEnvironment });
      expect(lab).toEqual(pod);
      const { security: a, log: _a, ...labBus } = kafkaBusSettings(lab, "c", log);
      const { security: b, log: _b, ...podBus } = kafkaBusSettings(pod, "c", log);
      expect(labBus).toEqual(podBus);
      expect(a).toEqual(b);
    });
  },
);

describe("the lab's node agent", () => {
  const agent = readFileSync(join(ROOT, "lab/node-agent.ts"), "utf8");
  const startFunction = agent.slice(agent.indexOf("async function startFunction("));

  it("builds each replica's config from labStageEnv and starts it through the artifact's hostFunction (its bus from kafkaBusSettings), with no settings of its own", () => {
    expect(agent).toMatch(
      /for \(const fn of app\.stageNames\(\)\) r\.fns\.push\(await startFunction\(kc, fn\)\);/,
    );
    expect(startFunction).toMatch(/app\.loadRuntimeConfig\(\{\s*\.\.\.labStageEnv\(fn, shippedStages\(\)\),/);
    // No bus of its own: hostFunction builds it from the config with kafkaBusSettings.
    expect(startFunction).toMatch(/app\.hostFunction\(\{/);
    expect(startFunction).not.toMatch(/\bbus:/);
    expect(readFileSync(join(ROOT, "app/host.ts"), "utf8")).toMatch(
      /createKafkaBus\(\s*kafkaBusSettings\(config,/,
    );
    // Any client setting written in the agent would be a lab-only override the manifests lack.
    for (const knob of [
      "sessionTimeoutMs",
      "hedgeAfterMs",
      "metadataMaxAgeMs",
      "acks:",
      "heartbeatIntervalMs",
    ])
      expect(agent, knob).not.toContain(knob);
  });
});

describe("lab-only stages", () => {
  it("are exactly the stages shipped behind Triggers, each with its reason in docs/lab.md", () => {
    expect(Object.keys(LAB_ONLY_STAGES).sort()).toEqual(
      STAGES.filter((s) => !s.critical)
        .map((s) => s.name)
        .sort(),
    );
    for (const name of Object.keys(LAB_ONLY_STAGES)) {
      const svc = shipped.find((s) => s.name === name)!;
      expect(svc.args).toContain("--http");
      // its behaviour settings as shipped (API failover among them), not its HTTP delivery
      const env = labStageEnv(name, shipped);
      expect(env.FASTFENCE_KUBE_ENDPOINTS).toBe(svc.env.FASTFENCE_KUBE_ENDPOINTS);
      for (const k of Object.keys(svc.env))
        expect(k in env, k).toBe(!ENVIRONMENT_SETTINGS.includes(k) && !HTTP_DELIVERY_SETTINGS.includes(k));
      for (const k of HTTP_DELIVERY_SETTINGS) expect(Object.keys(svc.env), k).toContain(k);
    }
    const doc = readFileSync(join(ROOT, "docs/lab.md"), "utf8");
    for (const name of Object.keys(LAB_ONLY_STAGES)) expect(doc).toContain(`\`${name}\``);
  });
});

describe("reading the manifests", () => {
  const svc = (args: string[], env: object[]): KubeObject =>
    ({
      apiVersion: "serving.knative.dev/v1",
      kind: "Service",
      metadata: { name: "detect" },
      spec: { template: { spec: { containers: [{ args, env }] } } },
    }) as unknown as KubeObject;
  const cm = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "fastfence-runtime" },
    data: { "kafka.brokers": "b:9093" },
  } as unknown as KubeObject;

  it("resolves ConfigMap keys and passes a new setting through to the lab", () => {
    const s = shippedStages([
      cm,
      svc(
        ["run", "detect", "--kafka"],
        [
          { name: "FASTFENCE_KAFKA_SESSION_TIMEOUT_MS", value: "9000" },
          {
            name: "FASTFENCE_KAFKA_BROKERS",
            valueFrom: { configMapKeyRef: { name: "fastfence-runtime", key: "kafka.brokers" } },
          },
          { name: "FASTFENCE_KAFKA_PASSWORD", valueFrom: { secretKeyRef: { name: "s", key: "p" } } },
        ],
      ),
    ]);
    expect(s[0]!.env).toEqual({
      FASTFENCE_KAFKA_SESSION_TIMEOUT_MS: "9000",
      FASTFENCE_KAFKA_BROKERS: "b:9093",
    });
    expect(labStageEnv("detect", s)).toEqual({ FASTFENCE_KAFKA_SESSION_TIMEOUT_MS: "9000" });
  });

  it("refuses a missing ConfigMap key, a stage no Service runs, and a stage the lab cannot host, naming it", () => {
    const missing = svc(
      ["run", "detect", "--kafka"],
      [{ name: "X", valueFrom: { configMapKeyRef: { name: "fastfence-runtime", key: "nope" } } }],
    );
    expect(() => shippedStages([cm, missing])).toThrow(
      /detect: X references ConfigMap fastfence-runtime key nope/,
    );
    expect(() => labStageEnv("confirm", shippedStages([cm]))).toThrow(ReplicaSettingsError);
    const http = shippedStages([cm, svc(["run", "detect", "--http", "8080"], [])]);
    expect(() => labStageEnv("detect", http)).toThrow(/Service detect runs .*--http.*LAB_ONLY_STAGES/);
  });
});

describe("the topology a report states", () => {
  it("names every stage's mode as the lab runs it and the lab-only ones with their reason", () => {
    const t = describeTopology(shipped);
    expect(Object.keys(t.stages).sort()).toEqual(STAGES.map((s) => s.name).sort());
    for (const s of STAGES)
      expect(t.stages[s.name], s.name).toBe(
        s.critical ? "kafka, group mode each-replica" : "kafka (lab only)",
      );
    expect(t.labOnly).toEqual(Object.keys(LAB_ONLY_STAGES));
    expect(t.text).toContain(LAB_ONLY_STAGES.recover!);
  });
});

describe("the event source as the lab runs it", () => {
  const env = shippedSourceEnv();
  const kept = labSourceSettings(env);

  it("keeps the DaemonSet's API endpoints setting (its heartbeat fails over as shipped)", () => {
    expect(env.FASTFENCE_KUBE_ENDPOINTS).toBeDefined();
    expect(kept.FASTFENCE_KUBE_ENDPOINTS).toBe(env.FASTFENCE_KUBE_ENDPOINTS);
  });

  it("drops this environment's settings, the watchdog device and everything not FASTFENCE_*", () => {
    expect(env.FASTFENCE_WATCHDOG_DEVICE).toBeDefined(); // shipped, replaced by the lab's own
    expect(Object.keys(env)).toContain("NODE_OPTIONS");
    for (const k of Object.keys(kept)) {
      expect(ENVIRONMENT_SETTINGS, k).not.toContain(k);
      expect(k).toMatch(/^FASTFENCE_/);
      expect(k).not.toMatch(/^FASTFENCE_WATCHDOG_/);
    }
    // every shipped FASTFENCE_* setting is either kept or one the lab says it replaces
    for (const k of Object.keys(env).filter((x) => x.startsWith("FASTFENCE_")))
      expect(k in kept || ENVIRONMENT_SETTINGS.includes(k) || k.startsWith("FASTFENCE_WATCHDOG_"), k).toBe(
        true,
      );
  });

  it("is what a lab node agent starts the event source with, its own settings last", () => {
    const cfg = {
      node: "node-a",
      ip: "10.77.0.10",
      dir: "/x",
      kubeconfig: "/x/k",
      brokers: "10.77.0.10:9092",
      brokerCount: 3,
      namespace: "fastfence-system",
      metricsPort: 1,
      artifact: "/x/a",
    };
    const e = labSourceEnv(cfg, kept);
    expect(e.FASTFENCE_KUBE_ENDPOINTS).toBe(kept.FASTFENCE_KUBE_ENDPOINTS);
    expect(e.FASTFENCE_KAFKA_BROKERS).toBe("10.77.0.10:9092");
    expect(e.FASTFENCE_WATCHDOG_DEVICE).toBeUndefined();
  });
});
