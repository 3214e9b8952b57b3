// The trial scenarios as one table: per scenario, how the fault is injected on the
// victim, whether the victim is really broken (then it must be fenced, and only it),
// whether it is the baseline (Kubernetes alone: no event log, no invariants), how long a
// trial follows it, and how the lab is put back afterwards. The function names a
// function-only crash stops come from the function registry. Declarations and fault
// calls only; it never fences anything itself.
import { stageNames } from "../functions/registry.ts";
import { isolate, powerLoss, procCrash } from "./faults.ts";
import { hangMidRound } from "./hang-mid-round.ts";
import type { Lab } from "./lab.ts";

export type Scenario =
  | "crash"
  | "proc-crash"
  | "hang"
  | "hang-mid-round"
  | "partition"
  | "function-crash"
  | "partial-partition"
  | "partial-partition-api"
  | "power-loss"
  | "isolate"
  | "baseline-crash";

export interface ScenarioSpec {
  /** The victim is really broken (crash, hang, full partition): it may and must be fenced. */
  faulted: boolean;
  /** Kubernetes alone (no fastfence): no event log or invariants; the replacement pod ends it. */
  baseline: boolean;
  /** How long to follow the incident (ms from the fault); undefined: the caller's observeMs. */
  followMs?: number;
  /** Inject the fault on the victim; resolves to its time (ms epoch). */
  fault(lab: Lab, victim: string): Promise<number>;
  /** Undo the fault itself (resume, heal) before the victim's power is put back. */
  undo?(lab: Lab, victim: string): Promise<unknown>;
  /** Power-cycle the victim when it is still on after the trial (its processes were broken). */
  powerCycle: boolean;
  /**
   * The trial itself asks, as an operator, for the victim to be fenced (`fastfence fence`):
   * its incident is confirmed without observers, S2's one exception, made by a person.
   */
  operatorRequest?: boolean;
}

/** Every pipeline function, as named in functions/registry.ts. */
const ALL_FUNCTIONS = stageNames();

const heal = (lab: Lab, victim: string) => lab.heal(victim);

export const SCENARIOS: Readonly<Record<Scenario, ScenarioSpec>> = {
  // The machine dies silently (link down, every process killed): what the headline numbers use.
  crash: {
    faulted: true,
    baseline: false,
    followMs: 30_000,
    fault: (lab, victim) => lab.crash(victim),
    powerCycle: true,
  },
  // The lab's crash before issue 45: processes killed, link up, so survivors get resets at
  // once. Only on request (bench --scenarios proc-crash), to compare with the silent crash.
  "proc-crash": {
    faulted: true,
    baseline: false,
    followMs: 30_000,
    fault: (lab, victim) => procCrash(lab, victim),
    powerCycle: true,
  },
  hang: {
    faulted: true,
    baseline: false,
    followMs: 30_000,
    fault: async (lab, victim) => lab.hang(victim),
    undo: async (lab, victim) => lab.resume(victim),
    powerCycle: true,
  },
  // An operator asks for the victim to be fenced; the moment its incident is confirmed (the
  // round requested and starting), every process of the node freezes. Measured from the freeze.
  "hang-mid-round": {
    faulted: true,
    baseline: false,
    followMs: 30_000,
    operatorRequest: true,
    fault: (lab, victim) => hangMidRound(lab, victim),
    undo: async (lab, victim) => lab.resume(victim),
    powerCycle: true,
  },
  partition: {
    faulted: true,
    baseline: false,
    followMs: 30_000,
    fault: (lab, victim) => lab.partition(victim),
    undo: heal,
    powerCycle: true,
  },
  // Crash every function replica and the event source on a healthy node (not the victim of anything).
  "function-crash": {
    faulted: false,
    baseline: false,
    fault: async (lab, victim) => {
      const t0 = Date.now();
      await lab.functionCrash(victim, ALL_FUNCTIONS, { source: true });
      return t0;
    },
    powerCycle: true,
  },
  "partial-partition": {
    faulted: false,
    baseline: false,
    fault: (lab, victim) => lab.partialPartition(victim, "peers"),
    undo: heal,
    powerCycle: false,
  },
  "partial-partition-api": {
    faulted: false,
    baseline: false,
    fault: (lab, victim) => lab.partialPartition(victim, "api"),
    undo: heal,
    powerCycle: false,
  },
  // The node and its BMC die together: only its watchdog's timeout (lab up --watchdog) can
  // prove it off. Undo: its BMC answers again; then the reset powers the node back on.
  "power-loss": {
    faulted: true,
    baseline: false,
    followMs: 40_000,
    fault: (lab, victim) => powerLoss(lab, victim),
    undo: (lab, victim) => lab.bmcFault(victim, "none"),
    powerCycle: true,
  },
  // Cut off from peers, API and BMC, processes running: its watchdog must reset it before
  // the survivors release its workloads. Undo: reconnect it and its BMC.
  isolate: {
    faulted: true,
    baseline: false,
    followMs: 40_000,
    fault: (lab, victim) => isolate(lab, victim),
    undo: async (lab, victim) => {
      await lab.heal(victim);
      await lab.bmcFault(victim, "none");
    },
    powerCycle: true,
  },
  // Kubernetes alone after the same silent crash.
  "baseline-crash": {
    faulted: true,
    baseline: true,
    followMs: 420_000,
    fault: (lab, victim) => lab.crash(victim),
    powerCycle: true,
  },
};
