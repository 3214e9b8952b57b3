// Turns a pure stage (functions/<name>/decide.pure.ts) into an event handler: read the
// view the stage asks for (locate; view-reader.ts), call decide, execute the returned actions in order
// through the adapters, feed action results (power-off attempts, release counts) back into
// the same decide as `result`, and hand the events to emit back to the runtime — only
// after every write succeeded (core/decision.ts states the contract). It also re-drives an
// open incident without an event (`resync`), for stages that accept that. A guarded write
// that fails (409, AlreadyExists, a lease held elsewhere) means the view was stale: it
// re-reads and decides again, a bounded number of times. A power-off round cut short by
// the deadline or a shutdown still gets its result recorded. It never executes an action
// the pure stage did not return; the one adapter-side effect it adds is clearing BMC
// holds (metal3 reboot annotations) of an incident just before its status turns terminal,
// and, when tracing, the creating span's traceparent on a new incident (TRACE_ANNOTATION,
// infra/tracing.ts) and joining that trace whenever a view holds the incident.
import { FastfenceError } from "../../core/errors.ts";
import type {
  ActionResult,
  Decision,
  DecideInput,
  Resync,
  Self,
  View,
  ViewRequest,
} from "../../core/decision.ts";
import { isTerminal, type NodeFence } from "../../core/incident.ts";
import { ROUND_RECORD_MARGIN_MS, roundDeadline } from "../../core/policy.ts";
import type { FfEvent, OutgoingEvent } from "../../events/envelope.ts";
import type { PureStage } from "../../functions/contract.ts";
import type { Metal3Api } from "../bmc/metal3.ts";
import { KubeApiError, type Kube } from "../kube/client.ts";
import { writeLedger } from "../kube/admission-ledger.ts";
import type { IncidentStore } from "../kube/incidents.ts";
import type { LeaseManager } from "../kube/lease.ts";
import type { LeaseHandoff } from "../kube/lease-handoff.ts";
import { OUT_OF_SERVICE_TAINT, type NodeOps } from "../kube/nodes.ts";
import type { IncidentEventRecorder } from "../kube/incident-events.ts";
import type { PlannedReader } from "../kube/planned.ts";
import type { PolicyReader } from "../kube/policy.ts";
import { forIncident } from "../log.ts";
import { TRACE_ANNOTATION } from "../tracing.ts";
import { DecidedInputs } from "./decided-inputs.ts";
import type { EventHandler, HandlerContext, HandlerResult } from "./contract.ts";
import type { PowerExecutor } from "./power-executor.ts";
import { viewReader, type RawLeases } from "./view-reader.ts";

export type { PowerExecutor } from "./power-executor.ts";

export interface StageAdapters {
  kube: Kube;
  incidents: IncidentStore;
  nodes: NodeOps;
  leases: LeaseManager;
  leaseNamespace: string;
  policy: PolicyReader;
  power?: PowerExecutor;
  /** Records a Kubernetes Event when a status write changes an incident's phase or reason (best effort). */
  events?: Pick<IncidentEventRecorder, "written">;
  /** Planned work and other remediators (View.planned); absent: only the policy and the node's own fields hold fencing. */
  planned?: PlannedReader;
  /** metal3 BareMetalHost access (discovery input of fence/recover), scoped to the configured namespaces. */
  metal3?: Metal3Api;
  /** fence: releases a fenced node's leaders' Leases (handOffLeases); absent: nothing is handed off. */
  handoff?: Pick<LeaseHandoff, "handOff">;
}

/** What the executor knows of the deployment, handed to every decision in the view. */
export interface StageWorld {
  /** Identities whose Confirmed incidents may be fenced (S6): View.trustedConfirmers. */
  trustedConfirmers: readonly string[];
}

/** A stage's event handler, plus the level-triggered entry that re-drives an open incident. */
export interface StageRunner {
  handle: EventHandler;
  /** Re-drives one open incident from its state in the API; ignored by stages without locateResync. */
  resync(input: Resync, ctx: HandlerContext): Promise<HandlerResult>;
}

/** A guarded write lost: the view was stale. */
class StaleView extends FastfenceError {
  constructor(what: string, cause?: unknown) {
    super("FF_KUBE_CONFLICT", `${what}: state changed underneath (conflict)`, { cause, retriable: true });
  }
}

