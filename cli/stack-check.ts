// `fastfence stack-check`: starts the real test stack (etcd, kube-apiserver,
// controller-manager, scheduler, one kwok node, one Kafka broker, ipmi_sim and
// sushy-tools), prints each part's health, version and start-up time, and stops
// everything. A quick "is this machine ready" check; it needs `make setup` first and
// uses the test harness (harness/env), so it is a developer command, not shipped.
// With -o json|yaml it prints one document at the end and its progress goes to stderr.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { defineCommand, outputHelp, parseCommand } from "./args.ts";
import { EXIT } from "./exit-codes.ts";
import { render } from "./output.ts";

export const STACK_CHECK_ARGS = defineCommand({
  command: "stack-check",
  options: {},
  positionals: 0,
  outputs: ["text", "json", "yaml"],
});

const USAGE = `Usage: fastfence stack-check [-o text|json|yaml]
Starts the test stack (needs make setup), prints each part's health, version and start-up time, stops it.
${outputHelp(STACK_CHECK_ARGS, "text prints a row per part as it starts; json and yaml one document at the end")}
  -h, --help              this help`;

interface Part {
  part: string;
  health: string;
  version: string;
  startupMs?: number;
}

export async function stackCheckCommand(argv: string[]): Promise<number> {
  const args = parseCommand(STACK_CHECK_ARGS, argv);
  if (args.help) return (console.log(USAGE), EXIT.ok);
  const text = args.output === "text";
  const parts: Part[] = [];
  const { VersionApi } = await import("@kubernetes/client-node");
  const envMod = await import("../harness/env/index.ts");
  const { startIpmiSim } = await import("../harness/env/bmc-ipmi-sim.ts");
  const { startSushy } = await import("../harness/env/bmc-sushy.ts");
  const { createKafkaBus } = await import("../infra/bus/kafka-bus.ts");
  const bin = (n: string) => join(envMod.BIN, n);
  const version = (cmd: string, args: string[]) => {
    try {
      return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
        .split("\n")[0]!
        .trim();
    } catch {
      return "unknown";
    }
  };
  const row = (part: string, health: string, ver: string, ms?: number) => {
    parts.push({ part, health, version: ver, ...(ms === undefined ? {} : { startupMs: ms }) });
    if (text)
      console.log(
        `${part.padEnd(26)}${health.padEnd(8)}${ver.padEnd(40)}${ms === undefined ? "" : `${ms} ms`}`,
      );
  };
  const scope = new envMod.EnvScope();
  let error: string | undefined;
  try {
    if (text) console.log(`${"PART".padEnd(26)}${"HEALTH".padEnd(8)}${"VERSION".padEnd(40)}START-UP`);
    let t = Date.now();
    const cp = scope.add(await envMod.startControlPlane({ controllerManager: true, scheduler: true }));
    const v = await cp.kubeConfig.makeApiClient(VersionApi).getCode();
    row(
      "etcd",
      "ok",
      version(bin("etcd"), ["--version"]).replace(/^etcd Version: /, "etcd "),
      cp.timings.etcd,
    );
    row(
      "kube-apiserver",
      "ok",
      `Kubernetes ${v.gitVersion}`,
      cp.timings.apiserver ?? cp.timings["kube-apiserver"],
    );
    row(
      "kube-controller-manager",
      "ok",
      v.gitVersion,
      cp.timings.controllerManager ?? cp.timings["kube-controller-manager"],
    );
    row("kube-scheduler", "ok", v.gitVersion, cp.timings.scheduler ?? cp.timings["kube-scheduler"]);
    t = Date.now();
    scope.add(await envMod.startKwokNodes(cp, ["check-node"]));
    row(
      "kwok (1 node, Ready)",
      "ok",
      version(bin("kwok"), ["--version"]).replace(/^kwok version (\S+).*/, "kwok $1"),
      Date.now() - t,
    );
    t = Date.now();
    const kafka = scope.add(await envMod.startKafka({ brokers: 1 }));
    const bus = createKafkaBus({
      brokers: kafka.bootstrap,
      clientId: "stack-check",
      security: kafka.clientSecurity("admin"),
    });
    await bus.ensureTopics([{ topic: "stack-check", partitions: 1, replicationFactor: 1 }]);
    await bus.close();
    row(
      "kafka (KRaft, 1 broker)",
      "ok",
      `Apache Kafka ${version("cat", [join(envMod.CACHE, "kafka", "VERSION")])}`,
      Date.now() - t,
    );
    t = Date.now();
    const ipmi = scope.add(await startIpmiSim());
    row(
      "ipmi_sim",
      "ok",
      version("dpkg-query", ["-W", "-f=${Version}", "openipmi"]).replace(/^/, "OpenIPMI "),
      Date.now() - t,
    );
    void ipmi;
    t = Date.now();
    const sushy = scope.add(await startSushy());
    const r = await fetch(`${sushy.url}/redfish/v1/Systems`, {
      headers: {
        authorization: `Basic ${Buffer.from(`${sushy.username}:${sushy.password}`).toString("base64")}`,
      },
    });
    row(
      "sushy-tools",
      r.ok ? "ok" : `HTTP ${r.status}`,
      `sushy-tools ${version(join(envMod.CACHE, "venv/bin/python"), ["-c", "import importlib.metadata as m; print(m.version('sushy-tools'))"])}`,
      Date.now() - t,
    );
    for (const [tool, args] of [
      ["ipmitool", ["-V"]],
      ["fence_ipmilan", ["--version"]],
      ["kcat", ["-V"]],
    ] as const)
      row(tool, "ok", version(tool, [...args]), undefined);
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
    console.error(`stack-check failed: ${error}`);
  } finally {
    await scope.stopAll();
    (text ? console.log : console.error)("stopped every part of the stack");
  }
  if (!text)
    console.log(
      render(args.output, { ok: error === undefined, parts, ...(error === undefined ? {} : { error }) }),
    );
  return error === undefined ? EXIT.ok : EXIT.failed;
}
