// Level-triggered progress (controller-runtime's resync, Pacemaker's transition engine):
// every replica of a stage that re-drives incidents lists the open NodeFences every
// reconcile.intervalMs (jittered, so replicas spread out), and hands each one in a phase
// the stage owns (PureStage.resyncPhases) to the stage runner's `resync`, which decides on
// the incident as the API holds it now. What a resync emits is published like an event's
// outcome. Every replica does this: the pure stage ignores what is not overdue and the
// per-node Lease and guarded writes decide who acts (S3), so running it everywhere is safe.
// Each resync is a stage span in the incident's trace (its TRACE_ANNOTATION, infra/tracing.ts),
// recorded only when it did something; its events carry that span's context.
// Each pass's list (every open incident) is also handed to `observe` (the open-incident
// gauges, infra/runtime/incident-gauges.ts). It decides nothing itself and never writes
// anything the stage did not decide; a failed pass is logged and the next one tries again.
import type { Clock } from "../../core/clock.ts";
import type { Resync } from "../../core/decision.ts";
import { asFastfenceError } from "../../core/errors.ts";
import { statusOf, type NodeFence, type Phase } from "../../core/incident.ts";
import type { FencingPolicySpec } from "../../core/policy.ts";
import type { OutgoingEvent } from "../../events/envelope.ts";
import { forIncident, type Logger } from "../log.ts";
import { noSpan, noTracing, TRACE_ANNOTATION, type StageSpan, type Tracing } from "../tracing.ts";
import { handlerDeadline } from "./dispatch.ts";
import type { StageRunner } from "./stage-executor.ts";

export interface ReconcilerOptions {
  stage: string;
  /** PureStage.resyncPhases: the open incidents this stage re-drives. */
  phases: readonly Phase[];
  /** PureStage.resyncWants: of those, the ones worth a view read (default: all). */
  wants?: (incident: NodeFence, now: number, policy: FencingPolicySpec) => boolean;
  runner: StageRunner;
  /** The open (non-terminal) incidents, one API list. */
  listOpen(): Promise<NodeFence[]>;
  /** The policy in force (reconcile.intervalMs is read from it on every pass). */
  policy(now: number): Promise<FencingPolicySpec>;
  /**
   * Publishes what a resync emitted (the runtime's publish, with an envelope per event);
   * `traceparent` is the resync's span when tracing (the events' trace context).
   */
  publish(events: OutgoingEvent[], traceparent?: string): Promise<void>;
  /** Deadline of one resync, like an event handler's. */
  handlerTimeoutMs: number;
  clock: Clock;
  log: Logger;
  /** Jitter source in [0, 1): injected for tests. */
  random?: () => number;
  /** Sees every pass's list of open incidents, all phases (the incident gauges). */
  observe?(open: readonly NodeFence[], policy: FencingPolicySpec, now: number): void;
  /** Default: noTracing. */
  tracing?: Tracing;
}

export interface Reconciler {
  /** Runs one pass now (also what the loop calls); resolves when every incident was tried. */
  pass(): Promise<PassReport>;
  stop(): Promise<void>;
}

/** What one pass did, for logs and tests. */
export interface PassReport {
  /** Open incidents in the stage's phases. */
  considered: number;
  /** Incidents a resync acted on (processed). */
  driven: string[];
  /** Incidents whose resync failed (logged; tried again next pass). */
  failed: string[];
}

/** Jitter of the interval: each wait is intervalMs × (1 ± JITTER). */
const JITTER = 0.2;
/** Wait after a failed pass before the next, when the policy cannot even be read. */
const FALLBACK_INTERVAL_MS = 5_000;

