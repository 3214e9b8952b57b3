// Seeded fault schedules for `make chaos` (Jepsen's generators are the model): a seed
// gives one schedule of at most SCHEDULE_MS, with several faults at random moments on
// random nodes, overlapping — at most one node really broken (crash, hang, full
// partition; optionally resumed or healed later), and beside it faults that must not get
// anything fenced (a healthy node cut off from its peers — on the compact plane it may be:
// mayBeFenced — or from the API, function replicas
// crashed on a healthy node, its event source stopped and started again), BMC faults (slow,
// 2-8 s a call; stuck; unreachable; cleared later or not), a Kafka broker killed on its own, a Redfish
// BMC that lies (reads Off without powering off) and pipeline records replayed. The same
// seed always gives the same schedule, so a failing one is replayed with
// `--seed S --schedules 1`. Pure: no I/O, no clock.

/** The longest schedule: every fault is injected, and every undo done, within it. */
export const SCHEDULE_MS = 90_000;

/**
 * How long after a `fn-crash` the node's function replicas run again: the kubelet's first
 * crash-loop back-off. Before seed 182 they stayed down until the schedule's reset, so a
 * schedule that crashed the functions of both survivors left no fence replica anywhere
 * (seed 189: a liveness failure no cluster would show).
 */
export const FUNCTION_RESTART_MS = 10_000;

/**
 * How late a slow BMC answers every call, ms: what real BMCs do (2-3 s is common) up to
 * the 8 s issue 14 names. The chaos lab's policy fits 8 s (lab/timeouts.ts SLOW_BMC_TIMEOUTS).
 */
export const SLOW_LATENCIES_MS = [2_000, 3_000, 5_000, 8_000] as const;

export type BreakKind = "crash" | "hang" | "partition";
export type ChaosBmcFault = "slow" | "stuck" | "unreachable" | "lying";

/** One step of a schedule, at `at` ms from its start. */
export type ChaosStep =
  | { at: number; kind: BreakKind; node: string }
  /** Undo a hang (SIGCONT) or a full partition (heal). */
  | { at: number; kind: "resume" | "heal"; node: string }
  | { at: number; kind: "partial"; node: string; mode: "peers" | "api" }
  | { at: number; kind: "partial-heal"; node: string }
  /** `latencyMs`: how late a `slow` BMC answers every call (SLOW_LATENCIES_MS). */
  | { at: number; kind: "bmc"; node: string; fault: ChaosBmcFault | "none"; latencyMs?: number }
  /**
   * Crash every function replica on a node (not its event source); its agent starts them
   * again FUNCTION_RESTART_MS later, as the kubelet restarts a crashed container.
   */
  | { at: number; kind: "fn-crash"; node: string }
  /** Stop a node's event source and start it again (a crashed or rolled pod). */
  | { at: number; kind: "source-crash"; node: string }
  /** SIGKILL a node's Kafka broker alone; it stays dead until the schedule's reset. Only on
   * the broken node before its break, or on any node when none breaks. */
  | { at: number; kind: "broker-kill"; node: string }
  /**
   * Publish again, unchanged, every pipeline record of the last `windowMs` (observations:
   * the newest REPLAY_OBSERVATIONS), each as the principal allowed to write its topic: a
   * producer's retries and a replica with that identity replaying old records. Concerns
   * no node (`node` is REPLAY_NODE).
   */
  | { at: number; kind: "replay"; node: typeof REPLAY_NODE; windowMs: number };

/** The `node` of a step that concerns no node. */
export const REPLAY_NODE = "*";

export interface ChaosNode {
  name: string;
  /** IPMI BMCs in the lab support only "unreachable". */
  bmc: "ipmi" | "redfish";
}

export interface Schedule {
  seed: number;
  /** Steps in time order. */
  steps: ChaosStep[];
  /** The node the schedule really breaks, if any (the only node that may be fenced, with mayBeFenced's). */
  broken?: string;
}

