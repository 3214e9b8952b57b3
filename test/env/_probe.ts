import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { startControlPlane } from "./controlplane.ts";
import { startKwokNodes } from "./kwok.ts";
const t00 = Date.now();
const cp = await startControlPlane({ controllerManager: true, scheduler: true });
console.log("cp", Date.now() - t00);
const core = cp.kubeConfig.makeApiClient(CoreV1Api);
const want = ["deployment-controller", "replicaset-controller", "node-controller", "endpointslice-controller"];
const seen: Record<string, number> = {};
while (Date.now() - t00 < 20000 && Object.keys(seen).length < want.length + 1) {
  const sas = await core.listNamespacedServiceAccount({ namespace: "kube-system" });
  for (const s of sas.items) if (want.includes(s.metadata!.name!) && !seen[s.metadata!.name!]) seen[s.metadata!.name!] = Date.now() - t00;
  const d = await core.listNamespacedServiceAccount({ namespace: "default" });
  if (d.items.length && !seen.defaultSA) seen.defaultSA = Date.now() - t00;
  await new Promise((r) => setTimeout(r, 50));
}
console.log(seen);
const kw = await startKwokNodes(cp, ["a", "b"]);
const apps = cp.kubeConfig.makeApiClient(AppsV1Api);
const t0 = Date.now();
await apps.createNamespacedDeployment({ namespace: "default", body: { metadata: { name: "w" }, spec: { replicas: 2, selector: { matchLabels: { app: "w" } }, template: { metadata: { labels: { app: "w" } }, spec: { containers: [{ name: "c", image: "x" }] } } } } });
while (true) {
  const pods = await core.listNamespacedPod({ namespace: "default", labelSelector: `app=w` });
  if (pods.items.length === 2 && pods.items.every((p) => p.status?.phase === "Running")) break;
  await new Promise((r) => setTimeout(r, 50));
}
console.log("running after", Date.now() - t0, "total since start", Date.now() - t00);
await kw.stop(); await cp.stop(); process.exit(0);
