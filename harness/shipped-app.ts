// Loads the product's composition roots (app/index.ts) from the unpacked artifact
// (harness/artifact.ts), with Node's own import and type stripping — never through the
// test runner's transforms — so the harness, the lab and the benches run the files and the
// production dependencies that ship. Set FASTFENCE_FROM_CHECKOUT=1 to load the checkout's
// app/ instead (debugging only; a run that does says so on stderr). It starts nothing.
import type { KubeConfig } from "@kubernetes/client-node";
import { join } from "node:path";
import { createRequire } from "node:module";
import { ensureArtifact, type Artifact } from "./artifact.ts";
import { ROOT } from "./env/base.ts";

import type { HostedEventSource } from "../app/index.ts";
import type { Logger } from "../infra/log.ts";

export type ShippedApp = typeof import("../app/index.ts");

export interface Shipped {
  app: ShippedApp;
  /** The artifact loaded; undefined when FASTFENCE_FROM_CHECKOUT=1. */
  artifact?: Artifact;
  /** The directory app/ was loaded from. */
  dir: string;
}

// Node's own loader: the test runner rewrites `import()` in the files it transforms (and
// gives functions it did not compile no dynamic-import hook), and must not transform the
// product. require() loads ES modules (without top-level await) and strips their types.
const nativeRequire = createRequire(import.meta.url);

let loaded: Promise<Shipped> | undefined;

/** The app of the artifact at `dir` (already unpacked, e.g. handed to a lab node agent). */
export async function importApp(dir: string): Promise<ShippedApp> {
  return Promise.resolve(nativeRequire(join(dir, "app/index.ts")) as ShippedApp);
}

/** Builds (when the packed content changed) and loads the artifact, once per process. */
export function shippedApp(): Promise<Shipped> {
  loaded ??= (async () => {
    if (process.env.FASTFENCE_FROM_CHECKOUT === "1") {
      process.stderr.write(
        "fastfence: FASTFENCE_FROM_CHECKOUT=1: running app/ from the checkout, not the artifact\n",
      );
      return { app: await importApp(ROOT), dir: ROOT };
    }
    const artifact = ensureArtifact({ log: (s) => process.stderr.write(`${s}\n`) });
    return { app: await importApp(artifact.dir), artifact, dir: artifact.dir };
  })();
  return loaded;
}

/** An event source started from `env` alone, as `fastfence source` starts one from its pod's. */
export function startSourceFromEnv(
  app: ShippedApp,
  env: Record<string, string>,
  kubeConfig: KubeConfig,
  log: Logger,
): Promise<HostedEventSource> {
  return app.hostEventSource({ config: app.loadRuntimeConfig(env), kubeConfig, log });
}
