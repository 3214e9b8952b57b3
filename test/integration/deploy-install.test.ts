// Needs real kube-apiserver, kubectl, kustomize: the documented install steps run as written.
// make test-deploy: the documented install, for real. For each platform it takes the run's
// shared kube-apiserver, reset to its state right after start, and gives it only the
// prerequisites' CRDs (their operators, controllers and webhooks do not run) and the
// namespaces that platform has before fastfence, then runs
// the steps its doc marks (harness/install-doc.ts), in the doc's order, with the real
// kustomize (inside kubectl) and the real kubectl (also as `oc`): the commands, the files
// they name, and on OpenShift every YAML block of the page. The first error the API server
// returns fails the test. Where a step waits for an operator, the test writes what that
// operator would have written (the Strimzi Secrets) and nothing else. Afterwards the
// cluster holds no namespace the doc did not create, and every object the install
// kustomization renders. The upstream cluster also takes metal3's optional Component once
// metal3 is installed. It only talks to the throwaway control plane of the test run.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, ROOT, THIRD_PARTY_CRDS, makeTempDir, removeTempDir } from "../../harness/env/index.ts";
import { sharedControlPlane, type SharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { installSteps, type InstallStep } from "../../harness/install-doc.ts";
import { parseYamlDocs, render, type KubeObject } from "../../harness/kustomize.ts";

interface Platform {
  doc: string;
  applyEveryYaml: boolean;
  /** third_party/crds folders: what the prerequisite operators (and the platform) install. */
  crds: string[];
  /** Namespaces the cluster has before fastfence (the platform's, the operators' own). */
  namespaces: string[];
}

const KNATIVE_AND_STRIMZI = [
  "serving.knative.dev",
  "eventing.knative.dev",
  "sources.knative.dev",
  "kafka.strimzi.io",
];
const PLATFORMS: Record<string, Platform> = {
  vanilla: {
    doc: "docs/deploy-knative.md",
    applyEveryYaml: false,
    crds: KNATIVE_AND_STRIMZI,
    namespaces: ["knative-serving", "knative-eventing"], // Knative's own install makes them
  },
  openshift: {
    doc: "docs/deploy-openshift.md",
    applyEveryYaml: true,
    crds: [
      "operators.coreos.com",
      "config.openshift.io",
      "machine.openshift.io",
      // what the Subscriptions of the doc install: OpenShift Serverless, Streams for Apache Kafka
      "operator.knative.dev",
      "operator.serverless.openshift.io",
      ...KNATIVE_AND_STRIMZI,
    ],
    namespaces: ["openshift-operators", "openshift-marketplace", "openshift-machine-api"],
  },
};
const SYSTEM_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];

