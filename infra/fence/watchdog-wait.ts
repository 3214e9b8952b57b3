// The effects of fence's watchdog level (functions/fence/watchdog-level.pure.ts decides):
// the fencing replica's continuous watch of the heartbeat Leases (an informer on the
// fastfence namespace, fed into watchdog-sightings.ts on this process's monotonic clock),
// and the level's wait within a round — look at the watch, sleep as the verdict says, until
// the node is surely reset, it is refused, or the round's budget ends — then the last look
// (infra/fence/last-look.ts) before the proof is recorded: a node that answers its probe or
// renewed its heartbeat is never counted as reset. It never sends a BMC command, never
// writes to the API, and never compares another machine's clock with this one's.
import { performance } from "node:perf_hooks";
import type { V1Lease } from "@kubernetes/client-node";
import type { Action } from "../../core/decision.ts";
import type { Attempt } from "../../core/incident.ts";
import {
  watchdogAttempt,
  watchdogMayTry,
  watchdogStep,
  type WatchSeen,
} from "../../functions/fence/watchdog-level.pure.ts";
import type { Kube } from "../kube/client.ts";
import { FailoverInformer } from "../kube/failover-informer.ts";
import { forIncident, type Logger } from "../log.ts";
import { lookBeforeOff, type LookDeps } from "./last-look.ts";
import { WatchdogSightings } from "./watchdog-sightings.ts";

type PowerOff = Extract<Action, { kind: "powerOff" }>;

/** The watch the watchdog level reads: what it has seen of a node at monotonic `now`. */
export interface HeartbeatWatch {
  seen(node: string, now: number): WatchSeen;
  stop(): void;
}

/**
 * Starts the continuous watch of the heartbeat Leases in `namespace`; a broken watch is
 * restarted after `restartMs`, a quiet one (no event for `quietMs`, default the sightings'
 * 3 s) moves to another of `kube`'s API servers; either counts as not synced until it has
 * listed again.
 */
export function startHeartbeatWatch(
  kube: Kube,
  namespace: string,
  log: Logger,
  opts: { restartMs?: number; quietMs?: number; mono?: () => number } = {},
): HeartbeatWatch {
  const mono = opts.mono ?? (() => performance.now());
  const quietMs = opts.quietMs ?? 3_000;
  const sightings = new WatchdogSightings(quietMs);
  const informer = new FailoverInformer<V1Lease>({
    name: "heartbeats",
    kube,
    path: `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
    list: (a) => a.coordination.listNamespacedLease({ namespace }),
    quietMs,
    mono,
    log,
  });
  let stopped = false;
  const onLease = (l: V1Lease) => {
    const m = l.metadata;
    if (m?.name) sightings.onLease(m.name, m.resourceVersion ?? "", m.annotations, mono());
  };
  informer.on("add", onLease);
  informer.on("update", onLease);
  informer.on("delete", (l) => l.metadata?.name && sightings.onDelete(l.metadata.name));
  informer.on("listed", () => sightings.setListed(true, mono()));
  informer.on("moved", () => sightings.setListed(false, mono()));
  informer.on("error", (err: unknown) => {
    sightings.setListed(false, mono());
    if (stopped) return;
    log.warn({ incident: "none", node: "none", err }, "heartbeat watch stopped; restarting");
    setTimeout(() => !stopped && void informer.start(), opts.restartMs ?? 500);
  });
  void informer.start();
  return {
    seen: (node, now) => sightings.seen(node, now),
    stop: () => {
      stopped = true;
      void informer.stop();
    },
  };
}

export interface WatchdogLevelDeps {
  watch: HeartbeatWatch;
  look: LookDeps;
  log?: Logger;
  /** Monotonic ms (the watch's clock); default performance.now. */
  mono?: () => number;
  /** Epoch ms for the attempt's times. */
  now: () => number;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/**
 * The watchdog level of a round, after its BMC attempts: undefined when the action has no
 * watchdog level or a BMC answered (watchdogMayTry); else its one attempt. `leftMs`: what
 * is left of the round's budget.
 */
export async function watchdogLevel(
  d: WatchdogLevelDeps,
  a: PowerOff,
  bmcAttempts: readonly Attempt[],
  leftMs: number,
  signal: AbortSignal,
): Promise<Attempt | undefined> {
  const plan = a.watchdog;
  if (!plan || !watchdogMayTry(bmcAttempts) || leftMs <= 0) return undefined;
  const mono = d.mono ?? (() => performance.now());
  const endsAt = mono() + leftMs;
  const base = { round: a.round, by: a.holder, startedAt: new Date(d.now()).toISOString() };
  const log = d.log && forIncident(d.log, a.incident, a.node);
  for (;;) {
    if (signal.aborted) {
      const step = { kind: "outOfTime", code: "FF_WATCHDOG_NOT_EXPIRED", retryInMs: 1 } as const;
      return watchdogAttempt(base, plan.level, { ...step, message: "round cancelled" }, iso(d));
    }
    const step = watchdogStep(plan, d.watch.seen(a.node, mono()), mono(), endsAt);
    if (step.kind === "wait") {
      await d.sleep(step.ms, signal).catch(() => undefined);
      continue;
    }
    if (step.kind === "expired" && a.look) {
      // The last look: a node that answers or renewed since the incident began is not reset.
      const v = await lookBeforeOff(d.look, a.look, a.incident, plan.level);
      if (!v.go)
        return {
          ...base,
          level: plan.level,
          driver: "watchdog",
          finishedAt: iso(d),
          result: "abandoned",
          message: v.message,
          lastLook: v.look,
        };
    }
    const attempt = watchdogAttempt(base, plan.level, step, iso(d));
    log?.info({ result: attempt.result, watchdog: attempt.watchdog }, `watchdog level: ${step.message}`);
    return attempt;
  }
}

const iso = (d: Pick<WatchdogLevelDeps, "now">) => new Date(d.now()).toISOString();
