// The CRD YAML in knative/base/crds parses, is structural-looking, and carries exactly the
// schemas generated from core/ (so field names match the domain model). To regenerate:
//   node scripts/gen-crds.ts
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { load as loadYaml } from "js-yaml";
import { fencedNodeSetCrd, fencingPolicyCrd, nodeFenceCrd } from "../../../core/crdschema.ts";
import { DEFAULT_POLICY, resolvePolicy } from "../../../core/policy.ts";

const load = (f: string) =>
  loadYaml(readFileSync(new URL(`../../../knative/base/crds/${f}`, import.meta.url), "utf8"));

function walk(
  s: Record<string, unknown>,
  path: string,
  visit: (s: Record<string, unknown>, path: string) => void,
): void {
  visit(s, path);
  for (const [k, v] of Object.entries((s.properties as Record<string, Record<string, unknown>>) ?? {}))
    walk(v, `${path}.${k}`, visit);
  if (s.items) walk(s.items as Record<string, unknown>, `${path}[]`, visit);
  if (s.additionalProperties && typeof s.additionalProperties === "object")
    walk(s.additionalProperties as Record<string, unknown>, `${path}{}`, visit);
}

describe("CRDs", () => {
  test.each([
    ["nodefence.yaml", nodeFenceCrd],
    ["fencingpolicy.yaml", fencingPolicyCrd],
    ["fencednodeset.yaml", fencedNodeSetCrd],
  ] as const)("%s equals the schema generated from core/", (file, gen) => {
    expect(load(file)).toEqual(gen());
  });

  test.each(["nodefence.yaml", "fencingpolicy.yaml"])(
    "%s is structural (every node typed, no properties+additionalProperties)",
    (file) => {
      const crd = load(file) as {
        spec: { versions: { schema: { openAPIV3Schema: Record<string, unknown> }; subresources: unknown }[] };
      };
      const v = crd.spec.versions[0]!;
      expect(v.subresources).toEqual({ status: {} });
      walk(v.schema.openAPIV3Schema, "", (s, path) => {
        expect(s.type, `type at ${path || "(root)"}`).toBeDefined();
        expect(s.properties && s.additionalProperties, `both at ${path}`).toBeFalsy();
      });
    },
  );

  test("NodeFence is namespaced, FencingPolicy cluster-scoped, both fastfence.io/v1alpha1", () => {
    const nf = nodeFenceCrd() as { spec: { scope: string; group: string; names: { kind: string } } };
    const fp = fencingPolicyCrd() as { spec: { scope: string; group: string; names: { kind: string } } };
    expect([nf.spec.scope, nf.spec.group, nf.spec.names.kind]).toEqual([
      "Namespaced",
      "fastfence.io",
      "NodeFence",
    ]);
    expect([fp.spec.scope, fp.spec.group, fp.spec.names.kind]).toEqual([
      "Cluster",
      "fastfence.io",
      "FencingPolicy",
    ]);
  });

  test("policy defaults: quorum 2, storm guard 1, etcd rule on, power-on off", () => {
    expect(DEFAULT_POLICY.corroboration.quorum).toBe(2);
    expect(DEFAULT_POLICY.stormGuard.maxConcurrentFenced).toBe(1);
    expect(DEFAULT_POLICY.controlPlane.protectEtcdQuorum).toBe(true);
    expect(DEFAULT_POLICY.powerOnAfterFence).toBe(false);
    expect(DEFAULT_POLICY.remediation.strategy).toBe("OutOfServiceTaint");
    expect(() => resolvePolicy({ corroboration: { quorum: 1 } })).toThrow(); // S2: never one observer
  });
});
