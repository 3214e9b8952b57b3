// The admission ledger (core/admission-ledger.ts) in the Kubernetes API: one Lease in the
// fastfence namespace whose annotation holds the admitted incidents as JSON. Read it, and
// replace it guarded by the resourceVersion read (or create it when there was none); a
// lost guard is a KubeApiError 409 for the caller to re-read and decide again. It never
// retries a write itself, and a ledger it cannot parse is an error, never read as empty.
import type { V1Lease } from "@kubernetes/client-node";
import { z } from "zod";
import { ADMISSION_LEDGER_ANNOTATION, ADMISSION_LEDGER_LEASE } from "../../core/admission-ledger.ts";
import type { AdmissionLedger, AdmittedEntry } from "../../core/decision.ts";
import { FastfenceError } from "../../core/errors.ts";
import type { Kube } from "./client.ts";
import { readLease } from "./lease.ts";

const Entries = z.record(
  z.string(),
  z.object({ node: z.string().min(1), at: z.iso.datetime({ offset: true }) }),
);

/** The ledger as stored; an absent Lease is an empty ledger without a resourceVersion. */
export async function readLedger(kube: Kube, namespace: string): Promise<AdmissionLedger> {
  const lease = await readLease(kube, namespace, ADMISSION_LEDGER_LEASE);
  if (!lease) return { admitted: {} };
  const raw = lease.metadata?.annotations?.[ADMISSION_LEDGER_ANNOTATION] ?? "{}";
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  const r = Entries.safeParse(parsed);
  if (!r.success)
    throw new FastfenceError(
      "FF_INVALID_CONFIG",
      `Lease ${namespace}/${ADMISSION_LEDGER_LEASE}: annotation ${ADMISSION_LEDGER_ANNOTATION} is not a map of incident → {node, at}; no confirmation until it is fixed (delete the Lease and apply the manifests again: it ships empty)`,
    );
  return {
    ...(lease.metadata?.resourceVersion ? { resourceVersion: lease.metadata.resourceVersion } : {}),
    admitted: r.data,
  };
}

/** Writes the ledger: replace at `expectedResourceVersion`, or create when none was read. */
export async function writeLedger(
  kube: Kube,
  namespace: string,
  expectedResourceVersion: string | undefined,
  admitted: Readonly<Record<string, AdmittedEntry>>,
): Promise<void> {
  const body: V1Lease = {
    metadata: {
      name: ADMISSION_LEDGER_LEASE,
      namespace,
      ...(expectedResourceVersion ? { resourceVersion: expectedResourceVersion } : {}),
      labels: { "app.kubernetes.io/part-of": "fastfence" },
      annotations: { [ADMISSION_LEDGER_ANNOTATION]: JSON.stringify(admitted) },
    },
    spec: {},
  };
  const name = ADMISSION_LEDGER_LEASE;
  await (expectedResourceVersion
    ? kube.call(`write admission ledger ${name}`, (a) =>
        a.coordination.replaceNamespacedLease({ name, namespace, body }),
      )
    : kube.call(`create admission ledger ${name}`, (a) =>
        a.coordination.createNamespacedLease({ namespace, body }),
      ));
}
