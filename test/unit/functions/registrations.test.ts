// Every registered stage (functions/registry.ts) has each registration that
// docs/adding-a-function.md lists (part 2, "every place that must change"): its folder with
// decide.pure.ts and handler.ts exporting that stage, consumed and emitted types in the
// event catalog, a unit test file that imports it, a Knative Service running it (when
// critical: min-scale >= 2, the critical-path label, and `--kafka`, consuming its catalog
// topics itself; otherwise `--http` behind one Trigger per consumed type and none when
// critical; the pod label the NetworkPolicy admits the Knative data plane by) listed in
// the kustomization, its ServiceAccount, its Role file, its rows in docs/rbac.md, its Kafka principal and
// KafkaUser (which the harness and the lab create their users from), the lab and the
// harness starting every registered stage, and the docs that list the stages (and every
// path that docs/adding-a-function.md's checklist names exists). Adding a stage and
// forgetting one of them fails here, by name.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { loadAll } from "js-yaml";
import { consumedBy, emittedBy, type Component } from "../../../events/catalog.ts";
import { ACL_PRINCIPALS, kafkaUserName } from "../../../events/kafka-acls.ts";
import { STAGES } from "../../../functions/registry.ts";
import { readKafkaUsers } from "../../../harness/env/kafka-auth.ts";

const ROOT = join(import.meta.dirname, "../../..");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");

interface K8sObject {
  kind?: string;
  metadata?: { name?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
}
const yamlDocs = (p: string) => (loadAll(read(p)) as K8sObject[]).filter(Boolean);
const resources = (kustomization: string) =>
  (yamlDocs(kustomization)[0] as unknown as { resources: string[] }).resources;

const triggers = yamlDocs("knative/base/eventing/triggers.yaml").filter((o) => o.kind === "Trigger");
const serviceAccounts = yamlDocs("knative/base/rbac/serviceaccounts.yaml")
  .filter((o) => o.kind === "ServiceAccount")
  .map((o) => o.metadata?.name);
const rbacIdentities = new Set(
  read("docs/rbac.md")
    .split("<!-- rbac-table:begin -->")[1]!
    .split("<!-- rbac-table:end -->")[0]!
    .split("\n")
    .filter((l) => l.startsWith("| ") && !l.startsWith("| identity"))
    .map((l) => l.split("|")[1]!.trim()),
);
const kafkaUsers = new Set(readKafkaUsers().map((u) => u.name));
const knativeIngress = yamlDocs("knative/base/network/networkpolicies.yaml").find(
  (o) => o.kind === "NetworkPolicy" && o.metadata?.name === "fastfence-allow-knative",
)!;
const unitTests = readdirSync(join(ROOT, "test/unit/functions")).map((f) => read(`test/unit/functions/${f}`));

// docs/deploy-knative.md, "What gets deployed": "N Knative `Service`s (`a`, `b`, …)" and
// "`Broker fastfence` (class `Kafka`) + M `Trigger`s".
const deployDoc = read("docs/deploy-knative.md");
const servicesRow = /^\| (\d+) Knative `Service`s \(([^)]*)\)/m.exec(deployDoc);
const deployedRow = {
  count: Number(servicesRow?.[1]),
  services: [...(servicesRow?.[2] ?? "").matchAll(/`([a-z-]+)`/g)].map((m) => m[1]),
  triggers: Number(/^\| `Broker fastfence` \(class `Kafka`\) \+ (\d+) `Trigger`s/m.exec(deployDoc)?.[1]),
};

