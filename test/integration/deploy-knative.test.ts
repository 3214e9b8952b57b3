// Needs real kube-apiserver, kustomize: server-side dry-run on real CRDs, SubjectAccessReview.
// make test-deploy: the deployment manifests against a real kube-apiserver. Installs the
// real third-party CRDs (third_party/crds: Knative, Strimzi, metal3, medik8s, KubeVirt,
// OpenShift machine API, OLM, the OpenShift Serverless operator) and the project's CRDs
// (knative/base/crds), then applies every object of every overlay, with the optional
// Components its rows of docs/rbac.md describe (the Kafka cluster; upstream: metal3), and of
// knative/examples with server-side dry-run and strict field validation
// (create, or patch when it exists), and so the optional monitoring component
// (knative/components/monitoring: PodMonitors and a PrometheusRule, against the Prometheus
// Operator's CRDs), which must also render onto each overlay. Then, per overlay, it really applies the RBAC objects
// and asks the API server (SubjectAccessReview) every row of the table in docs/rbac.md,
// and checks that every rule the manifests grant appears in that table. It never touches
// anything but the test run's throwaway control plane, and resets it at the end.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ApiException,
  ApiextensionsV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  ServerConfiguration,
  createConfiguration,
  type KubernetesObject,
  type RequestContext,
  type ResponseContext,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import { THIRD_PARTY_CRDS } from "../../harness/env/index.ts";
import { sharedControlPlane, type SharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import {
  groupOf,
  objectId,
  readYamlDocs,
  render,
  renderWith,
  type KubeObject,
} from "../../harness/kustomize.ts";

const ROOT = join(import.meta.dirname, "../..");

const OVERLAYS = ["openshift", "vanilla"] as const;
const NAMESPACE = "fastfence-system";

// ---------------------------------------------------------------------------------------
// The RBAC table of docs/rbac.md.

export interface RbacRow {
  identity: string;
  verbs: string[];
  group: string;
  resource: string;
  subresource: string;
  /** One object's name (the resource cell's "#name" suffix); absent: any object. */
  name?: string;
  /** A namespace, "*" (all namespaces) or "-" (cluster-scoped). */
  namespace: string;
  overlays: string[];
  allowed: boolean;
}

export function parseRbacTable(markdown: string): RbacRow[] {
  const m = /<!-- rbac-table:begin -->([\s\S]*?)<!-- rbac-table:end -->/.exec(markdown);
  if (!m) throw new Error("docs/rbac.md: no rbac-table markers");
  const lines = m[1]!
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("|"));
  const cells = (l: string) =>
    l
      .slice(1, -1)
      .split("|")
      .map((c) => c.trim());
  expect(cells(lines[0]!)).toEqual(["identity", "verbs", "resource", "namespace", "overlays", "allowed"]);
  return lines.slice(2).map((l) => {
    const [identity, verbs, res, namespace, overlays, allowed] = cells(l) as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const [path = "", name] = res.split("#");
    const parts = path.split("/");
    if (parts.length < 2 || parts.length > 3) throw new Error(`docs/rbac.md: bad resource "${res}"`);
    if (!["yes", "no"].includes(allowed)) throw new Error(`docs/rbac.md: allowed must be yes or no: "${l}"`);
    return {
      identity,
      verbs: verbs.split(",").map((v) => v.trim()),
      group: parts[0] === "core" ? "" : parts[0]!,
      resource: parts[1]!,
      subresource: parts[2] ?? "",
      ...(name ? { name } : {}),
      namespace,
      overlays: overlays.split(",").map((o) => o.trim()),
      allowed: allowed === "yes",
    };
  });
}

const RBAC_ROWS = parseRbacTable(readFileSync(join(ROOT, "docs/rbac.md"), "utf8"));

// ---------------------------------------------------------------------------------------
// Loading manifests.

function yamlFilesUnder(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((n) => {
      const p = join(dir, n);
      return statSync(p).isDirectory() ? yamlFilesUnder(p) : /\.ya?ml$/.test(n) ? [p] : [];
    })
    .sort();
}