export function startReconciler(opts: ReconcilerOptions): Reconciler {
  const { runner, clock, log } = opts;
  const random = opts.random ?? Math.random;
  const tracing = opts.tracing ?? noTracing;
  const stopping = new AbortController();
  /** The pass in flight, which stop() lets finish. */
  let current: Promise<PassReport> | undefined;

  function resyncOne(inc: NodeFence, report: PassReport): Promise<void> {
    if (!tracing.enabled) return drive(inc, report, noSpan);
    const input = {
      stage: opts.stage,
      input: "resync",
      node: inc.spec.nodeName,
      incident: inc.metadata.name,
      traceparent: inc.metadata.annotations?.[TRACE_ANNOTATION],
    };
    return tracing.stage(input, (span) => drive(inc, report, span));
  }

  async function drive(inc: NodeFence, report: PassReport, span: StageSpan): Promise<void> {
    const r: Resync = { kind: "resync", incident: inc.metadata.name, node: inc.spec.nodeName };
    const ilog = forIncident(log, r.incident, r.node).child({ input: "resync" });
    // The same deadline as an event's handler, extended by a power-off round it starts.
    const ctrl = new AbortController();
    const onStop = () => ctrl.abort(stopping.signal.reason);
    stopping.signal.addEventListener("abort", onStop, { once: true });
    const deadline = handlerDeadline(ctrl, clock, opts.handlerTimeoutMs);
    const started = clock.now();
    try {
      const res = await runner.resync(r, {
        log: ilog,
        clock,
        signal: ctrl.signal,
        extendDeadline: deadline.extend,
        trace: span,
      });
      span.outcome(res.outcome, res.emit.length);
      if (res.outcome.kind === "ignored") {
        ilog.debug({ outcome: res.outcome }, "resync: nothing to do");
        return;
      }
      if (res.emit.length) await opts.publish(res.emit, span.traceparent());
      const level = res.outcome.kind === "processed" ? "info" : "warn";
      ilog[level](
        { outcome: res.outcome, emitted: res.emit.map((e) => e.type), handlerMs: clock.now() - started },
        res.outcome.kind === "processed" ? "stalled incident re-driven" : "resync refused the incident",
      );
      if (res.outcome.kind === "processed") report.driven.push(r.incident);
    } catch (err) {
      const e = asFastfenceError(err);
      span.fail(e.code, e.message);
      report.failed.push(r.incident);
      if (!stopping.signal.aborted)
        ilog.warn({ err: e.toJSON() }, "resync failed; the next pass tries again");
    } finally {
      deadline.clear();
      stopping.signal.removeEventListener("abort", onStop);
    }
  }

  async function pass(): Promise<PassReport> {
    const report: PassReport = { considered: 0, driven: [], failed: [] };
    const wants = opts.wants ?? (() => true);
    const all = await opts.listOpen();
    const now = clock.now();
    const policy = opts.observe || opts.wants ? await opts.policy(now) : undefined;
    if (opts.observe) opts.observe(all, policy!, now);
    const open = all.filter((i) => opts.phases.includes(statusOf(i).phase) && wants(i, now, policy!));
    report.considered = open.length;
    // One at a time: a pass is background work and must not crowd out the event path.
    for (const inc of open) {
      if (stopping.signal.aborted) break;
      await resyncOne(inc, report);
    }
    return report;
  }

  async function loop(): Promise<void> {
    while (!stopping.signal.aborted) {
      let interval = FALLBACK_INTERVAL_MS;
      try {
        interval = (await opts.policy(clock.now())).reconcile.intervalMs;
        await clock.sleep(interval * (1 - JITTER + 2 * JITTER * random()), stopping.signal);
        current = pass();
        const report = await current;
        if (report.driven.length || report.failed.length)
          log.info({ stage: opts.stage, ...report }, "reconcile pass");
      } catch (err) {
        if (stopping.signal.aborted) return;
        log.warn(
          { incident: "none", node: "none", err: asFastfenceError(err).toJSON() },
          "reconcile pass failed; trying again next interval",
        );
        await clock.sleep(interval, stopping.signal).catch(() => undefined);
      }
    }
  }

  void loop();
  return {
    pass,
    stop: async () => {
      stopping.abort(new Error("reconciler stopped"));
      await current?.catch(() => undefined);
    },
  };
}
