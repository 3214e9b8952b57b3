// The command line of `make bench` (bench/lab.ts): parseBenchArgs checks every option once
// and returns them, or throws a BenchUsageError naming the option; readBenchOptions is the
// bench's entry (process.argv; a usage error exits 2 with the usage, --help prints it, and
// --brokers sets FASTFENCE_LAB_BROKERS for the lab's brokers). Starts nothing.
import { parseArgs } from "node:util";
import { describeTopology } from "./replica-settings.ts";
import { brokerSettingsMode, type BrokerSettingsMode } from "./broker-settings.ts";
import { SCENARIOS as SPECS } from "./scenarios.ts";
import type { Scenario } from "./trial.ts";
import { trialsFor, WATCHDOG_SCENARIOS } from "./bench-watchdog.ts";
import type { ControlPlaneMode, LeaderElectionProfile } from "./types.ts";

export const USAGE = `usage: node bench/lab.ts [--trials N] [--other N] [--watchdog-trials N] [--baseline N]
                         [--controller-trials N] [--hang-waits S,S,...] [--brokers lab|shipped]
                         [--control-plane compact|host] [--leader-election openshift|upstream]
                         [--etcd-leader-trials N] [--lease-trials N]
                         [--scenarios ${Object.keys(SPECS).join(",")}]`;

const DEFAULT_SCENARIOS =
  "crash,function-crash,partial-partition,hang,hang-mid-round,partition,power-loss,isolate";

/** A bad option: its message names the option and what was wrong. */
export class BenchUsageError extends Error {
  override name = "BenchUsageError";
}

export interface BenchOptions {
  help: boolean;
  /** Crash trials (K), other scenarios' trials (K2), baseline trials (KB). */
  K: number;
  K2: number;
  KB: number;
  /** Crash trials whose victim is the active KRaft controller's node (spread over the K). */
  KC: number;
  controllerTrial: (i: number) => boolean;
  /** Seconds the lab idles before each hang trial's fault, cycled over the hang trials. */
  HANG_WAITS: number[];
  SCENARIOS: Scenario[];
  /** A watchdog scenario was asked for: the lab runs its emulated watchdogs. */
  WATCHDOG: boolean;
  trialsOf: (sc: string) => number;
  /** --brokers, when given (else FASTFENCE_LAB_BROKERS or "lab"). */
  BROKERS: BrokerSettingsMode;
  /** Where the lab's etcd, API servers, controller manager and scheduler run (lab/types.ts). */
  CONTROL_PLANE: ControlPlaneMode;
  /** The compact plane's leader-election and etcd settings (lab/compact-plane.ts). */
  LEADER_ELECTION: LeaderElectionProfile;
  /** Compact plane: crash trials whose victim is the etcd leader / holds the controller manager's and scheduler's Leases. */
  ROLE_TRIALS: { etcdLeader: number; leases: number };
}

