// The admission ledger's rules (S4 under concurrency): which of its entries still hold a
// fencing slot, and the ledger a confirmation writes. An entry holds its slot while its
// incident is open and admitted (Confirmed and after), or, for one evidence window after
// the admission, while the write that follows the ledger write may not have landed yet:
// the incident is still Suspected or Blocked, or not listed at all (a confirmation on the
// incident's first write creates it Confirmed after the ledger write). Erring that way
// keeps a just-closed incident's slot for at most that window. Other entries are dropped
// by the next write. Pure: no I/O, never reads the clock.
import type { AdmissionLedger, AdmittedEntry } from "./decision.ts";
import { ADMITTED_PHASES, type NodeFence, type Phase } from "./incident.ts";
import type { FencingPolicySpec } from "./policy.ts";

/** Name of the Lease that carries the ledger, in the fastfence namespace. */
export const ADMISSION_LEDGER_LEASE = "fastfence-admissions";
/** The Lease annotation that holds the ledger's entries (JSON: incident → AdmittedEntry). */
export const ADMISSION_LEDGER_ANNOTATION = "fastfence.io/admitted";

/** Phases of an incident whose admission is written but whose Confirmed write may be pending. */
const PENDING_PHASES: readonly Phase[] = ["Suspected", "Blocked"];

/** The entries that still hold a slot: incident name → entry. */
export function liveEntries(
  ledger: AdmissionLedger | undefined,
  openIncidents: readonly NodeFence[],
  now: number,
  policy: FencingPolicySpec,
): Record<string, AdmittedEntry> {
  const out: Record<string, AdmittedEntry> = {};
  if (!ledger) return out;
  const open = new Map(openIncidents.map((i) => [i.metadata.name, i]));
  for (const [name, entry] of Object.entries(ledger.admitted)) {
    const inc = open.get(name);
    const young = now - Date.parse(entry.at) <= policy.corroboration.evidenceWindowMs;
    if (!inc) {
      if (young) out[name] = entry; // not created yet, or just closed: held while it may be pending
      continue;
    }
    if (inc.spec.nodeName !== entry.node) continue;
    const phase = inc.status?.phase ?? "Suspected";
    if (ADMITTED_PHASES.includes(phase) || (PENDING_PHASES.includes(phase) && young)) out[name] = entry;
  }
  return out;
}

/** Nodes other than `node` that hold a slot in the ledger. */
export function ledgerNodes(
  ledger: AdmissionLedger | undefined,
  openIncidents: readonly NodeFence[],
  node: string,
  now: number,
  policy: FencingPolicySpec,
): Set<string> {
  const entries = Object.values(liveEntries(ledger, openIncidents, now, policy));
  return new Set(entries.map((e) => e.node).filter((n) => n !== node));
}

/** The ledger after admitting `incident` of `node` at `nowIso`: its live entries plus this one. */
export function admit(
  ledger: AdmissionLedger | undefined,
  openIncidents: readonly NodeFence[],
  incident: string,
  node: string,
  now: number,
  nowIso: string,
  policy: FencingPolicySpec,
): Record<string, AdmittedEntry> {
  return { ...liveEntries(ledger, openIncidents, now, policy), [incident]: { node, at: nowIso } };
}
