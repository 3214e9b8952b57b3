// What a lab node runs when it is powered on: its node agent's config, its launcher's
// config (with the compact plane first its control-plane processes, then the kubelet-port
// listener, the Kafka broker, kwok, and unless this is the baseline the node agent) and its start script, which runs the launcher as PID 1 of a
// new PID namespace inside the node's network namespace. Only writes files into the
// node's run dir; it never starts anything itself.
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { labTopicReplicas } from "./broker-settings.ts";
import type { LabApi } from "./control-plane.ts";
import { HOST_IP, ROOT } from "./state.ts";
import type { WatchdogAgentConfig } from "../source/watchdog-agent.ts";
import { AGENT_METRICS_PORT, API_PORT, KUBELET_PORT, NAMESPACE, type LabNode } from "./types.ts";

export interface NodeLaunch {
  cp: LabApi;
  /** Compact plane: this node's etcd, API server, controller manager and scheduler, started first. */
  controlPlane?: { name: string; argv: string[] }[];
  /** Compact plane: an API path the launcher waits for (200) before the node's other processes. */
  gate?: string;
  /** The nodes' kubeconfig (through the relay). */
  nodeKubeconfig: string;
  brokers: string;
  brokerCount: number;
  /** The java argv of this node's broker. */
  brokerArgv: string[];
  /** Run the node agent (false: the baseline). */
  agent: boolean;
  kwokLeaseSeconds: number;
  /** The node's watchdog for its agent (source/watchdog-agent.ts config); unset = none. */
  watchdog?: WatchdogAgentConfig;
  /** The unpacked artifact whose app/ the node agent runs (harness/artifact.ts). */
  artifact: string;
}

/** Write the node's agent-config.json, launcher.json and start.sh. */
export function writeNodeLaunch(x: LabNode, l: NodeLaunch): void {
  const agentCfg = join(x.dir, "agent-config.json");
  writeFileSync(
    agentCfg,
    JSON.stringify({
      node: x.name,
      ip: x.ip,
      dir: x.dir,
      kubeconfig: l.nodeKubeconfig,
      brokers: l.brokers,
      brokerCount: l.brokerCount,
      // FASTFENCE_LAB_TOPIC_REPLICAS (unset: the shipped layout); a bad value throws here.
      topicReplicas: labTopicReplicas(l.brokerCount),
      namespace: NAMESPACE,
      metricsPort: AGENT_METRICS_PORT,
      ...(l.watchdog ? { watchdog: l.watchdog } : {}),
      artifact: l.artifact,
    }),
  );
  const nodeEnv = {
    NODE_OPTIONS: "--disable-warning=TimeoutNegativeWarning --disable-warning=ExperimentalWarning",
    FASTFENCE_LOG_LEVEL: process.env.FASTFENCE_LAB_LOG_LEVEL ?? "warn",
    // The Kafka client of the node's buses (infra/bus/kafka-bus.ts), for both-client trials.
    ...(process.env.FASTFENCE_KAFKA_CLIENT
      ? { FASTFENCE_KAFKA_CLIENT: process.env.FASTFENCE_KAFKA_CLIENT }
      : {}),
  };
  const launcherCfg = {
    node: x.name,
    ip: x.ip,
    dir: x.dir,
    listenerPort: KUBELET_PORT,
    ...(l.controlPlane?.length ? { controlPlane: l.controlPlane, hostname: x.name } : {}),
    ...(l.gate ? { gate: l.gate } : {}),
    api: {
      host: HOST_IP,
      port: API_PORT,
      ca: l.cp.pki.caCert,
      cert: l.cp.pki.adminCert,
      key: l.cp.pki.adminKey,
      servername: "kubernetes",
    },
    processes: [
      { name: "kafka", argv: l.brokerArgv },
      {
        name: "kwok",
        argv: [
          join(ROOT, ".cache/bin/kwok"),
          `--kubeconfig=${l.nodeKubeconfig}`,
          `--manage-single-node=${x.name}`,
          `--node-lease-duration-seconds=${l.kwokLeaseSeconds}`,
        ],
      },
      ...(l.agent
        ? [
            {
              name: "agent",
              argv: [process.execPath, join(ROOT, "lab/node-agent.ts"), agentCfg],
              env: nodeEnv,
            },
          ]
        : []),
    ],
  };
  const lcPath = join(x.dir, "launcher.json");
  writeFileSync(lcPath, JSON.stringify(launcherCfg));
  writeFileSync(
    x.startScript,
    `#!/bin/sh\n# Power-on of lab node ${x.name}: its launcher as PID 1 of a new PID namespace inside ${x.netns}.\n` +
      `# Dies with its parent (the BMC).\n` +
      `[ -z "$FFLAB_PDEATH" ] && FFLAB_PDEATH=1 exec setpriv --pdeathsig KILL -- "$0" "$@"\n` +
      `# A SIGTERM (teardown) takes the node down at once: unshare ignores SIGTERM while its\n` +
      `# child lives, so SIGKILL it (its child, PID 1, dies with it).\n` +
      `setpriv --pdeathsig KILL -- ip netns exec ${x.netns} unshare -p -f --kill-child=SIGKILL -m -u --mount-proc ` +
      `env NODE_OPTIONS="${nodeEnv.NODE_OPTIONS}" ${process.execPath} ${join(ROOT, "lab/launcher.ts")} ${lcPath} &\n` +
      `child=$!\ntrap 'kill -KILL $child' TERM INT HUP\nwait $child\nwait $child\n`,
  );
  chmodSync(x.startScript, 0o755);
}
