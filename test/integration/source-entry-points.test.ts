// Needs real kube-apiserver, packed artifact: each event-source entry point started as shipped.
// Needs a real kube-apiserver: the event source reads its FencingPolicy at start. One
// environment (a lab node agent's event-source environment, lab/agent-env.ts labSourceEnv,
// with an emulated watchdog) is given to each way the event source is started — the shipped
// CLI (`fastfence source`, a process run from the unpacked artifact), the harness's and the
// lab's (harness/shipped-app.ts startSourceFromEnv on the artifact's app/) — and the
// effective settings each logs at start must be deep-equal: no entry point adds, drops or
// changes a setting of its own.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { applyObjects, shippedAccessControl } from "../../harness/env/apply.ts";
import { sharedControlPlane } from "../../harness/env/shared-control-plane.ts";
import { makeTempDir } from "../../harness/env/registry.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { createFencingPolicy } from "../../harness/kube/fencing-policy.ts";
import { shippedApp, startSourceFromEnv } from "../../harness/shipped-app.ts";
import { createLogger } from "../../infra/log.ts";
import { labSourceEnv } from "../../lab/agent-env.ts";

const env = withEnv(async (scope) => {
  const cp = scope.add(await sharedControlPlane());
  await applyObjects(cp.kubeConfig, shippedAccessControl());
  await createFencingPolicy(cp.kubeConfig.makeApiClient(CustomObjectsApi), {});
  const dir = makeTempDir("entry-points");
  // Kafka credentials as Secret mounts would hold them; nothing listens at the brokers'
  // address, which only matters after the settings are logged.
  mkdirSync(join(dir, "kafka"), { recursive: true });
  writeFileSync(join(dir, "kafka/ca.crt"), "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n");
  writeFileSync(join(dir, "kafka/password"), "not-a-real-password");
  const e: Record<string, string> = {
    ...labSourceEnv({
      node: "node-a",
      ip: "127.0.0.1",
      dir,
      kubeconfig: cp.kubeconfigPath,
      brokers: "127.0.0.1:4",
      brokerCount: 3,
      namespace: "fastfence-system",
      metricsPort: 0,
      watchdog: {
        devicePath: join(dir, "watchdog"),
        timeoutMs: 10_000,
        renewGraceMs: 3000,
        petIntervalMs: 1000,
      },
      artifact: "",
    }),
    FASTFENCE_KAFKA_CA_FILE: join(dir, "kafka/ca.crt"),
    FASTFENCE_KAFKA_PASSWORD_FILE: join(dir, "kafka/password"),
    FASTFENCE_LOG_LEVEL: "info",
  };
  return { cp, e };
});

const SETTINGS = "event source: effective settings";

/** The settings line of `fastfence source` run from the artifact with exactly `e` (and a kubeconfig). */
async function cliSettings(e: Record<string, string>): Promise<unknown> {
  const { dir } = await shippedApp();
  const child = spawn(
    process.execPath,
    ["--disable-warning=ExperimentalWarning", join(dir, "cli/main.ts"), "source"],
    {
      env: {
        ...e,
        KUBECONFIG: env().cp.kubeconfigPath,
        HOME: "/tmp",
        PATH: process.env.PATH ?? "/usr/bin:/bin",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no settings line in 30 s:\n${out}`)), 30_000);
      const take = (b: Buffer) => {
        out += b.toString();
        for (const line of out.split("\n")) {
          if (!line.includes(SETTINGS)) continue;
          clearTimeout(timer);
          resolve((JSON.parse(line) as { settings: unknown }).settings);
        }
      };
      child.stdout.on("data", take);
      child.stderr.on("data", take);
      child.on("close", (code) => reject(new Error(`fastfence source exited ${code}:\n${out}`)));
    });
  } finally {
    child.kill("SIGKILL");
  }
}

/** The settings line of an in-process start (the harness's and the lab's path), from its log. */
async function inProcessSettings(e: Record<string, string>): Promise<unknown> {
  const { app } = await shippedApp();
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const src = await startSourceFromEnv(
    app,
    e,
    env().cp.kubeConfig,
    createLogger("event-source", { level: "info", destination: sink }),
  );
  try {
    const line = lines.find((l) => l.includes(SETTINGS));
    expect(line, lines.join("")).toBeDefined();
    return (JSON.parse(line!) as { settings: unknown }).settings;
  } finally {
    await src.stop();
  }
}

describe("the event source's entry points", () => {
  it("log the same effective settings from one environment", async () => {
    const { e } = env();
    const cli = await cliSettings(e);
    const inProcess = await inProcessSettings(e);
    expect(inProcess).toEqual(cli);
    // The environment's choices are really in force (a setting dropped everywhere would also be equal).
    expect(cli).toMatchObject({
      source: {
        replica: "source-node-a",
        node: "node-a",
        heartbeatNamespace: "fastfence-system",
        watchdog: { renewGraceMs: 3000, petIntervalMs: 1000 },
      },
      kafka: { brokers: "127.0.0.1:4", clientId: "fastfence-source-source-node-a", tls: true },
    });
  });
});