function crdsUnder(dir: string): V1CustomResourceDefinition[] {
  return yamlFilesUnder(dir)
    .flatMap((f) => readYamlDocs(f))
    .filter(
      (d): d is V1CustomResourceDefinition => (d as { kind?: string }).kind === "CustomResourceDefinition",
    );
}

const MONITORING = join(ROOT, "knative/components/monitoring");
const KAFKA_CLUSTER = join(ROOT, "knative/kafka-cluster");
const METAL3 = join(ROOT, "knative/components/metal3");
/** Each overlay with the optional Components that its rows of docs/rbac.md describe. */
const WITH_COMPONENTS: Record<(typeof OVERLAYS)[number], string[]> = {
  openshift: [KAFKA_CLUSTER],
  vanilla: [KAFKA_CLUSTER, METAL3],
};
const RENDERED: Record<string, KubeObject[]> = {
  ...Object.fromEntries(
    OVERLAYS.map((o) => [o, renderWith([join(ROOT, "knative/overlays", o)], WITH_COMPONENTS[o])]),
  ),
  crds: render(join(ROOT, "knative/base/crds")),
  examples: render(join(ROOT, "knative/examples")),
  // the component on its own: its objects are dry-run once, not once per overlay
  monitoring: render(MONITORING),
};

const KIND_ORDER = [
  "CustomResourceDefinition",
  "Namespace",
  "PriorityClass",
  "ServiceAccount",
  "ClusterRole",
  "Role",
];
function applyOrder(a: KubeObject, b: KubeObject): number {
  const rank = (o: KubeObject) =>
    KIND_ORDER.includes(o.kind) ? KIND_ORDER.indexOf(o.kind) : KIND_ORDER.length;
  return rank(a) - rank(b);
}

const isRbac = (o: KubeObject) =>
  groupOf(o.apiVersion) === "rbac.authorization.k8s.io" || o.kind === "ServiceAccount";

// ---------------------------------------------------------------------------------------

function errText(err: unknown): string {
  if (err instanceof ApiException) {
    const body = typeof err.body === "string" ? err.body : JSON.stringify(err.body);
    return `HTTP ${err.code}: ${body}`;
  }
  return String(err);
}

/**
 * The client's typed serializer drops fields its models do not know (and renames
 * `x-kubernetes-*` schema keys away), which would hide a typo from the API server. So the
 * body sent is exactly the manifest: `raw` holds it for the one request in flight, and this
 * middleware puts it on the wire; every write is also strict about unknown fields.
 */
let raw: unknown;
const exactBodyStrictFields = {
  pre: async (ctx: RequestContext) => {
    if (ctx.getHttpMethod() !== "GET") ctx.setQueryParam("fieldValidation", "Strict");
    if (raw !== undefined && ctx.getHttpMethod() !== "GET" && ctx.getHttpMethod() !== "DELETE")
      ctx.setBody(JSON.stringify(raw));
    return ctx;
  },
  post: async (ctx: ResponseContext) => ctx,
};

async function withRawBody<T>(o: unknown, fn: () => Promise<T>): Promise<T> {
  raw = o;
  try {
    return await fn();
  } finally {
    raw = undefined;
  }
}

