// `fastfence stack-check`: starts the real test stack (etcd, kube-apiserver,
// controller-manager, scheduler, one kwok node, one Kafka broker, ipmi_sim and
// sushy-tools), prints each part's health, version and start-up time, and stops
// everything. A quick "is this machine ready" check; it needs `make setup` first and
// uses the test environment (test/env), so it is a developer command, not shipped.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { VersionApi } from "@kubernetes/client-node";

export async function stackCheckCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { help: { type: "boolean", short: "h" } } });
  if (values.help)
    return (
      console.log(
        "Usage: fastfence stack-check   (starts the test stack, prints health and versions, stops it)",
      ),
      0
    );
  const envMod = await import("../test/env/index.ts");
  const { startIpmiSim } = await import("../test/env/bmc-ipmi-sim.ts");
  const { startSushy } = await import("../test/env/bmc-sushy.ts");
  const { KafkaJsBus } = await import("../infra/bus/kafkajs-bus.ts");
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
  const row = (part: string, health: string, ver: string, ms?: number) =>
    console.log(
      `${part.padEnd(26)}${health.padEnd(8)}${ver.padEnd(40)}${ms === undefined ? "" : `${ms} ms`}`,
    );
  const scope = new envMod.EnvScope();
  let failed = false;
  try {
    console.log(`${"PART".padEnd(26)}${"HEALTH".padEnd(8)}${"VERSION".padEnd(40)}START-UP`);
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
    const bus = new KafkaJsBus({ brokers: kafka.bootstrap, clientId: "stack-check" });
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
    failed = true;
    console.error(`stack-check failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    await scope.stopAll();
    console.log("stopped every part of the stack");
  }
  return failed ? 1 : 0;
}