/** The options of `args` (without node and the script), FASTFENCE_LAB_BROKERS from `env`. */
export function parseBenchArgs(args: string[], env: NodeJS.ProcessEnv = {}): BenchOptions {
  let values;
  try {
    values = parseArgs({
      args,
      options: {
        help: { type: "boolean", short: "h" },
        trials: { type: "string" },
        other: { type: "string" },
        "hang-waits": { type: "string" },
        baseline: { type: "string" },
        scenarios: { type: "string" },
        "controller-trials": { type: "string" },
        "watchdog-trials": { type: "string" },
        brokers: { type: "string" },
        "control-plane": { type: "string" },
        "leader-election": { type: "string" },
        "etcd-leader-trials": { type: "string" },
        "lease-trials": { type: "string" },
      },
    }).values;
  } catch (err) {
    throw new BenchUsageError((err as Error).message);
  }
  const v = values;
  /** A count option: a whole number ≥ 0, or the default. */
  const count = (name: keyof typeof v, dflt: number): number => {
    const raw = v[name];
    if (raw === undefined) return dflt;
    const n = Number(raw);
    if (typeof raw !== "string" || !Number.isInteger(n) || n < 0)
      throw new BenchUsageError(`--${name} must be a whole number ≥ 0, got ${JSON.stringify(raw)}`);
    return n;
  };
  const oneOf = <T extends string>(name: keyof typeof v, allowed: readonly T[], dflt: T): T => {
    const raw = v[name] ?? dflt;
    if (!(allowed as readonly unknown[]).includes(raw))
      throw new BenchUsageError(`--${name} takes ${allowed.join(" or ")}, got ${JSON.stringify(raw)}`);
    return raw as T;
  };
  let BROKERS: BrokerSettingsMode;
  try {
    BROKERS = brokerSettingsMode(v.brokers === undefined ? env : { FASTFENCE_LAB_BROKERS: v.brokers });
  } catch (err) {
    throw new BenchUsageError(`--brokers: ${(err as Error).message}`);
  }
  const K = count("trials", 20);
  const K2 = count("other", 3);
  const KC = Math.min(K, count("controller-trials", 5));
  const HANG_WAITS = (v["hang-waits"] ?? "0,5,60").split(",").map((x) => {
    const n = Number(x);
    if (x.trim() === "" || !Number.isFinite(n) || n < 0)
      throw new BenchUsageError(
        `--hang-waits takes seconds ≥ 0 separated by commas, got ${JSON.stringify(x)}`,
      );
    return n;
  });
  const SCENARIOS = (v.scenarios ?? DEFAULT_SCENARIOS).split(",") as Scenario[];
  for (const sc of SCENARIOS)
    if (!(sc in SPECS))
      throw new BenchUsageError(`--scenarios: unknown scenario ${sc} (${Object.keys(SPECS).join(", ")})`);
  const watchdogTrials = v["watchdog-trials"] !== undefined ? count("watchdog-trials", 0) : undefined;
  const CONTROL_PLANE = oneOf<ControlPlaneMode>("control-plane", ["compact", "host"], "compact");
  if (CONTROL_PLANE === "host" && (v["etcd-leader-trials"] ?? v["lease-trials"]) !== undefined)
    throw new BenchUsageError("--etcd-leader-trials and --lease-trials need the compact control plane");
  return {
    help: v.help ?? false,
    K,
    K2,
    KB: count("baseline", 1),
    KC,
    controllerTrial: (i) => KC > 0 && i % Math.floor(K / KC) === 0 && i / Math.floor(K / KC) < KC,
    HANG_WAITS,
    SCENARIOS,
    WATCHDOG: SCENARIOS.some((s) => (WATCHDOG_SCENARIOS as readonly string[]).includes(s)),
    trialsOf: (sc) =>
      trialsFor(sc, {
        trials: K,
        trialsGiven: v.trials !== undefined,
        other: K2,
        ...(watchdogTrials !== undefined ? { watchdogTrials } : {}),
      }),
    BROKERS,
    CONTROL_PLANE,
    LEADER_ELECTION: oneOf<LeaderElectionProfile>("leader-election", ["openshift", "upstream"], "openshift"),
    ROLE_TRIALS: {
      etcdLeader: CONTROL_PLANE === "compact" ? count("etcd-leader-trials", 5) : 0,
      leases: CONTROL_PLANE === "compact" ? count("lease-trials", 5) : 0,
    },
  };
}

/**
 * The bench's options from process.argv, and what the lab runs of the manifests
 * (lab/replica-settings.ts) for the report; a usage error or unreadable manifests exit 2.
 */
export function readBenchOptions(): BenchOptions & { TOPOLOGY: ReturnType<typeof describeTopology> } {
  try {
    const o = parseBenchArgs(process.argv.slice(2), process.env);
    if (o.help) {
      console.log(USAGE);
      process.exit(0);
    }
    // The lab's brokers read FASTFENCE_LAB_BROKERS (lab/kafka.ts).
    process.env.FASTFENCE_LAB_BROKERS = o.BROKERS;
    return { ...o, TOPOLOGY: describeTopology() };
  } catch (err) {
    const usage = err instanceof BenchUsageError ? `\n${USAGE}` : "";
    console.error(`bench/lab.ts: ${err instanceof Error ? err.message : String(err)}${usage}`);
    process.exit(2);
  }
}
