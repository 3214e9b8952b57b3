// Needs real kube-apiserver, Kafka, kubectl: kubectl runs the plugin as each context's identity.
// Needs a real kube-apiserver: what is tested is that the real `kubectl` binary finds
// bin/kubectl-fastfence on PATH and passes `--context`/`-n` through to it, that the command
// then writes to (and reads Events from) exactly the cluster and identity of that context,
// and that another context of the same kubeconfig is never used: only a real API server
// authenticates the identities and refuses the one without RBAC.
// Setup: etcd + kube-apiserver (admin), one Kafka broker (trace reads its topics first), a
// Node object node-b, and a kubeconfig with three contexts: `real` (admin), `stranger`
// (a user with no RBAC, same server) and `gone` (a closed loopback port), `gone` current.
// kubectl's plugin completion (kubectl_complete-fastfence) runs through `kubectl __complete`.
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { EXIT } from "../../cli/exit-codes.ts";
import { PAUSE_ANNOTATION } from "../../core/planned.ts";
import { BROKER_TOPIC } from "../../events/catalog.ts";
import { kafkaUserName } from "../../events/kafka-acls.ts";
import { createKafkaBus } from "../../infra/bus/kafka-bus.ts";
import { ROOT } from "../../harness/env/index.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { sharedKafka } from "../../harness/env/shared-kafka.ts";
import { makeTempDir, removeTempDir } from "../../harness/env/registry.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { kwokNodeObject } from "../../harness/kube/node.ts";

const run = promisify(execFile);
const KUBECTL = join(ROOT, ".cache/bin/kubectl");
const GONE = "https://127.0.0.1:1";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  const kafka = scope.add(await sharedKafka());
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNode({ body: kwokNodeObject("node-b", "b0000000-bbbb") });
  const dir = makeTempDir("kubectl-plugin");
  scope.add({ stop: async () => removeTempDir(dir) });

  // One kubeconfig, three contexts; the current one points at nothing.
  const admin = new KubeConfig();
  admin.loadFromFile(cp.kubeconfigPath);
  const stranger = new KubeConfig();
  stranger.loadFromFile(await cp.makeUserKubeconfig("stranger", []));
  const adminUser = admin.getCurrentUser()!;
  const strangerUser = stranger.getCurrentUser()!;
  const cluster = admin.getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { ...cluster, name: "real" },
      { ...cluster, name: "gone", server: GONE },
    ],
    users: [
      { ...adminUser, name: "admin" },
      { ...strangerUser, name: "stranger" },
    ],
    contexts: [
      { name: "real", cluster: "real", user: "admin" },
      { name: "stranger", cluster: "real", user: "stranger" },
      { name: "gone", cluster: "gone", user: "admin" },
    ],
    currentContext: "gone",
  });
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, kc.exportConfig());

  const setup = createKafkaBus({
    brokers: kafka.bootstrap,
    clientId: "setup",
    security: kafka.clientSecurity("admin"),
  });
  await setup.ensureTopics([{ topic: BROKER_TOPIC, partitions: 1, replicationFactor: 1 }]);
  await setup.close();
  const sec = kafka.clientSecurity("audit");
  writeFileSync(join(dir, "ca.pem"), sec.ssl!.ca);
  writeFileSync(join(dir, "password"), sec.sasl!.password);
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith("FASTFENCE_") && k !== "KUBECONFIG"),
  );
  const childEnv = {
    ...clean,
    HOME: dir,
    KUBECONFIG: kubeconfig,
    PATH: `${join(ROOT, "bin")}:${join(ROOT, ".cache/bin")}:${process.env.PATH ?? ""}`,
    FASTFENCE_KAFKA_BROKERS: kafka.bootstrap,
    FASTFENCE_KAFKA_CA_FILE: join(dir, "ca.pem"),
    FASTFENCE_KAFKA_USERNAME: kafkaUserName("audit"),
    FASTFENCE_KAFKA_PASSWORD_FILE: join(dir, "password"),
  };
  return { core, childEnv, kubeconfig };
});

