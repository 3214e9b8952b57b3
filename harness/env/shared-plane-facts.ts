// What the integration run's globalSetup (control-plane-global-setup.ts) hands every test process about
// the shared control plane — where it listens, its admin kubeconfig and PKI files, its
// dir and its snapshot — as a vitest provided value, typed through vitest's
// ProvidedContext. Declarations only: it must never start, read or write anything.

/** The shared control plane's connection facts (plain data: vitest serialises it). */
export interface SharedPlaneFacts {
  /** https://127.0.0.1:<port> */
  server: string;
  /** Admin kubeconfig (client cert with O=system:masters). */
  kubeconfigPath: string;
  /** The plane's temp dir (owned by the globalSetup process: test files must not write there). */
  dir: string;
  /** PEM files: its CA (cert and key, to issue client certs) and the admin client cert. */
  pki: { caCert: string; caKey: string; adminCert: string; adminKey: string };
  /** JSON snapshot of every object right after start (plane-snapshot.ts). */
  snapshotPath: string;
}

/** The key of the provided value. */
export const SHARED_PLANE_KEY = "fastfenceSharedPlane";

declare module "vitest" {
  export interface ProvidedContext {
    fastfenceSharedPlane: SharedPlaneFacts;
  }
}