/** A guarded write: its guard lost (409 Conflict or AlreadyExists) means a stale view. */
async function guarded<T>(what: string, write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 409) throw new StaleView(what, err);
    throw err;
  }
}

/**
 * How many times a stale view is re-read and re-decided; after that the input ends ignored
 * with code LostRaces (another replica won each race and recorded its outcome).
 */
export const MAX_REDECIDE = 4;

/** Decides on a view, or (with `result`) on the result of an action the last decision asked for. */
type DecideOn = (view: View, now: number, result?: ActionResult) => Decision;

/** The event handler of a stage (its StageRunner's `handle`). */
export function stageHandler(
  stage: PureStage,
  ad: StageAdapters,
  self: Self,
  world: StageWorld,
): EventHandler {
  return stageRunner(stage, ad, self, world).handle;
}

export function stageRunner(stage: PureStage, ad: StageAdapters, self: Self, world: StageWorld): StageRunner {
  /** Inputs this replica decided with a write (PureStage.sameAs). */
  const decided = new DecidedInputs();
  const { readView, readCluster } = viewReader(ad, world);

  async function execute(
    decision: Decision,
    view: View,
    decideOn: DecideOn,
    ctx: HandlerContext,
    leases: RawLeases,
  ): Promise<{ emit: OutgoingEvent[]; details: string[] }> {
    const emit: OutgoingEvent[] = [];
    const details: string[] = [];
    let last: NodeFence | undefined = view.incident;
    const counts = { podsDeleted: 0, volumeAttachmentsDeleted: 0, vmLaunchersDeleted: 0 };
    let released = false;
    let deletes: Promise<void>[] = [];
    const drain = async () => {
      const pending = deletes;
      deletes = [];
      await Promise.all(pending);
    };
    // Open the BMC session during the lease and Fencing writes (it changes no power state).
    const off = decision.actions.find((a) => a.kind === "powerOff");
    // Nodes whose launcher pods the VM release deletes: the pod delete leaves them (counted once).
    const vmNodes = new Set(decision.actions.map((a) => (a.kind === "deleteVmLaunchers" ? a.node : "")));
    if (off && ad.power?.prepare) void ad.power.prepare(off, ctx.signal);
    for (const a of decision.actions) {
      ctx.signal.throwIfAborted();
      if (!a.kind.startsWith("delete")) await drain();
      switch (a.kind) {
        case "createIncident": {
          // The incident's trace is the one of the delivery that creates it (infra/tracing.ts).
          const tp = ctx.trace?.anchor();
          const meta = a.incident.metadata;
          const incident = tp
            ? {
                ...a.incident,
                metadata: { ...meta, annotations: { ...meta.annotations, [TRACE_ANNOTATION]: tp } },
              }
            : a.incident;
          last = await guarded(`create incident ${meta.name}`, ad.incidents.create(incident));
          if (ad.events) void ad.events.written(undefined, last);
          break;
        }
        case "removeClosedIncident":
          await guarded(
            `remove closed incident ${a.name}`,
            ad.incidents.removeClosed(a.name, a.expectedResourceVersion),
          );
          last = undefined;
          break;
        case "updateIncidentStatus": {
          if (isTerminal(a.status.phase) && ad.power?.releaseHolds) {
            // Before the write: if this fails the event is redelivered and decided again.
            const released = await ad.power.releaseHolds(a.name, view.policy);
            if (released.length)
              forIncident(ctx.log, a.name, last?.spec.nodeName ?? view.node?.name ?? "unknown").info(
                { hosts: released },
                "released BMC power-off holds",
              );
          }
          const before = last?.metadata.name === a.name ? last.status : undefined;
          last = await guarded(
            `update incident ${a.name}`,
            ad.incidents.writeStatus(a.name, a.expectedResourceVersion, a.status),
          );
          if (ad.events) void ad.events.written(before, last);
          break;
        }
        case "writeLedger":
          await guarded(
            "admission ledger",
            writeLedger(ad.kube, ad.leaseNamespace, a.expectedResourceVersion, a.admitted),
          );
          break;
        case "takeLease": {
          // Guarded by the view's copy when there is one (a changed Lease loses: stale view).
          const known = leases.has(a.leaseName) ? { lease: leases.get(a.leaseName) } : undefined;
          leases.delete(a.leaseName);
          const opts = { known, durationMs: a.durationMs }; // the policy's leaseDurationMs
          const r = await ad.leases.acquire(a.leaseName, a.holder, ctx.clock.now(), opts);
          if (!r.acquired) throw new StaleView(`lease ${a.leaseName} is held by ${r.holder}`);
          break;
        }
        case "releaseLease":
          // Best effort and not awaited (core/decision.ts contract 5): the events go out now.
          void ad.leases
            .release(a.leaseName, a.holder)
            .catch((err: unknown) =>
              ctx.log.warn({ err }, "releasing the lease failed; it expires by itself"),
            );
          break;
        case "waitUntil": {
          // A wait that opens a decision leaves its view old (a pause, a recovery, another
          // driver may have come meanwhile): decide again on a fresh one, which no longer
          // needs to wait (core/decision.ts contract 6).
          const wait = a.at - ctx.clock.now();
          if (wait > 0) {
            await ctx.clock.sleep(wait, ctx.signal);
            if (a === decision.actions[0])
              throw new StaleView(`waited ${wait} ms until ${new Date(a.at).toISOString()}`);
          }
          break;
        }
        case "powerOff": {
          if (!ad.power)
            throw new FastfenceError("FF_INVALID_CONFIG", `${stage.name} cannot run power actions`);
          if (!last) throw new FastfenceError("FF_INTERNAL", "powerOff without an incident");
          ctx.extendDeadline(roundDeadline(ctx.clock.now(), a.timeoutMs)); // its own budget, not the handler's
          const attempts = await ad.power.powerOff(a, view.policy, ctx.signal);
          const after = { ...view, incident: last };
          const follow = decideOn(after, ctx.clock.now(), { kind: "powerOff", attempts });
          details.push(
            follow.outcome.kind === "processed"
              ? (follow.outcome.detail ?? "")
              : `power-off result ${follow.outcome.kind}`,
          );
          // A round cut short (deadline, shutdown) is still recorded, on a deadline of its
          // own: the recording margin of the timeout chain (core/timeout-chain.ts).
          const record = ctx.signal.aborted
            ? { ...ctx, signal: AbortSignal.timeout(ROUND_RECORD_MARGIN_MS) }
            : ctx;
          const r = await execute(follow, after, decideOn, record, leases);
          emit.push(...r.emit);
          details.push(...r.details);
          break;
        }
        case "powerOn":
          if (!ad.power)
            throw new FastfenceError("FF_INVALID_CONFIG", `${stage.name} cannot run power actions`);
          await ad.power.powerOn(a, view.policy, ctx.signal);
          break;
        case "markFencedOff":
          await ad.nodes.setFencedOff(a.node, a.value);
          break;
        case "handOffLeases": {
          // Awaited by nothing (contract 7); not tied to the delivery's signal, which ends with
          // the delivery (its own waits are bounded: infra/kube/lease-handoff.ts).
          const { node, incident } = a.plan;
          const after = { ...view, incident: last };
          void (ad.handoff ? ad.handoff.handOff(a.plan) : Promise.resolve([]))
            .then(async (results) => {
              const result = { kind: "leasesHandedOff" as const, node, incident, results };
              const r = await execute(decideOn(after, ctx.clock.now(), result), after, decideOn, ctx, leases);
              ctx.log.info({ incident, node, details: r.details }, "lease hand-off ended");
            })
            .catch((err: unknown) => ctx.log.warn({ err, incident }, "lease hand-off: result not recorded"));
          break;
        }
        case "setTaint":
          await ad.nodes.setTaint(a.node, { ...OUT_OF_SERVICE_TAINT, ...a.taint }, true);
          // A release with every delete turned off by the policy is still a release.
          released = true;
          break;
        case "removeTaint":
          await ad.nodes.setTaint(a.node, { ...OUT_OF_SERVICE_TAINT, ...a.taint }, false);
          break;
        // Release deletes are independent: they run concurrently, all awaited before what follows.
        case "deletePods":
          deletes.push(
            ad.nodes
              .forceDeletePods(a.node, { exceptVmLaunchers: vmNodes.has(a.node) })
              .then((d) => void (counts.podsDeleted += d.length)),
          );
          released = true;
          break;
        case "deleteVolumeAttachments":
          deletes.push(
            ad.nodes
              .deleteVolumeAttachments(a.node)
              .then((d) => void (counts.volumeAttachmentsDeleted += d.length)),
          );
          released = true;
          break;
        case "deleteVmLaunchers":
          deletes.push(
            ad.nodes.deleteVmLaunchers(a.node).then((d) => void (counts.vmLaunchersDeleted += d.length)),
          );
          released = true;
          break;
      }
    }
    await drain();
    if (released && last) {
      const after = { ...view, incident: last };
      const follow = decideOn(after, ctx.clock.now(), { kind: "released", counts });
      const r = await execute(follow, after, decideOn, ctx, leases);
      emit.push(...r.emit);
      details.push(...r.details);
    }
    emit.unshift(...decision.emit);
    return { emit, details };
  }

  /** Reads the view, decides and executes; on a stale view, re-reads and decides again. */
  async function run(
    req: ViewRequest,
    decideOn: DecideOn,
    needsCluster: ((view: View, now: number) => boolean) | undefined,
    ctx: HandlerContext,
  ): Promise<HandlerResult> {
    for (let round = 1; ; round++) {
      const now = ctx.clock.now();
      // A stage that can tell whether it needs the cluster lists gets the view without
      // them first; they are listed only if decide would use them.
      const deferCluster = req.cluster && needsCluster !== undefined;
      const leases: RawLeases = new Map();
      let view = await readView(deferCluster ? { ...req, cluster: false } : req, now, leases);
      if (deferCluster && needsCluster!(view, now))
        view = { ...view, ...(await readCluster(req.nodeList ? view.nodes : undefined)) };
      ctx.trace?.join(view.incident?.metadata.annotations?.[TRACE_ANNOTATION]);
      const decision = decideOn(view, now);
      try {
        const { emit } = await execute(decision, view, decideOn, ctx, leases);
        return { outcome: decision.outcome, emit };
      } catch (err) {
        if (err instanceof StaleView && round < MAX_REDECIDE) {
          ctx.log.debug({ round, reason: err.message }, "stale view; re-reading and deciding again");
          continue;
        }
        if (err instanceof StaleView) {
          // Another replica won every race: its outcome is recorded; ours is a duplicate.
          return {
            outcome: {
              kind: "ignored",
              code: "LostRaces",
              reason: `lost ${round} races to other replicas: ${err.message}`,
            },
            emit: [],
          };
        }
        throw err;
      }
    }
  }

  return {
    handle: async (event: FfEvent, ctx: HandlerContext): Promise<HandlerResult> => {
      if (stage.screen) {
        const now = ctx.clock.now();
        const early = stage.screen({ event, policy: await ad.policy.get(now), now });
        if (early) return { outcome: early.outcome, emit: [] };
      }
      const now0 = ctx.clock.now();
      const policy = stage.sameAs ? await ad.policy.get(now0) : undefined;
      const key = policy && stage.sameAs?.({ event, policy, now: now0 });
      const copy = key && decided.copyOf(key, now0, policy.corroboration.evidenceWindowMs);
      if (copy) return copy;
      const input = (view: View, now: number, result?: ActionResult): DecideInput<FfEvent> => ({
        event,
        view,
        now,
        self,
        ...(result ? { result } : {}),
      });
      const needsCluster = stage.clusterNeeded;
      const out = await run(
        stage.locate(event),
        (view, now, result) => stage.decide(input(view, now, result)),
        needsCluster ? (view, now) => needsCluster(input(view, now)) : undefined,
        ctx,
      );
      if (key !== undefined && out.outcome.kind === "processed") decided.remember(key, ctx.clock.now());
      return out;
    },
    resync: async (r: Resync, ctx: HandlerContext): Promise<HandlerResult> => {
      const { locateResync, resync } = stage;
      if (!locateResync || !resync)
        return {
          outcome: {
            kind: "ignored",
            code: "UnhandledInput",
            reason: `${stage.name} does not re-drive incidents`,
          },
          emit: [],
        };
      return run(
        locateResync(r),
        (view, now, result) => resync({ event: r, view, now, self, ...(result ? { result } : {}) }),
        undefined,
        ctx,
      );
    },
  };
}
