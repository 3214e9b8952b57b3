// The Knative manifests agree with the HTTP runtime's sender authentication: every
// Trigger names its subscriber's audience (Knative Serving does not announce one), each
// function expects that audience, accepts exactly the OIDC identities Knative gives the
// Triggers that deliver to it (the name computed as Knative's
// GetOIDCServiceAccountNameForResource does, checked against Knative's own test vectors),
// runs with FASTFENCE_HTTP_AUTH=tokenreview, and its ServiceAccount may create
// TokenReviews. Renaming a Trigger without updating the allow list fails here. The critical
// stages take no deliveries (they consume Kafka): no HTTP settings, no TokenReview grant.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadAll } from "js-yaml";
import { describe, expect, test } from "vitest";
import { STAGES } from "../../../functions/registry.ts";
import { httpAllowedSubjects, httpAudience, loadRuntimeConfig } from "../../../infra/config.ts";

const ROOT = join(import.meta.dirname, "../../..");
const NS = "fastfence-system";
interface Obj {
  kind?: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
  subjects?: { kind: string; name: string; namespace: string }[];
  roleRef?: { name: string };
}
const docs = (p: string) => (loadAll(readFileSync(join(ROOT, p), "utf8")) as Obj[]).filter(Boolean);

/** knative.dev/pkg kmeta.ChildName. */
function childName(parent: string, suffix: string): string {
  const longest = 63;
  const head = longest - 32;
  if (parent.length <= longest - suffix.length) return parent + suffix;
  if (head - suffix.length <= 0) {
    const ret =
      parent.slice(0, head) +
      createHash("md5")
        .update(parent + suffix)
        .digest("hex");
    return (ret + suffix).slice(0, longest).replace(/[^a-zA-Z0-9]+$/, "");
  }
  return parent.slice(0, head - suffix.length) + createHash("md5").update(parent).digest("hex") + suffix;
}

/** knative.dev/eventing pkg/auth GetOIDCServiceAccountNameForResource. */
function oidcServiceAccount(group: string, kind: string, name: string): string {
  return childName(name, `-oidc-${group}-${kind}`).toLowerCase();
}

interface Trigger {
  metadata: { name: string };
  spec: { subscriber: { ref: { kind: string; name: string }; audience?: string } };
}
const triggers = docs("knative/base/eventing/triggers.yaml").filter(
  (o) => o.kind === "Trigger",
) as unknown as Trigger[];

function envOf(fn: string): Record<string, string> {
  const svc = docs(`knative/base/functions/${fn}.yaml`).find((o) => o.kind === "Service")!;
  const c = (
    svc.spec as { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } }
  ).template.spec.containers[0]!;
  return Object.fromEntries(c.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
}

test("the Trigger identity names follow Knative's own test vectors", () => {
  expect(oidcServiceAccount("group", "kind", "name")).toBe("name-oidc-group-kind");
  expect(oidcServiceAccount("eventing.knative.dev", "Broker", "my-Broker")).toBe(
    "my-broker-oidc-eventing.knative.dev-broker",
  );
  expect(
    oidcServiceAccount(
      "eventing.knative.dev",
      "Broker",
      "my-loooooooooooooooooooooooooooooooooooooog-Broker",
    ),
  ).toBe("my-looooooooooooooooooooooooooo2dfc2a3825b8d82077b0f25518b36884");
});

const tokenReviewers = () =>
  docs("knative/base/rbac/tokenreview.yaml").find((o) => o.kind === "ClusterRoleBinding")!.subjects!;

describe.each(STAGES.filter((s) => s.critical).map((s) => [s.name] as const))("critical stage %s", (fn) => {
  test("takes no deliveries: no HTTP settings, no TokenReview grant", () => {
    const names = Object.keys(envOf(fn));
    for (const n of ["FASTFENCE_HTTP_AUTH", "FASTFENCE_HTTP_AUDIENCE", "FASTFENCE_HTTP_ALLOWED_SUBJECTS"])
      expect(names, n).not.toContain(n);
    expect(tokenReviewers().map((s) => s.name)).not.toContain(`fastfence-${fn}`);
  });
});

describe.each(STAGES.filter((s) => !s.critical).map((s) => [s.name] as const))("function %s", (fn) => {
  const audience = `serving.knative.dev/service/${NS}/${fn}`;
  const mine = triggers.filter(
    (t) => t.spec.subscriber.ref.kind === "Service" && t.spec.subscriber.ref.name === fn,
  );

  test("its Triggers name its audience, and it expects that audience", () => {
    expect(mine.length).toBeGreaterThan(0);
    for (const t of mine) expect(t.spec.subscriber.audience, t.metadata.name).toBe(audience);
    const cfg = loadRuntimeConfig({ FASTFENCE_NAMESPACE: NS, ...envOf(fn) });
    expect(httpAudience(cfg, fn)).toBe(audience);
    expect(cfg.FASTFENCE_HTTP_AUTH).toBe("tokenreview");
  });

  test("it accepts exactly the OIDC identities of its Triggers", () => {
    const cfg = loadRuntimeConfig({ FASTFENCE_NAMESPACE: NS, ...envOf(fn) });
    const expected = mine.map(
      (t) =>
        `system:serviceaccount:${NS}:${oidcServiceAccount("eventing.knative.dev", "Trigger", t.metadata.name)}`,
    );
    expect([...httpAllowedSubjects(cfg)].sort()).toEqual(expected.sort());
  });

  test("its ServiceAccount may create TokenReviews", () => {
    const rbac = docs("knative/base/rbac/tokenreview.yaml");
    const role = rbac.find((o) => o.kind === "ClusterRole")!;
    expect((role as unknown as { rules: unknown[] }).rules).toEqual([
      { apiGroups: ["authentication.k8s.io"], resources: ["tokenreviews"], verbs: ["create"] },
    ]);
    const binding = rbac.find((o) => o.kind === "ClusterRoleBinding")!;
    expect(binding.roleRef?.name).toBe(role.metadata.name);
    expect(binding.subjects).toContainEqual({
      kind: "ServiceAccount",
      name: `fastfence-${fn}`,
      namespace: NS,
    });
  });
});
