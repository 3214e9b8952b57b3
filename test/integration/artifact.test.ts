// Needs real packed artifact, kube-apiserver, kustomize, mount namespaces: run as the image runs.
// Needs root, mount namespaces and a real kube-apiserver: runs every command the shipped
// manifests run and every command docs/cli.md lists from the packed artifact, unpacked with
// production dependencies only, as the image runs them (checkout hidden, root read-only,
// HOME=/tmp, uid 1001, reads allowed only inside the artifact and its config dir).
// Each must start far enough to parse its configuration (run/source: log their effective
// settings, which they do after every module of their start-up is loaded; the others: reach
// the API server or their own clear error), never with a module resolution or permission
// error; and an artifact missing any product folder fails, naming the folder.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ARTIFACT_ROOT, ensureArtifact, PRODUCT_FOLDERS } from "../../harness/artifact.ts";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { ROOT } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { freePort } from "../../harness/env/ports.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { createFencingPolicy } from "../../harness/kube/fencing-policy.ts";
import { KNATIVE_DIR, render, type KubeObject } from "../../harness/kustomize.ts";
import { stageNames } from "../../functions/registry.ts";
import { ARTIFACT_FAULTS, inTurns, runSandboxed, type SandboxRun } from "./artifact-sandbox.ts";

const b64 = (path: string) => readFileSync(path).toString("base64");
/** Nothing listens here: Kafka connections are refused at once. */
const NO_KAFKA = "127.0.0.1:4";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  await applyObjects(cp.kubeConfig, shippedAccessControl());
  await createFencingPolicy(cp.kubeConfig.makeApiClient(CustomObjectsApi), {});
  // The sandbox hides the checkout and /tmp: its kubeconfig lives beside the artifacts, with
  // the credentials inline (as a mounted kubeconfig or in-cluster config would be).
  const configDir = join(ARTIFACT_ROOT, `config-${process.pid}`);
  mkdirSync(configDir, { recursive: true, mode: 0o755 });
  scope.add({ stop: async () => rmSync(configDir, { recursive: true, force: true }) });
  const kubeconfig = join(configDir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      `- cluster: {server: "${cp.server}", certificate-authority-data: ${b64(cp.pki.caCert)}}`,
      "  name: test",
      "users:",
      `- user: {client-certificate-data: ${b64(cp.pki.adminCert)}, client-key-data: ${b64(cp.pki.adminKey)}}`,
      "  name: admin",
      "contexts:",
      "- context: {cluster: test, user: admin}",
      "  name: test",
      "current-context: test",
      "",
    ].join("\n"),
    { mode: 0o644 },
  );
  const artifact = ensureArtifact();
  return { cp, configDir, kubeconfig, artifact };
});

/** The environment every sandboxed command gets: the API server, no Kafka, this node. */
function baseEnv(): Record<string, string> {
  return {
    KUBECONFIG: env().kubeconfig,
    FASTFENCE_KAFKA_BROKERS: NO_KAFKA,
    FASTFENCE_KAFKA_INSECURE: "true",
    FASTFENCE_NODE_NAME: "node-a",
    FASTFENCE_POD_NAME: "fastfence-test-pod",
    FASTFENCE_LOG_LEVEL: "info",
  };
}

interface Container {
  name: string;
  args?: string[];
  image?: string;
  env?: { name: string; value?: string }[];
}

/** Every fastfence container of a rendered overlay, with where it came from. */
function shippedContainers(objects: KubeObject[]): { where: string; c: Container }[] {
  const out: { where: string; c: Container }[] = [];
  for (const o of objects) {
    const spec = (o as { spec?: { template?: { spec?: { containers?: Container[] } } } }).spec;
    for (const c of spec?.template?.spec?.containers ?? [])
      if (c.image?.includes("fastfence")) out.push({ where: `${o.kind}/${o.metadata.name}`, c });
  }
  return out;
}

/** Settings that name a Secret mount: the sandbox has none, so they are left out (plaintext Kafka above). */
const MOUNTED = /^FASTFENCE_KAFKA_(CA_FILE|USERNAME|PASSWORD_FILE|CERT_FILE|KEY_FILE)$/;

/** A container's literal settings, its ports swapped for free ones (the sandbox shares the network). */
async function asShipped(c: Container): Promise<{ args: string[]; env: Record<string, string> }> {
  const args = [...(c.args ?? [])];
  for (let i = 0; i < args.length - 1; i++)
    if (args[i] === "--http" || args[i] === "--metrics") args[i + 1] = String(await freePort());
  const literal = Object.fromEntries(
    (c.env ?? [])
      .filter((e) => e.value !== undefined && !MOUNTED.test(e.name))
      .map((e) => [e.name, e.value!]),
  );
  return { args, env: { ...literal, ...baseEnv() } };
}

function expectClean(r: SandboxRun, what: string): void {
  expect(r.output, `${what}: fastfence ${r.args.join(" ")}\n${r.output}`).not.toMatch(ARTIFACT_FAULTS);
}

const SETTINGS = /"msg":"(stage|event source): effective settings"/;