/** mulberry32: a small, well-mixed 32-bit PRNG; the same seed gives the same sequence. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The schedule of `seed` on these nodes. */
export function scheduleFor(seed: number, nodes: readonly ChaosNode[]): Schedule {
  const r = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const ms = (lo: number, hi: number) => Math.round(lo + r() * (hi - lo));
  const steps: ChaosStep[] = [];
  const names = nodes.map((n) => n.name);
  // The break: most schedules have one, a few have none (only faults that must not fence).
  const broken = r() < 0.85 ? pick(names) : undefined;
  if (broken) {
    const kind = pick<BreakKind>(["crash", "crash", "hang", "partition"]);
    const at = ms(0, 20_000);
    steps.push({ at, kind, node: broken });
    // A hang or partition may end early (a node back before or while it is fenced).
    if (kind !== "crash" && r() < 0.35)
      steps.push({ at: at + ms(1_000, 30_000), kind: kind === "hang" ? "resume" : "heal", node: broken });
  }
  const others = names.filter((n) => n !== broken);
  // One or two faults that must not get a healthy node fenced, each on its own node other
  // than the broken one.
  for (let i = 0, n = 1 + Math.floor(r() * 2); i < n && others.length; i++) {
    const node = others.splice(Math.floor(r() * others.length), 1)[0]!;
    const at = ms(0, 40_000);
    if (r() < 0.5) {
      steps.push({ at, kind: "partial", node, mode: pick(["peers", "api"] as const) });
      steps.push({ at: at + ms(2_000, 20_000), kind: "partial-heal", node });
    } else steps.push({ at, kind: "fn-crash", node });
  }
  // BMC trouble, often on the broken node itself.
  if (r() < 0.6) {
    const node = broken && r() < 0.7 ? broken : pick(names);
    const bmc = nodes.find((n) => n.name === node)!.bmc;
    const fault: ChaosBmcFault = bmc === "ipmi" ? "unreachable" : pick(["slow", "stuck", "unreachable"]);
    const at = ms(0, 30_000);
    steps.push({ at, kind: "bmc", node, fault });
    if (r() < 0.7) steps.push({ at: at + ms(2_000, 30_000), kind: "bmc", node, fault: "none" });
  }
  // Drawn last, so every seed keeps the steps it had before these kinds existed.
  // The event source of a node other than the broken one, stopped and started again.
  const healthy = names.filter((n) => n !== broken);
  if (healthy.length && r() < 0.3) {
    const at = ms(0, 40_000);
    steps.push({ at, kind: "source-crash", node: pick(healthy) });
  }
  // A broker killed on its own: on the broken node, before its break (the broker dies
  // first, then the node), or on any node when none breaks. Not beside a broken node: that
  // leaves one broker of three, no controller quorum and no readable event log, so nothing
  // could be checked (seed 101 of the first run with this kind).
  if (r() < 0.25) {
    const brk = steps.find((x) => x.node === broken && ["crash", "hang", "partition"].includes(x.kind));
    const at = Math.floor(r() * (brk ? brk.at : 40_000));
    if (!brk) steps.push({ at, kind: "broker-kill", node: pick(names) });
    else if (at < brk.at) steps.push({ at, kind: "broker-kill", node: brk.node });
  }
  // Drawn after the kinds above, so their seeds keep those steps. A Redfish BMC that lies
  // (reads Off, powers nothing off), often the broken node's, on a node without other BMC
  // trouble: its release then rests on the lie (reported apart from S1-S6, lab/bmc-lies.ts).
  if (r() < 0.25) {
    const redfish = nodes.filter((n) => n.bmc === "redfish").map((n) => n.name);
    const node =
      broken && redfish.includes(broken) && r() < 0.7 ? broken : pick(redfish.length ? redfish : names);
    const at = ms(0, 30_000);
    const free = !steps.some((x) => x.kind === "bmc" && x.node === node);
    if (redfish.includes(node) && free) {
      steps.push({ at, kind: "bmc", node, fault: "lying" });
      if (r() < 0.5) steps.push({ at: at + ms(2_000, 30_000), kind: "bmc", node, fault: "none" });
    }
  }
  // Records replayed: those of the last 10 s (duplicates of the running incident's) or of
  // the last 5 minutes (earlier schedules' incidents, long Released, their nodes healthy).
  if (r() < 0.3) {
    const at = ms(0, 40_000);
    steps.push({ at, kind: "replay", node: REPLAY_NODE, windowMs: r() < 0.5 ? 10_000 : 300_000 });
  }
  // Drawn after every kind above, so their seeds keep those steps: how late a slow BMC is.
  const latencyMs = pick(SLOW_LATENCIES_MS);
  for (const x of steps) if (x.kind === "bmc" && x.fault === "slow") x.latencyMs = latencyMs;
  steps.sort((a, b) => a.at - b.at);
  return { seed, steps: steps.filter((s) => s.at < SCHEDULE_MS), ...(broken ? { broken } : {}) };
}

/** One line per step, for logs and the report. */
export function describe(s: Schedule): string {
  return s.steps
    .map((x) => {
      const extra =
        x.kind === "partial"
          ? ` ${x.mode}`
          : x.kind === "bmc"
            ? ` ${x.fault}${x.latencyMs ? ` ${x.latencyMs / 1000}s` : ""}`
            : x.kind === "replay"
              ? ` ${x.windowMs / 1000}s`
              : "";
      return `+${(x.at / 1000).toFixed(1)}s ${x.kind}${extra} ${x.node}`;
    })
    .join(", ");
}

/**
 * Nodes the schedule may get fenced although they never broke: on the compact control
 * plane, a node cut off from its peers (`partial` peers) is cut off from the etcd quorum
 * too — its own API server cannot serve, and on a real compact cluster its API VIP is on
 * the other side as well — so the majority cannot tell it from a failed node, and fencing
 * it is a right outcome (as a partitioned minority is fenced), though not a required one
 * (its liveness rules stay those of a healthy node). On the host plane it keeps the API and
 * must never be fenced.
 */
export function mayBeFenced(s: Schedule, controlPlane: "compact" | "host"): string[] {
  if (controlPlane === "host") return [];
  const out = new Set<string>();
  for (const x of s.steps) if (x.kind === "partial" && x.mode === "peers") out.add(x.node);
  return [...out];
}
