// Child process for test/integration/env-cleanup.test.ts: starts etcd + kube-apiserver,
// one Kafka broker and a network namespace, prints one JSON line `READY {...}` describing what it started
// (pids, ports, temp dirs), then waits to be interrupted. Must do nothing else.
import { startControlPlane } from "./controlplane.ts";
import { startKafka } from "./kafka.ts";
import { makeNetns, registrySnapshot } from "./registry.ts";

const netns = makeNetns("cleanup");
const cp = await startControlPlane();
const kafka = await startKafka({ brokers: 1 });
const snap = registrySnapshot();
const ports = [
  Number(new URL(cp.server).port),
  Number(new URL(cp.etcdUrl).port),
  ...kafka.brokers.flatMap((b) => [b.port, b.controllerPort]),
];
process.stdout.write(
  `READY ${JSON.stringify({
    pid: process.pid,
    groups: snap.groups,
    tempDirs: snap.tempDirs,
    netns: [netns],
    ports,
    registry: snap.path,
  })}\n`,
);
setInterval(() => undefined, 1 << 30);
