// The lab policy's timeout chain, in named presets (docs/lab.md "Shape", docs/tuning.md
// "Timeouts that add up"): each preset a whole chain that core/timeout-chain.ts accepts,
// BMC call < level < round < Lease. Data only: nothing here starts or reads anything.

/** One timeout chain of the lab's FencingPolicy, ms. */
export interface LabTimeouts {
  /** timeouts.bmcCallTimeoutMs: one BMC request. */
  bmcCallMs: number;
  /** A Redfish level's timeoutMs. */
  redfishLevelMs: number;
  /** An IPMI level's timeoutMs. */
  ipmiLevelMs: number;
  /** timeouts.powerOffTimeoutMs: one round, every level. */
  roundMs: number;
  /** timeouts.leaseDurationMs: above the round plus its 5 s recording margin. */
  leaseMs: number;
}

/**
 * `lab up`, the demo and the bench: a 20 s Redfish level fits a cold session with every
 * answer 3 s late (`bmc-fault --fault slow`: discovery and login, off, read-back ≈ 15 s)
 * under the default 5 s per call; one level per node, so the round is that level.
 */
export const LAB_TIMEOUTS: LabTimeouts = {
  bmcCallMs: 5_000,
  redfishLevelMs: 20_000,
  ipmiLevelMs: 10_000,
  roundMs: 20_000,
  leaseMs: 26_000,
};

/**
 * `make chaos`, whose slow BMCs answer up to 8 s late (lab/chaos-schedule.ts): a cold
 * session then needs about 5 × 8 s, so calls get 10 s, a Redfish level 45 s, the round
 * 60 s and the Lease 70 s, as docs/tuning.md sizes a policy for such a BMC. A stuck or
 * unreachable BMC costs a round longer than with LAB_TIMEOUTS; the liveness bounds
 * (lab/liveness.ts) follow from these values.
 */
export const SLOW_BMC_TIMEOUTS: LabTimeouts = {
  bmcCallMs: 10_000,
  redfishLevelMs: 45_000,
  ipmiLevelMs: 15_000,
  roundMs: 60_000,
  leaseMs: 70_000,
};