describe("deploy: every overlay applies to a real kube-apiserver with the real CRDs", () => {
  let cp: SharedControlPlane;
  let objects: KubernetesObjectApi;
  let core: CoreV1Api;
  let ext: ApiextensionsV1Api;
  let authz: AuthorizationV1Api;
  let rbac: RbacAuthorizationV1Api;
  const warnings: string[] = [];

  beforeAll(async () => {
    cp = await sharedControlPlane();
    const kc = cp.kubeConfig;
    const cluster = kc.getCurrentCluster()!;
    objects = new KubernetesObjectApi(
      createConfiguration({
        baseServer: new ServerConfiguration(cluster.server, {}),
        authMethods: { default: kc },
        promiseMiddleware: [exactBodyStrictFields],
      }),
    );
    core = kc.makeApiClient(CoreV1Api);
    ext = kc.makeApiClient(ApiextensionsV1Api);
    authz = kc.makeApiClient(AuthorizationV1Api);
    rbac = kc.makeApiClient(RbacAuthorizationV1Api);

    // Install the CRDs for real: the third-party ones, then every CRD the manifests carry.
    const crds = new Map<string, V1CustomResourceDefinition>();
    for (const c of crdsUnder(THIRD_PARTY_CRDS)) crds.set(c.metadata!.name!, c);
    for (const c of crdsUnder(join(ROOT, "knative/base/crds"))) crds.set(c.metadata!.name!, c);
    for (const list of Object.values(RENDERED))
      for (const o of list)
        if (o.kind === "CustomResourceDefinition")
          crds.set(o.metadata.name, o as unknown as V1CustomResourceDefinition);
    for (const c of crds.values()) {
      try {
        await withRawBody(c, () => objects.create(c as KubernetesObject));
      } catch (err) {
        throw new Error(`installing CRD ${c.metadata?.name}: ${errText(err)}`);
      }
    }
    const deadline = Date.now() + 60_000;
    for (const name of crds.keys()) {
      for (;;) {
        const got = await ext.readCustomResourceDefinition({ name });
        if (got.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
        if (Date.now() > deadline) throw new Error(`CRD ${name} not Established`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    // Namespaced dry-runs need their namespace to exist for real.
    const namespaces = new Set<string>();
    for (const list of Object.values(RENDERED))
      for (const o of list) {
        if (o.metadata.namespace) namespaces.add(o.metadata.namespace);
        if (o.kind === "Namespace") namespaces.add(o.metadata.name);
      }
    for (const r of RBAC_ROWS) if (!["*", "-"].includes(r.namespace)) namespaces.add(r.namespace);
    const existing = new Set((await core.listNamespace()).items.map((n) => n.metadata!.name!));
    for (const ns of namespaces)
      if (!existing.has(ns)) await core.createNamespace({ body: { metadata: { name: ns } } });
  });

  afterAll(async () => {
    await cp?.stop();
    if (warnings.length) console.warn(warnings.join("\n"));
  });

  async function dryRunApply(o: KubeObject): Promise<void> {
    const body = structuredClone(o) as KubernetesObject;
    try {
      await withRawBody(body, () => objects.create(body, undefined, "All", "fastfence-test"));
    } catch (err) {
      if (!(err instanceof ApiException) || err.code !== 409)
        throw new Error(`dry-run create ${objectId(o)}: ${errText(err)}`);
      try {
        await withRawBody(body, () =>
          objects.patch(body, undefined, "All", "fastfence-test", undefined, PatchStrategy.MergePatch),
        );
      } catch (err2) {
        throw new Error(`dry-run patch ${objectId(o)}: ${errText(err2)}`);
      }
    }
  }

  for (const name of [...OVERLAYS, "examples", "monitoring"]) {
    it(`${name}: every object applies with server-side dry-run`, async () => {
      const list = [...RENDERED[name]!].sort(applyOrder);
      expect(list.length).toBeGreaterThan(0);
      const failures: string[] = [];
      for (const o of list) {
        try {
          await dryRunApply(o);
        } catch (err) {
          failures.push(String(err instanceof Error ? err.message : err));
        }
      }
      expect(failures).toEqual([]);
    });
  }

  it("monitoring: the component renders onto each overlay, scraping pods the overlay has", () => {
    for (const overlay of OVERLAYS) {
      const base = RENDERED[overlay]!;
      const all = renderWith(
        [join(ROOT, "knative/overlays", overlay)],
        [...WITH_COMPONENTS[overlay], MONITORING],
      );
      expect(all.length).toBe(base.length + RENDERED.monitoring!.length);
      const components = new Set(
        base.flatMap((o) => {
          const t = (o.spec as { template?: { metadata?: { labels?: Record<string, string> } } })?.template;
          return t?.metadata?.labels?.["app.kubernetes.io/component"] ?? [];
        }),
      );
      for (const pm of all.filter((o) => o.kind === "PodMonitor")) {
        const sel = (pm.spec as { selector: { matchLabels?: Record<string, string> } }).selector;
        const want = sel.matchLabels?.["app.kubernetes.io/component"];
        if (want) expect(components).toContain(want);
      }
      expect(components).toEqual(
        new Set(["detect", "confirm", "fence", "remediate-workloads", "recover", "source"]),
      );
    }
  });

  // On 6f7efbe no overlay had an EventPolicy: any identity could post to the Broker (with
  // OIDC on) and the EventPolicy CRD was not among the vendored ones.
  it("eventing: the Broker and its dead-letter sink admit only fastfence's own senders (EventPolicy)", async () => {
    const eventPolicyCrd = await ext.readCustomResourceDefinition({
      name: "eventpolicies.eventing.knative.dev",
    });
    expect(eventPolicyCrd.spec.versions.map((v) => v.name)).toContain("v1alpha1");
    for (const overlay of OVERLAYS) {
      const objs = RENDERED[overlay]!;
      const broker = objs.find((o) => o.kind === "Broker");
      if (!broker) continue;
      const policies = objs.filter((o) => o.kind === "EventPolicy");
      expect(policies.length, overlay).toBe(1);
      const spec = policies[0]!.spec as {
        to: { ref: { kind: string; name: string } }[];
        from: {
          ref?: { apiVersion: string; kind: string; name: string; namespace?: string };
          sub?: string;
        }[];
      };
      expect(policies[0]!.metadata.namespace).toBe(NAMESPACE);
      expect(spec.to.map((t) => `${t.ref.kind}/${t.ref.name}`).sort()).toEqual([
        `Broker/${broker.metadata.name}`,
        "KafkaSink/fastfence-dead-letter",
      ]);
      // Only the overlay's own senders: the bridge KafkaSource and the Triggers whose
      // subscribers' replies go back into the Broker, and recover's own ServiceAccount (its
      // extra events to K_SINK); never a wildcard subject.
      expect(spec.from.filter((f) => f.sub).map((f) => f.sub)).toEqual([
        `system:serviceaccount:${NAMESPACE}:fastfence-recover`,
      ]);
      const senders = objs
        .filter(
          (o) => (o.kind === "KafkaSource" || o.kind === "Trigger") && o.metadata.namespace === NAMESPACE,
        )
        .map((o) => `${o.kind}/${o.metadata.name}`)
        .sort();
      const refs = spec.from.flatMap((f) => (f.ref ? [f.ref] : []));
      expect(refs.map((r) => `${r.kind}/${r.name}`).sort()).toEqual(senders);
      expect(refs.every((r) => r.namespace === NAMESPACE)).toBe(true);
    }
  });

  it("examples: the NodeHealthCheck references a template kind that exists with its remediation kind", () => {
    const nhc = RENDERED.examples!.find((o) => o.kind === "NodeHealthCheck")!;
    const ref = (nhc.spec as { remediationTemplate: { kind: string; name: string; namespace: string } })
      .remediationTemplate;
    expect(ref.kind.endsWith("Template")).toBe(true);
    const base = RENDERED.openshift!;
    const kinds = RENDERED.crds!.filter((o) => o.kind === "CustomResourceDefinition").map(
      (o) => (o.spec as { names: { kind: string } }).names.kind,
    );
    expect(kinds).toContain(ref.kind);
    expect(kinds).toContain(ref.kind.slice(0, -"Template".length));
    expect(
      base.some(
        (o) => o.kind === ref.kind && o.metadata.name === ref.name && o.metadata.namespace === ref.namespace,
      ),
    ).toBe(true);
  });

  for (const overlay of OVERLAYS) {
    it(`${overlay}: the API server confirms the RBAC table of docs/rbac.md`, async () => {
      const rbacObjects = RENDERED[overlay]!.filter(isRbac).sort(applyOrder);
      const created: KubeObject[] = [];
      try {
        for (const o of rbacObjects) {
          try {
            await withRawBody(o, () => objects.create(structuredClone(o) as KubernetesObject));
            created.push(o);
          } catch (err) {
            throw new Error(`create ${objectId(o)}: ${errText(err)}`);
          }
        }
        const mismatches: string[] = [];
        const rows = RBAC_ROWS.filter((r) => r.overlays.includes("all") || r.overlays.includes(overlay));
        for (const row of rows) {
          for (const verb of row.verbs) {
            const review = await authz.createSubjectAccessReview({
              body: {
                spec: {
                  user: `system:serviceaccount:${NAMESPACE}:fastfence-${row.identity}`,
                  groups: [
                    "system:serviceaccounts",
                    `system:serviceaccounts:${NAMESPACE}`,
                    "system:authenticated",
                  ],
                  resourceAttributes: {
                    group: row.group,
                    resource: row.resource,
                    subresource: row.subresource,
                    ...(row.name ? { name: row.name } : {}),
                    verb,
                    ...(row.namespace === "-"
                      ? {}
                      : { namespace: row.namespace === "*" ? "" : row.namespace }),
                  },
                },
              },
            });
            const allowed = review.status?.allowed === true;
            if (allowed !== row.allowed) {
              const res = `${row.group || "core"}/${row.resource}${row.subresource ? "/" + row.subresource : ""}${row.name ? "#" + row.name : ""}`;
              mismatches.push(
                `${row.identity} ${verb} ${res} in ${row.namespace}: table says ${row.allowed}, API server says ${allowed}`,
              );
            }
          }
        }
        expect(mismatches).toEqual([]);
        // And the other way: every rule granted to a fastfence identity is a "yes" row.
        expect(ungrantedByTable(RENDERED[overlay]!, rows)).toEqual([]);
      } finally {
        for (const o of created.reverse()) {
          try {
            await objects.delete(structuredClone(o) as KubernetesObject);
          } catch (err) {
            warnings.push(`cleanup ${objectId(o)}: ${errText(err)}`);
          }
        }
      }
      // rbac is used only to prove the cleanup left no binding behind.
      const left = await rbac.listClusterRoleBinding({
        labelSelector: "app.kubernetes.io/part-of=fastfence",
      });
      expect(left.items).toEqual([]);
    });
  }
});

type Rule = { apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[] };

/** Rules the manifests grant to fastfence ServiceAccounts that no "yes" row of the table names. */
function ungrantedByTable(list: KubeObject[], rows: RbacRow[]): string[] {
  const roles = new Map<string, Rule[]>();
  for (const o of list)
    if (o.kind === "Role" || o.kind === "ClusterRole")
      roles.set(
        `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`,
        (o as { rules?: Rule[] }).rules ?? [],
      );
  const out: string[] = [];
  for (const b of list.filter((o) => o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding")) {
    const ref = (b as unknown as { roleRef: { kind: string; name: string } }).roleRef;
    const ns = b.kind === "RoleBinding" ? b.metadata.namespace! : "";
    const rules = roles.get(`${ref.kind}/${ref.kind === "Role" ? ns : ""}/${ref.name}`);
    if (!rules) continue; // a platform ClusterRole (e.g. OpenShift's SCC roles), not ours
    const subjects =
      (b as { subjects?: { kind: string; name: string; namespace?: string }[] }).subjects ?? [];
    for (const s of subjects) {
      if (s.kind !== "ServiceAccount" || s.namespace !== NAMESPACE || !s.name.startsWith("fastfence-"))
        continue;
      const identity = s.name.slice("fastfence-".length);
      for (const r of rules)
        for (const g of r.apiGroups ?? [])
          for (const res of r.resources ?? [])
            for (const verb of r.verbs) {
              const [resource, sub = ""] = res.split("/");
              const hit = rows.some(
                (row) =>
                  row.allowed &&
                  row.identity === identity &&
                  row.group === g &&
                  row.resource === resource &&
                  row.subresource === sub &&
                  (r.resourceNames?.length ? r.resourceNames.includes(row.name ?? "") : !row.name) &&
                  row.verbs.includes(verb) &&
                  (ns ? row.namespace === ns : row.namespace === "-" || row.namespace === "*"),
              );
              if (!hit)
                out.push(
                  `${identity}: ${verb} ${g || "core"}/${res} in ${ns || "(cluster)"} is granted but not in docs/rbac.md`,
                );
            }
    }
  }
  return out;
}