for (const [name, platform] of Object.entries(PLATFORMS)) {
  // One install in steps, in the order written also under --sequence.shuffle: the steps are
  // applied, then what they created is checked, then metal3's Component goes on top.
  describe(`deploy: ${platform.doc} installs ${name} for real`, { shuffle: false }, () => {
    const markdown = readFileSync(join(ROOT, platform.doc), "utf8");
    const steps = installSteps(markdown, { applyEveryYaml: platform.applyEveryYaml });
    let cp: SharedControlPlane;
    let work: string;
    let env: NodeJS.ProcessEnv;
    const kubectl = (args: string[], input?: string) =>
      execFileSync(join(BIN, "kubectl"), args, { cwd: work, env, encoding: "utf8", input, stdio: "pipe" });

    beforeAll(async () => {
      cp = await sharedControlPlane();
      work = makeTempDir(`deploy-install-${name}-`);
      symlinkSync(ROOT, join(work, "fastfence")); // the checkout, beside the user's own files
      const bin = join(work, ".bin");
      mkdirSync(bin);
      writeFileSync(join(bin, "oc"), `#!/bin/sh\nexec "${join(BIN, "kubectl")}" "$@"\n`);
      chmodSync(join(bin, "oc"), 0o755);
      env = {
        ...process.env,
        PATH: `${bin}:${BIN}:${process.env.PATH}`,
        KUBECONFIG: cp.kubeconfigPath,
        KUBECACHEDIR: join(work, ".kube-cache"),
      };
      // The platform before fastfence: prerequisite CRDs (as kubectl reads them) and namespaces.
      for (const dir of platform.crds) kubectl(["apply", "--server-side", "-f", join(THIRD_PARTY_CRDS, dir)]);
      // kubectl wait fails at once on a CRD the API server has not given a status yet
      // (".status.conditions accessor error"): asked again, as a user would.
      for (let attempt = 1; ; attempt++) {
        try {
          kubectl(["wait", "--for", "condition=established", "--timeout=60s", "crd", "--all"]);
          break;
        } catch (err) {
          if (attempt >= 5) throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
      for (const ns of platform.namespaces) kubectl(["create", "namespace", ns]);
    });

    afterAll(async () => {
      await cp?.stop();
      if (work) {
        unlinkSync(join(work, "fastfence")); // the link only, never the checkout it points at
        removeTempDir(work);
      }
    });

    /** What the operator a step waits for would have written by then. */
    function playOperator(operator: string): void {
      if (operator !== "strimzi") throw new Error(`no stand-in for operator ${operator}`);
      kubectl([
        "-n",
        "fastfence-kafka",
        "create",
        "secret",
        "generic",
        "fastfence-kafka-cluster-ca-cert",
        `--from-file=ca.crt=${cp.pki.caCert}`,
      ]);
      kubectl([
        "-n",
        "fastfence-system",
        "create",
        "secret",
        "generic",
        "fastfence-knative-eventing",
        "--from-literal=password=written-by-the-user-operator",
      ]);
    }

    function runStep(step: InstallStep): void {
      try {
        if (step.kind === "run")
          execFileSync("bash", ["-euo", "pipefail", "-c", step.script], { cwd: work, env, stdio: "pipe" });
        else if (step.kind === "file") {
          mkdirSync(dirname(join(work, step.path)), { recursive: true });
          writeFileSync(join(work, step.path), step.text);
        } else if (step.kind === "apply") kubectl(["apply", "--server-side", "-f", "-"], step.yaml);
        else playOperator(step.name);
      } catch (err) {
        const e = err as { stderr?: Buffer | string; message: string };
        throw new Error(
          `${platform.doc}:${step.line} (${step.kind}): ${String(e.stderr ?? "") || e.message}`,
          {
            cause: err,
          },
        );
      }
    }

    it("marks the install steps in order: CRDs, established, the install kustomization, its apply", () => {
      const kinds = steps.map((s) => s.kind);
      expect(kinds).toContain("file");
      expect(kinds.filter((k) => k === "operator")).toEqual(["operator"]);
      const scripts = steps.map((s) => (s.kind === "run" ? s.script : ""));
      const crds = scripts.findIndex((s) => /apply --server-side -k fastfence\/knative\/base\/crds/.test(s));
      const established = scripts.findIndex((s) => /wait --for condition=established/.test(s));
      const file = kinds.indexOf("file");
      const install = scripts.findIndex((s) => /apply --server-side -k fastfence-install\b/.test(s));
      expect(crds).toBeGreaterThanOrEqual(0);
      expect(crds).toBeLessThanOrEqual(established);
      expect(established).toBeLessThan(file);
      expect(file).toBeLessThan(install);
    });

    it("every step applies without an error, in the documented order", () => {
      for (const step of steps) runStep(step);
    });

    it("created no namespace the doc does not create, and every object the install renders", () => {
      const rendered = render(join(work, "fastfence-install"));
      const docNamespaces = steps.flatMap((s) =>
        s.kind === "apply"
          ? (parseYamlDocs(s.yaml) as KubeObject[])
              .filter((o) => o.kind === "Namespace")
              .map((o) => o.metadata.name)
          : [],
      );
      const want = new Set([
        ...SYSTEM_NAMESPACES,
        ...platform.namespaces,
        ...docNamespaces,
        ...rendered.filter((o) => o.kind === "Namespace").map((o) => o.metadata.name),
      ]);
      const got = kubectl(["get", "namespaces", "-o", "name"])
        .trim()
        .split("\n")
        .map((n) => n.replace(/^namespace\//, ""));
      expect(new Set(got)).toEqual(want);
      // every rendered object is there (kubectl fails on the first missing one)
      const names = kubectl(["get", "-k", "fastfence-install", "-o", "name"]).trim().split("\n");
      expect(names).toHaveLength(rendered.length);
    });

    if (name === "vanilla")
      it("a cluster where metal3 runs takes the optional metal3 Component on top", () => {
        expect(kubectl(["get", "namespaces", "-o", "name"])).not.toContain("baremetal-operator-system");
        // metal3's own install: its CRD and namespace
        kubectl(["apply", "--server-side", "-f", join(THIRD_PARTY_CRDS, "metal3.io")]);
        kubectl(["create", "namespace", "baremetal-operator-system"]);
        const file = join(work, "fastfence-install/kustomization.yaml");
        const text = readFileSync(file, "utf8");
        const enabled = text.replace(
          /# - \.\.\/fastfence\/knative\/components\/metal3/,
          "- ../fastfence/knative/components/metal3",
        );
        expect(enabled).not.toBe(text);
        writeFileSync(file, enabled);
        kubectl(["apply", "--server-side", "-k", "fastfence-install"]);
        const roles = kubectl(["-n", "baremetal-operator-system", "get", "roles", "-o", "name"]);
        expect(roles.trim().split("\n").sort()).toEqual([
          "role.rbac.authorization.k8s.io/fastfence-fence-metal3",
          "role.rbac.authorization.k8s.io/fastfence-recover-metal3",
        ]);
        const runtime = kubectl([
          "-n",
          "fastfence-system",
          "get",
          "configmap",
          "fastfence-runtime",
          "-o",
          "json",
        ]);
        expect(JSON.parse(runtime).data["metal3.namespaces"]).toBe("baremetal-operator-system");
      });
  });
}
