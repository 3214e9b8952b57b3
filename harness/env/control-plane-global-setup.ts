// The integration project's vitest globalSetup: starts ONE bare control plane (etcd +
// kube-apiserver, no controller manager or scheduler) for the whole run, snapshots it
// once its bootstrap writes have settled, hands its connection facts to the test
// processes (provide: SHARED_PLANE_KEY), and stops it in teardown. Test files attach to
// it with sharedControlPlane() (shared-control-plane.ts), which resets it after each
// file. It must never hand out the plane's processes (only addresses and files), nor
// outlive the vitest process that started it.
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startControlPlane } from "./controlplane.ts";
import { KubeRest } from "./kube-rest.ts";
import { settledSnapshot, writeSnapshot } from "./plane-snapshot.ts";
import { SHARED_PLANE_KEY } from "./shared-plane-facts.ts";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cp = await startControlPlane();
  try {
    const rest = new KubeRest(cp.server, cp.pki);
    const snapshotPath = join(cp.dir, "snapshot.json");
    try {
      writeSnapshot(snapshotPath, await settledSnapshot(rest));
    } finally {
      rest.close();
    }
    project.provide(SHARED_PLANE_KEY, {
      server: cp.server,
      kubeconfigPath: cp.kubeconfigPath,
      dir: cp.dir,
      pki: cp.pki,
      snapshotPath,
    });
  } catch (err) {
    await cp.stop().catch(() => undefined);
    throw err;
  }
  return () => cp.stop();
}
