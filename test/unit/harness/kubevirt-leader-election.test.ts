// The VM controller stand-in's leader election (harness/kubevirt/leader-election.pure.ts)
// on plain data: client-go's validity from observedTime, an empty holder taken at once,
// the jittered retry, the renew deadline, the release, and the config checks.
import { describe, expect, it } from "vitest";
import {
  attempt,
  checkConfig,
  ElectionConfigError,
  initialState,
  leaseValid,
  nextDelayMs,
  release,
  renewExpired,
  written,
  VIRT_CONTROLLER_DEFAULTS,
  type ElectionConfig,
  type ElectionState,
  type LeaseRecord,
} from "../../../harness/kubevirt/leader-election.pure.ts";

const cfg = (identity: string): ElectionConfig => ({ identity, ...VIRT_CONTROLLER_DEFAULTS });
const A = cfg("a");
const B = cfg("b");
const held = (holder: string, renewTimeMs: number, leaseTransitions = 0): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: 15,
  acquireTimeMs: 0,
  renewTimeMs,
  leaseTransitions,
});
const present = (record: LeaseRecord, resourceVersion = "1") => ({
  kind: "present" as const,
  record,
  resourceVersion,
});

/** Candidate `c` acquires from nothing at `now`; returns its leading state. */
function leader(c: ElectionConfig, now: number): ElectionState {
  const r = attempt(initialState(), c, now, { kind: "absent" });
  expect(r.write?.kind).toBe("create");
  return written(r.state, r.write!.record, true, now);
}

describe("stand-in leader election (client-go semantics)", () => {
  it("KubeVirt virt-controller's defaults are 15 s / 10 s / 2 s and pass client-go's checks", () => {
    expect(VIRT_CONTROLLER_DEFAULTS).toEqual({
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
    });
    expect(() => checkConfig(A)).not.toThrow();
    // OpenShift's scheduler settings pass too.
    expect(() =>
      checkConfig({
        identity: "s",
        leaseDurationMs: 137_000,
        renewDeadlineMs: 107_000,
        retryPeriodMs: 26_000,
      }),
    ).not.toThrow();
  });

  it("refuses settings client-go refuses, naming what is wrong", () => {
    expect(() => checkConfig({ ...A, renewDeadlineMs: 15_000 })).toThrow(
      /leaseDuration must be greater than renewDeadline/,
    );
    expect(() => checkConfig({ ...A, retryPeriodMs: 9_000 })).toThrow(
      /renewDeadline must be greater than retryPeriod × 1.2/,
    );
    expect(() => checkConfig({ ...A, identity: "" })).toThrow(ElectionConfigError);
  });

  it("creates an absent Lease with its identity and duration", () => {
    const r = attempt(initialState(), A, 1000, { kind: "absent" });
    expect(r.write).toEqual({
      kind: "create",
      record: {
        holderIdentity: "a",
        leaseDurationSeconds: 15,
        acquireTimeMs: 1000,
        renewTimeMs: 1000,
        leaseTransitions: 0,
      },
    });
  });

  it("judges validity from when it saw the record change, not from renewTime", () => {
    // The record says it was renewed long ago (another clock), but b first sees it at 100 s.
    const rec = held("a", 0);
    let s = attempt(initialState(), B, 100_000, present(rec)).state;
    expect(s.observed?.atMs).toBe(100_000);
    expect(attempt(s, B, 114_999, present(rec)).write).toBeUndefined();
    expect(leaseValid(s, 114_999)).toBe(true);
    // The same record still unchanged at 115 s: lapsed, b takes it, one transition more.
    const r = attempt(s, B, 115_000, present(rec, "7"));
    expect(r.write).toMatchObject({
      kind: "update",
      resourceVersion: "7",
      record: { holderIdentity: "b", leaseTransitions: 1 },
    });
    // A renewal seen at 110 s moves observedTime: still valid at 120 s.
    s = attempt(s, B, 110_000, present(held("a", 1))).state;
    expect(s.observed?.atMs).toBe(110_000);
    expect(attempt(s, B, 120_000, present(held("a", 1))).write).toBeUndefined();
    expect(attempt(s, B, 125_000, present(held("a", 1))).write?.record.holderIdentity).toBe("b");
  });

  it("takes a Lease with an empty holder at once, whatever its duration says", () => {
    const released = { ...held("", 5), leaseDurationSeconds: 1, leaseTransitions: 3 };
    const r = attempt(initialState(), B, 5, present(released));
    expect(r.write?.record).toMatchObject({
      holderIdentity: "b",
      leaseTransitions: 4,
      leaseDurationSeconds: 15,
    });
  });

  it("a leader renews keeping acquireTime and transitions; a lost write does not make a leader", () => {
    let s = leader(A, 0);
    const mine = { ...held("a", 0), leaseTransitions: 2 };
    s = written(s, mine, true, 0);
    const r = attempt(s, A, 2000, present(mine));
    expect(r.write?.record).toMatchObject({
      holderIdentity: "a",
      acquireTimeMs: 0,
      renewTimeMs: 2000,
      leaseTransitions: 2,
    });
    const lost = written(initialState(), held("b", 0), false, 0);
    expect(lost.leading).toBe(false);
  });

  it("a leader that cannot renew stops after retryPeriod + renewDeadline from its last renew", () => {
    const s = leader(A, 0);
    expect(renewExpired(s, A, 11_999)).toBe(false);
    expect(renewExpired(s, A, 12_000)).toBe(true);
    // Another identity took the Lease: a's attempts write nothing, so it stops at the deadline.
    const other = attempt(s, A, 4000, present(held("b", 4000))).write;
    expect(other).toBeUndefined();
  });

  it("a candidate's retry is jittered between 1× and 2.2× the retry period; a leader's is not", () => {
    const c = initialState();
    expect(nextDelayMs(c, A, 0)).toBe(2000);
    expect(nextDelayMs(c, A, 0.5)).toBe(3200);
    expect(nextDelayMs(c, A, 0.999)).toBeCloseTo(4397.6);
    expect(nextDelayMs(leader(A, 0), A, 0.9)).toBe(2000);
  });

  it("release clears the holder and sets duration 1, guarded, only by the holder", () => {
    const s = leader(A, 0);
    const w = release(s, A, 3000, present({ ...held("a", 0), leaseTransitions: 4 }, "9"));
    expect(w).toEqual({
      kind: "update",
      resourceVersion: "9",
      record: {
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTimeMs: 3000,
        renewTimeMs: 3000,
        leaseTransitions: 4,
      },
    });
    expect(release(s, A, 3000, present(held("b", 0)))).toBeUndefined();
    expect(release(initialState(), B, 3000, present(held("b", 0)))).toBeUndefined();
    expect(release(s, A, 3000, { kind: "absent" })).toBeUndefined();
  });
});
