// A test file's handle on the run's shared kube-apiserver (started by control-plane-global-setup.ts),
// for files that need only a bare API server they never stop: sharedControlPlane() in
// place of startControlPlane(). It resets the plane when attaching (a clean start, even
// after a file that died before its own reset) and in stop() (the next file's clean
// start, verified here), so files share an API server but never state. Without a shared
// plane (vitest ran without the globalSetup) it starts the file's own. It must never
// offer the plane's processes (a file that stops, freezes, restarts or configures its
// API server starts its own with startControlPlane()), nor write into the plane's dir:
// each file's client certs go to a temp dir of its own.
import { KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import { startControlPlane } from "./controlplane.ts";
import { KubeRest } from "./kube-rest.ts";
import { writeUserKubeconfig } from "./pki.ts";
import { resetPlane, type ResetReport } from "./plane-reset.ts";
import { readSnapshot, settledSnapshot, type PlaneSnapshot } from "./plane-snapshot.ts";
import { makeTempDir, removeTempDir } from "./registry.ts";
import { SHARED_PLANE_KEY, type SharedPlaneFacts } from "./shared-plane-facts.ts";

/** What test files use of a ControlPlane, less its processes. */
export interface SharedControlPlane {
  /** Admin kubeconfig file (client cert with O=system:masters). */
  kubeconfigPath: string;
  /** https://127.0.0.1:<port> */
  server: string;
  kubeConfig: KubeConfig;
  /** A temp dir of this file's own (its user kubeconfigs); removed by stop(). */
  dir: string;
  /** PEM files, for tests that build their own clients. */
  pki: { caCert: string; caKey: string; adminCert: string; adminKey: string };
  /** True: the run's shared plane; false: this file's own (no globalSetup provided one). */
  shared: boolean;
  /** Write another kubeconfig with a client cert for `user` in `groups`; returns its path. */
  makeUserKubeconfig(user: string, groups?: string[]): Promise<string>;
  /** Every object right after start: what reset() restores. */
  snapshot: PlaneSnapshot;
  /** Put the plane back into its state right after start (plane-reset.ts). */
  reset(): Promise<ResetReport>;
  /** Shared: reset() and let go; own plane: stop it. */
  stop(): Promise<void>;
}

function adminKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

async function attach(facts: SharedPlaneFacts): Promise<SharedControlPlane> {
  const snapshot = readSnapshot(facts.snapshotPath);
  const kubeConfig = adminKubeConfig(facts.kubeconfigPath);
  const rest = new KubeRest(facts.server, facts.pki);
  const dir = makeTempDir("shared-kube");
  const release = () => {
    rest.close();
    removeTempDir(dir);
  };
  const reset = () => resetPlane(rest, kubeConfig, snapshot);
  try {
    await reset();
  } catch (err) {
    release();
    throw err;
  }
  return {
    kubeconfigPath: facts.kubeconfigPath,
    server: facts.server,
    kubeConfig,
    dir,
    pki: facts.pki,
    shared: true,
    snapshot,
    makeUserKubeconfig: (user, groups = []) =>
      writeUserKubeconfig(
        { dir, server: facts.server, caCert: facts.pki.caCert, caKey: facts.pki.caKey },
        user,
        groups,
      ),
    reset,
    async stop() {
      try {
        await reset();
      } finally {
        release();
      }
    },
  };
}

/** No shared plane in this run: the file's own, with its own snapshot for reset(). */
async function ownPlane(): Promise<SharedControlPlane> {
  const cp = await startControlPlane();
  const rest = new KubeRest(cp.server, cp.pki);
  let snapshot: PlaneSnapshot;
  try {
    snapshot = await settledSnapshot(rest);
  } catch (err) {
    rest.close();
    await cp.stop().catch(() => undefined);
    throw err;
  }
  return {
    kubeconfigPath: cp.kubeconfigPath,
    server: cp.server,
    kubeConfig: cp.kubeConfig,
    dir: cp.dir,
    pki: cp.pki,
    shared: false,
    snapshot,
    makeUserKubeconfig: (user, groups) => cp.makeUserKubeconfig(user, groups),
    reset: () => resetPlane(rest, cp.kubeConfig, snapshot),
    async stop() {
      rest.close();
      await cp.stop();
    },
  };
}

/**
 * The run's shared bare API server, reset to its state right after start; stop() resets
 * it again. Without one (no globalSetup), a plane of the file's own.
 */
export function sharedControlPlane(): Promise<SharedControlPlane> {
  const facts = inject(SHARED_PLANE_KEY) as SharedPlaneFacts | undefined;
  return facts ? attach(facts) : ownPlane();
}
