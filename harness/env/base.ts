// The harness's fixed places (checkout root, .cache, the binaries setup built, the run
// registry dir, the third-party CRDs), its error type, and sleep. Shared by every harness
// module, the tests, the lab and the benches. Declarations only: it must never start or
// touch anything at import time.
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { FastfenceError } from "../../core/errors.ts";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const CACHE = join(ROOT, ".cache");
/** Unchanged upstream CRDs (KubeVirt, Knative, Strimzi, metal3, medik8s, OpenShift); see third_party/crds/SOURCES.md. */
export const THIRD_PARTY_CRDS = join(ROOT, "third_party/crds");
export const BIN = join(CACHE, "bin");
export const RUN_DIR = join(CACHE, "run");

/** A harness server failed to start, become ready, or stop. */
export class EnvError extends FastfenceError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super("FF_INTERNAL", message, options);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