describe.each(STAGES.map((s) => [s.name, s] as const))("stage %s", (name, stage) => {
  test("its folder holds decide.pure.ts and a handler.ts exporting this stage", async () => {
    expect(existsSync(join(ROOT, "functions", name, "decide.pure.ts"))).toBe(true);
    const mod = (await import(`../../../functions/${name}/handler.ts`)) as { stage?: unknown };
    expect(mod.stage).toBe(stage);
  });

  test("the event catalog lists what it consumes and emits", () => {
    const consumes = consumedBy(name as Component);
    expect(consumes.length).toBeGreaterThan(0);
    expect(stage.subscriptions.flatMap((s) => s.types).sort()).toEqual([...consumes].sort());
    expect([...stage.emits].sort()).toEqual([...emittedBy(name as Component)].sort());
  });

  test("a unit test file in test/unit/functions imports it", () => {
    expect(unitTests.some((t) => t.includes(`functions/${name}/handler.ts`))).toBe(true);
  });

  test("a Knative Service runs it, listed in the kustomization", () => {
    const file = `knative/base/functions/${name}.yaml`;
    expect(resources("knative/base/functions/kustomization.yaml")).toContain(`${name}.yaml`);
    const svc = yamlDocs(file).find((o) => o.kind === "Service")!;
    expect(svc.metadata?.name).toBe(name);
    const template = svc.spec!.template as {
      metadata: { labels: Record<string, string>; annotations: Record<string, string> };
      spec: { serviceAccountName: string; containers: { args: string[] }[] };
    };
    expect(template.spec.serviceAccountName).toBe(`fastfence-${name}`);
    const args = template.spec.containers[0]!.args;
    expect(args.slice(0, 2)).toEqual(["run", name]);
    // Critical stages consume their catalog topics; only the others are delivered over HTTP.
    expect(args[2]).toBe(stage.critical ? "--kafka" : "--http");
    const minScale = Number(template.metadata.annotations["autoscaling.knative.dev/min-scale"] ?? "0");
    if (stage.critical) expect(minScale).toBeGreaterThanOrEqual(2);
    expect(svc.metadata?.labels?.["fastfence.io/critical-path"]).toBe(String(stage.critical));
    // Ingress is denied by default: only pods with these labels accept the Knative data plane.
    const admitted = (knativeIngress.spec!.podSelector as { matchLabels: Record<string, string> })
      .matchLabels;
    expect(template.metadata.labels).toMatchObject(admitted);
  });

  test("no Trigger delivers to it when critical; otherwise one per consumed type does", () => {
    const mine = triggers.filter(
      (tr) => (tr.spec as { subscriber?: { ref?: { name?: string } } }).subscriber?.ref?.name === name,
    );
    if (stage.critical) return void expect(mine.map((t) => t.metadata?.name)).toEqual([]);
    expect(mine).toHaveLength(consumedBy(name as Component).length);
    for (const type of consumedBy(name as Component)) {
      const t = triggers.find((tr) => {
        const spec = tr.spec as {
          filter?: { attributes?: { type?: string } };
          subscriber?: { ref?: { name?: string } };
        };
        return spec.filter?.attributes?.type === type && spec.subscriber?.ref?.name === name;
      });
      expect(t, `Trigger for ${type} → ${name}`).toBeDefined();
    }
  });

  test("its identity: ServiceAccount, Role file, docs/rbac.md rows", () => {
    expect(serviceAccounts).toContain(`fastfence-${name}`);
    expect(resources("knative/base/rbac/kustomization.yaml")).toContain(`${name}.yaml`);
    expect(rbacIdentities.has(name)).toBe(true);
  });

  test("its Kafka principal and KafkaUser (the harness and the lab create their users from it)", () => {
    expect(ACL_PRINCIPALS).toContain(name);
    expect(kafkaUsers.has(kafkaUserName(name as Component))).toBe(true);
  });

  test("the docs that list the stages name it", () => {
    expect(read("README.md")).toContain(`\`${name}\``);
    expect(read("docs/design.md")).toContain(name);
    expect(deployedRow.services).toContain(name);
  });
});

describe("what the lab, the harness and the docs say about the stages as a whole", () => {
  test("the lab and the harness start every registered stage (the artifact's stageNames(), not a list of their own)", () => {
    for (const file of ["lab/node-agent.ts", "harness/env/pipeline-replicas.ts"]) {
      const src = read(file);
      // app/index.ts of the unpacked artifact (harness/shipped-app.ts) re-exports the registry's.
      expect(src, file).toMatch(
        /import \{[^}]*\b(importApp|shippedApp)\b[^}]*\} from "(\.\.\/)+(harness\/)?shipped-app\.ts"/,
      );
      expect(src, file).toMatch(/for \(const \w+ of app\.stageNames\(\)\)/);
    }
    expect(read("app/index.ts")).toMatch(/export \{ stageNames \} from "\.\.\/functions\/registry\.ts"/);
  });

  test("docs/adding-a-function.md: every path its checklist names exists (my-stage read as each stage)", () => {
    const table = read("docs/adding-a-function.md").split("### Every place that changes")[1]!;
    const rows = table.split("\n").filter((l) => /^\| \d+ \|/.test(l));
    expect(rows.length).toBeGreaterThanOrEqual(10);
    const top = new Set(readdirSync(ROOT));
    const paths = rows
      .flatMap((r) => [...r.matchAll(/`([a-z0-9_./-]+\/[a-z0-9_./-]*)`/g)].map((m) => m[1]!))
      .filter((p) => top.has(p.split("/")[0]!));
    expect(paths.length).toBeGreaterThan(20);
    for (const p of paths) {
      if (!p.includes("my-stage")) expect(existsSync(join(ROOT, p)), p).toBe(true);
      else if (!p.startsWith("test/"))
        for (const s of STAGES) expect(existsSync(join(ROOT, p.replace("my-stage", s.name))), p).toBe(true);
    }
  });

  test("docs/deploy-knative.md counts the Services and Triggers the manifests hold", () => {
    expect(deployedRow.count).toBe(STAGES.length);
    expect(deployedRow.services).toEqual(STAGES.map((s) => s.name));
    expect(deployedRow.triggers).toBe(triggers.length);
  });
});