describe("the packed artifact runs what ships", () => {
  it("has every product folder and no checkout-only folder", () => {
    const { artifact } = env();
    for (const f of PRODUCT_FOLDERS)
      expect(readFileSync(join(artifact.dir, "package.json"), "utf8")).toContain(f);
    const entries = readFileSync(join(ROOT, "package.json"), "utf8");
    for (const f of ["lab", "harness", "bench", "test", "tools", "scripts"])
      expect(JSON.parse(entries).files, `package.json files must not ship ${f}/`).not.toContain(`${f}/`);
  });

  it("every container of every overlay starts from the artifact", async () => {
    // Containers that differ only by overlay run once.
    const seen = new Set<string>();
    const containers = ["openshift", "vanilla"]
      .flatMap((overlay) =>
        shippedContainers(render(join(KNATIVE_DIR, "overlays", overlay))).map((x) => ({
          ...x,
          where: `${overlay}: ${x.where}`,
        })),
      )
      .filter(({ c }) => {
        const key = JSON.stringify([c.args, c.env]);
        return !seen.has(key) && !!seen.add(key);
      });
    expect(containers.length).toBeGreaterThanOrEqual(stageNames().length);
    const runs = await inTurns(containers, 2, async ({ where, c }) => {
      const { args, env: e } = await asShipped(c);
      const r = await runSandboxed(env().artifact.dir, args, {
        env: e,
        configDir: env().configDir,
        waitFor: SETTINGS,
      });
      return { where, r };
    });
    for (const { where, r } of runs) {
      expectClean(r, where);
      expect(
        r.matched,
        `${where} (${r.args.join(" ")}) never logged its effective settings:\n${r.output}`,
      ).toBe(true);
    }
  });

  it("every registered stage starts with `run <stage> --kafka`", async () => {
    const runs = await inTurns(stageNames(), 2, (stage) =>
      runSandboxed(env().artifact.dir, ["run", stage, "--kafka"], {
        env: baseEnv(),
        configDir: env().configDir,
        waitFor: SETTINGS,
      }),
    );
    for (const r of runs) {
      expectClean(r, r.args[1]!);
      expect(r.matched, `run ${r.args[1]}:\n${r.output}`).toBe(true);
    }
  });

  it("every command docs/cli.md lists starts and fails, if at all, with its own clear error", async () => {
    // The commands table: the rows after its "| command |" header, up to the first blank line.
    const lines = readFileSync(join(ROOT, "docs/cli.md"), "utf8").split("\n");
    const head = lines.findIndex((l) => l.startsWith("| command |"));
    const end = lines.indexOf("", head);
    const table = lines
      .slice(head + 2, end)
      .map((l) => /^\| `([a-z-]+)/.exec(l)?.[1])
      .filter((c): c is string => !!c);
    // How each is run here, and the exit codes that mean it got past its configuration.
    const runs: Record<string, { args: string[]; codes: number[]; output?: RegExp }> = {
      run: { args: ["run", "detect", "--kafka"], codes: [], output: SETTINGS },
      source: { args: ["source"], codes: [], output: SETTINGS },
      events: { args: ["events", "catalog", "-o", "json"], codes: [0], output: /fastfence\./ },
      trace: { args: ["trace", "node-a", "-o", "json"], codes: [0, 1] },
      bmc: { args: ["bmc", "status", "--node", "node-a"], codes: [1, 2, 3], output: /node-a/ },
      lab: { args: ["lab", "status"], codes: [1], output: /developer command/ },
      pause: { args: ["pause", "node-a", "--reason", "artifact-test"], codes: [3], output: /node-a/ },
      resume: { args: ["resume", "node-a"], codes: [3], output: /node-a/ },
      fence: { args: ["fence", "node-a", "--reason", "artifact-test"], codes: [3], output: /node-a/ },
      "release-slot": {
        args: ["release-slot", "nf-none", "--reason", "artifact-test"],
        codes: [1, 3],
        output: /nf-none/,
      },
      completion: { args: ["completion", "bash"], codes: [0], output: /__complete/ },
      "stack-check": { args: ["stack-check"], codes: [1], output: /developer command/ },
      version: { args: ["version"], codes: [0], output: /fastfence 0\./ },
    };
    expect(table.length).toBeGreaterThan(5);
    for (const cmd of new Set(table)) {
      const how = runs[cmd];
      expect(how, `docs/cli.md lists "${cmd}": say here how to run it`).toBeDefined();
      const r = await runSandboxed(env().artifact.dir, how!.args, {
        env: baseEnv(),
        configDir: env().configDir,
        ...(how!.codes.length === 0 ? { waitFor: how!.output! } : {}),
        timeoutMs: 30_000,
      });
      expectClean(r, cmd);
      if (how!.codes.length) expect(how!.codes, `${cmd} exited ${r.code}:\n${r.output}`).toContain(r.code);
      else expect(r.matched, `${cmd}:\n${r.output}`).toBe(true);
      if (how!.output) expect(r.output, cmd).toMatch(how!.output);
    }
  });

  it("bin/fastfence and the kubectl plugin run the artifact with the node on PATH", async () => {
    for (const entry of ["fastfence", "kubectl-fastfence"] as const) {
      const r = await runSandboxed(env().artifact.dir, ["version"], { configDir: env().configDir, entry });
      expect(r.code, `bin/${entry}: ${r.output}`).toBe(0);
      expect(r.output).toMatch(/fastfence 0\./);
    }
  });

  it("an artifact without any one product folder fails, naming the folder", async () => {
    for (const folder of PRODUCT_FOLDERS) {
      const art = ensureArtifact({ omit: [folder] });
      const tries = [["run", "detect", "--kafka"], ["source"]].map((args) =>
        runSandboxed(art.dir, args, { env: baseEnv(), configDir: env().configDir, waitFor: SETTINGS }),
      );
      const runs = [
        ...(await Promise.all(tries)),
        await runSandboxed(art.dir, ["version"], {
          configDir: env().configDir,
          entry: "fastfence",
        }),
      ];
      const failed = runs.filter((r) => !r.matched && r.code !== 0);
      expect(failed.length, `without ${folder}/ every command still started`).toBeGreaterThan(0);
      expect(
        failed.some((r) => r.output.includes(`/${folder}/`)),
        `without ${folder}/ no failure names it:\n${failed.map((r) => r.output).join("\n")}`,
      ).toBe(true);
    }
  });
});
