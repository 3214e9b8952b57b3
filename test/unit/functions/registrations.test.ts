// Every registered stage (functions/registry.ts) has each registration that
// docs/adding-a-function.md lists: its folder with decide.pure.ts and handler.ts exporting
// that stage, consumed and emitted types in the event catalog, a unit test file that
// imports it, a Knative Service running it (min-scale >= 2 when critical) listed in the
// kustomization, one Trigger per consumed type, its ServiceAccount, its Role file, and its
// rows in docs/rbac.md. Adding a stage and forgetting one of them fails here, by name.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { loadAll } from "js-yaml";
import { consumedBy, emittedBy, type Component } from "../../../events/catalog.ts";
import { STAGES } from "../../../functions/registry.ts";

const ROOT = join(import.meta.dirname, "../../..");
const read = (p: string) => readFileSync(join(ROOT, p), "utf8");

interface K8sObject {
  kind?: string;
  metadata?: { name?: string; annotations?: Record<string, string> };
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
const unitTests = readdirSync(join(ROOT, "test/unit/functions")).map((f) => read(`test/unit/functions/${f}`));

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
      metadata: { annotations: Record<string, string> };
      spec: { serviceAccountName: string; containers: { args: string[] }[] };
    };
    expect(template.spec.serviceAccountName).toBe(`fastfence-${name}`);
    expect(template.spec.containers[0]!.args.slice(0, 2)).toEqual(["run", name]);
    const minScale = Number(template.metadata.annotations["autoscaling.knative.dev/min-scale"] ?? "0");
    if (stage.critical) expect(minScale).toBeGreaterThanOrEqual(2);
  });

  test("one Trigger per consumed type delivers to it", () => {
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
});
