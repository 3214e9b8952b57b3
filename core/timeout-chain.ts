// The timeout chain of a fencing round (docs/tuning.md "Timeouts that add up"): BMC call
// (timeouts.bmcCallTimeoutMs) < each level's timeoutMs <= the round (powerOffTimeoutMs)
// < the round's deadline (round + ROUND_RECORD_MARGIN_MS) < the fencing Lease
// (leaseDurationMs). Its fixed numbers and its cross-field rules, each once as CEL (the
// FencingPolicy CRD's x-kubernetes-validations, core/policy.ts puts them in the schema) and
// once in TypeScript (the zod reader), with the same message naming the fields. Pure: no
// I/O, never reads the clock.

/**
 * Longest power-off round a policy may ask for (timeouts.powerOffTimeoutMs and every level's
 * timeoutMs), ms. The Knative fence Service's timeoutSeconds and its Triggers'
 * delivery.timeout (knative/base) must exceed it plus ROUND_RECORD_MARGIN_MS; a test checks.
 */
export const MAX_POWER_OFF_TIMEOUT_MS = 240_000;

/**
 * Fixed margin, ms, for the status writes around a power-off round: the Fencing write
 * after the Lease is taken and the write that records the round's result. A round's
 * deadline is its start + powerOffTimeoutMs + this margin (the handler deadline is
 * extended to it, infra/runtime/dispatch.ts), and the fencing Lease must outlast it. The
 * runtime refuses a FASTFENCE_KUBE_TIMEOUT_MS that does not fit twice in it (infra/config.ts).
 */
export const ROUND_RECORD_MARGIN_MS = 5_000;

/** The deadline of a power-off round that starts at `startMs` (epoch ms). */
export function roundDeadline(startMs: number, powerOffTimeoutMs: number): number {
  return startMs + powerOffTimeoutMs + ROUND_RECORD_MARGIN_MS;
}

/**
 * The timeout chain's cross-field rules, each once as CEL (the CRD's x-kubernetes-validations,
 * checked by the API server at apply) and once in TypeScript (the zod reader): same
 * condition, same message naming the fields.
 */
// `has` guards: the API server also checks the rules against the schema's `default: {}`,
// before defaulting fills the fields (in a real request they are always there).
export const CALL_BELOW_ROUND = {
  rule: "!has(self.bmcCallTimeoutMs) || !has(self.powerOffTimeoutMs) || self.bmcCallTimeoutMs < self.powerOffTimeoutMs",
  message: "timeouts.bmcCallTimeoutMs must be below timeouts.powerOffTimeoutMs",
};
export const LEASE_ABOVE_ROUND = {
  rule: `!has(self.leaseDurationMs) || !has(self.powerOffTimeoutMs) || self.leaseDurationMs > self.powerOffTimeoutMs + ${ROUND_RECORD_MARGIN_MS}`,
  message: `timeouts.leaseDurationMs must exceed timeouts.powerOffTimeoutMs + ${ROUND_RECORD_MARGIN_MS} ms (the round's margin for recording its result)`,
};
export const TIMEOUT_RULES = [CALL_BELOW_ROUND, LEASE_ABOVE_ROUND];
export const LEVELS_IN_CHAIN = {
  rule: "!has(self.fencing) || !has(self.fencing.nodes) || !has(self.timeouts) || self.fencing.nodes.all(n, n.levels.all(l, l.timeoutMs > self.timeouts.bmcCallTimeoutMs && l.timeoutMs <= self.timeouts.powerOffTimeoutMs))",
  message:
    "every fencing.nodes[].levels[].timeoutMs must be above timeouts.bmcCallTimeoutMs and at most timeouts.powerOffTimeoutMs",
};

export interface Timeouts {
  bmcCallTimeoutMs: number;
  powerOffTimeoutMs: number;
  leaseDurationMs: number;
}

/** Where (relative to `timeouts`) and why the chain call < round < round + margin < lease breaks. */
export function timeoutChainIssues(t: Timeouts): { path: string[]; message: string }[] {
  const out: { path: string[]; message: string }[] = [];
  if (!(t.bmcCallTimeoutMs < t.powerOffTimeoutMs))
    out.push({ path: ["bmcCallTimeoutMs"], message: CALL_BELOW_ROUND.message });
  if (!(t.leaseDurationMs > t.powerOffTimeoutMs + ROUND_RECORD_MARGIN_MS))
    out.push({ path: ["leaseDurationMs"], message: LEASE_ABOVE_ROUND.message });
  return out;
}

/** Whether a level's timeoutMs sits in the chain: above one BMC call, at most the round (LEVELS_IN_CHAIN). */
export function levelInChain(levelTimeoutMs: number, t: Timeouts): boolean {
  return levelTimeoutMs > t.bmcCallTimeoutMs && levelTimeoutMs <= t.powerOffTimeoutMs;
}