/** `kubectl ARGS` as a user's shell runs it; never throws, returns the exit code and output. */
async function kubectl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(KUBECTL, args, { env: env().childEnv, timeout: 90_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

const annotation = async () =>
  (await env().core.readNode({ name: "node-b" })).metadata?.annotations?.[PAUSE_ANNOTATION];

describe("kubectl fastfence", () => {
  it("--context real pauses node-b in that cluster; stranger and gone change nothing", async () => {
    const reason = "BIOS update, CHG-77";
    const paused = await kubectl("fastfence", "--context", "real", "pause", "node-b", "--reason", reason);
    expect(paused.code, paused.stderr).toBe(EXIT.ok);
    expect(paused.stdout).toContain(`fencing of node-b paused: ${reason}`);
    expect(await annotation()).toBe(reason);

    // the same server as a user without RBAC: the API server refuses, naming that user
    const stranger = await kubectl("fastfence", "--context", "stranger", "resume", "node-b");
    expect(stranger.code, stranger.stderr).toBe(EXIT.failed);
    expect(stranger.stderr).toContain("denied by the API server");
    expect(stranger.stderr).toContain('"stranger"');
    // the current context (gone), and --context gone: the closed port is named
    for (const args of [
      ["resume", "node-b"],
      ["--context", "gone", "resume", "node-b"],
    ]) {
      const gone = await kubectl("fastfence", ...args);
      expect(gone.code, gone.stderr).toBe(EXIT.failed);
      expect(gone.stderr).toContain(`no API server answered (${GONE})`);
    }
    expect(await annotation()).toBe(reason);

    const unknown = await kubectl("fastfence", "--context", "nope", "resume", "node-b");
    expect(unknown.code).toBe(EXIT.usage);
    expect(unknown.stderr).toContain("--context nope: no such context");
    expect(unknown.stderr).toContain("real, stranger, gone");

    // the flags after the subcommand work the same
    const resumed = await kubectl("fastfence", "resume", "node-b", "--context=real", "-o", "json");
    expect(resumed.code, resumed.stderr).toBe(EXIT.ok);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ scope: "node", target: "node-b", changed: true });
    expect(await annotation()).toBeUndefined();
  });

  it("--context real -n NS trace node-b: the Kubernetes Events of that cluster join the trace", async () => {
    // Events of its own to read (the cases run in any order): node-b paused, then resumed.
    for (const step of [
      ["pause", "node-b", "--reason", "BIOS update, CHG-77"],
      ["resume", "node-b"],
    ]) {
      const done = await kubectl("fastfence", "--context", "real", ...step);
      expect(done.code, done.stderr).toBe(EXIT.ok);
    }
    const ok = await kubectl(
      "fastfence",
      "--context",
      "real",
      "-n",
      "fastfence-system",
      "trace",
      "node-b",
      "-o",
      "json",
    );
    expect(ok.code, ok.stderr).toBe(EXIT.ok);
    const rows = JSON.parse(ok.stdout) as { type: string; source: string; summary: string }[];
    expect(rows.map((r) => r.type)).toEqual(
      expect.arrayContaining(["k8s-event/NodeFencingPaused", "k8s-event/NodeFencingResumed"]),
    );
    expect(rows.find((r) => r.type === "k8s-event/NodeFencingPaused")?.summary).toContain(
      "BIOS update, CHG-77",
    );

    const gone = await kubectl("fastfence", "--context", "gone", "trace", "node-b");
    expect(gone.code).toBe(EXIT.failed); // no events on Kafka, none from the API
    expect(gone.stderr).toContain(`Kubernetes Events left out`);
    expect(gone.stderr).toContain(GONE);
  });

  it("kubectl's completion asks bin/kubectl_complete-fastfence", async () => {
    const sub = await kubectl("__complete", "fastfence", "pa");
    expect(sub.code, sub.stderr).toBe(0);
    expect(sub.stdout.split("\n")).toContain("pause");
    const ctx = await kubectl("__complete", "fastfence", "--kubeconfig", env().kubeconfig, "--context", "");
    expect(ctx.stdout.split("\n")).toEqual(expect.arrayContaining(["real", "stranger", "gone"]));
    expect(readFileSync(join(ROOT, "package.json"), "utf8")).toContain(
      '"kubectl-fastfence": "bin/kubectl-fastfence"',
    );
  });
});
