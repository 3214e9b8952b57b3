// No role fastfence ships grants impersonation: every overlay under knative/overlays, alone
// and with every component under knative/components, rendered with the real kustomize, and
// the operator role block docs/rbac.md prints. An admission policy sees an impersonated
// identity as the real one (docs/threat-model.md "What is still trusted"), so whoever may
// impersonate a fastfence ServiceAccount, a user or the node-name extra is as strong as
// root on every node: only cluster administrators may. A rule counts when it allows the
// verb `impersonate` (or `*`) on users, groups, serviceaccounts, uids or userextras (or on
// `*`) in their API group (or `*`). test/integration/admission-impersonation.test.ts asks
// the API server the same question for the base's accounts. No cluster.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KNATIVE_DIR, render, renderWith, type KubeObject } from "../../../harness/kustomize.ts";
import { operatorRbacFromDocs } from "../../../harness/kube/operator-rbac.ts";

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  nonResourceURLs?: string[];
}

/** The API group of each impersonable resource (Kubernetes' impersonation filter). */
const IMPERSONABLE: Record<string, string> = {
  users: "",
  groups: "",
  serviceaccounts: "",
  uids: "authentication.k8s.io",
  userextras: "authentication.k8s.io",
};

/** Where the objects' Roles and ClusterRoles grant impersonation: one line per rule. */
export function impersonationGrants(objects: readonly KubeObject[]): string[] {
  const found: string[] = [];
  for (const o of objects) {
    if (o.kind !== "Role" && o.kind !== "ClusterRole") continue;
    for (const [i, r] of ((o as { rules?: Rule[] }).rules ?? []).entries()) {
      if (!(r.verbs ?? []).some((v) => v === "impersonate" || v === "*")) continue;
      const groups = r.apiGroups ?? [];
      const hits = (r.resources ?? []).filter((res) => {
        const base = res.split("/")[0]!;
        if (base === "*") return true;
        const group = IMPERSONABLE[base];
        return group !== undefined && (groups.includes("*") || groups.includes(group));
      });
      if (hits.length)
        found.push(`${o.kind} ${o.metadata.name} rule ${i}: ${r.verbs!.join(",")} on ${hits.join(",")}`);
    }
  }
  return found;
}

const OVERLAYS = readdirSync(join(KNATIVE_DIR, "overlays"));
const COMPONENTS = readdirSync(join(KNATIVE_DIR, "components"));
const renders: [string, () => KubeObject[]][] = [
  ...OVERLAYS.flatMap((o): [string, () => KubeObject[]][] => {
    const dir = join(KNATIVE_DIR, "overlays", o);
    return [
      [o, () => render(dir)],
      [
        `${o} + components ${COMPONENTS.join(", ")}`,
        () =>
          renderWith(
            [dir],
            COMPONENTS.map((c) => join(KNATIVE_DIR, "components", c)),
          ),
      ],
    ];
  }),
  ["the operator role block of docs/rbac.md", () => operatorRbacFromDocs() as KubeObject[]],
];

describe("the check itself, on plain data", () => {
  const role = (rules: Rule[]): KubeObject => ({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name: "r" },
    rules,
  });
  it("finds impersonate and * on impersonable resources, in their group or *", () => {
    for (const rule of [
      { apiGroups: [""], resources: ["serviceaccounts"], verbs: ["impersonate"] },
      { apiGroups: ["authentication.k8s.io"], resources: ["userextras/scopes"], verbs: ["impersonate"] },
      { apiGroups: ["*"], resources: ["*"], verbs: ["*"] },
      { apiGroups: [""], resources: ["users", "pods"], verbs: ["get", "*"] },
    ])
      expect(impersonationGrants([role([rule])]), JSON.stringify(rule)).toHaveLength(1);
  });
  it("leaves other verbs, other resources and the wrong group alone", () => {
    for (const rule of [
      { apiGroups: [""], resources: ["serviceaccounts"], verbs: ["get", "list"] },
      { apiGroups: [""], resources: ["pods"], verbs: ["*"] },
      { apiGroups: ["apps"], resources: ["users"], verbs: ["impersonate"] },
      { nonResourceURLs: ["/healthz"], verbs: ["*"] },
    ])
      expect(impersonationGrants([role([rule])]), JSON.stringify(rule)).toEqual([]);
  });
});

describe("no role fastfence ships or documents grants impersonation", () => {
  it("renders at least the vanilla and openshift overlays", () => {
    expect(OVERLAYS).toEqual(expect.arrayContaining(["vanilla", "openshift"]));
  });
  it.each(renders)("%s", (_name, objects) => {
    const objs = objects();
    expect(objs.some((o) => o.kind === "Role" || o.kind === "ClusterRole")).toBe(true);
    expect(impersonationGrants(objs)).toEqual([]);
  });
});
