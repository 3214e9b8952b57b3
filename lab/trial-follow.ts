// The follow step of a trial: from the fault on, poll the lab until the incident is over
// or the scenario's time is up, putting each incident phase (from the NodeFence's own
// timestamps), the power-off read-back, the victim's pods being gone and the replacement
// pods Running on the live timeline, ms from the fault. Read only: it never changes the
// lab or the cluster.
import type { NodeFence } from "../core/incident.ts";
import { sleep } from "../harness/env/base.ts";
import { listIncidents } from "./event-log.ts";
import type { Lab } from "./lab.ts";
import type { ScenarioSpec } from "./scenarios.ts";
import { podsOn, type WorkloadNames } from "./workloads.ts";

/** How many polls (100 ms each) between two listings of every incident. */
const FULL_LIST_EVERY = 10;

/** The live timeline of a trial: lines "+ms what", ms from the fault. */
export class Timeline {
  readonly t0: number;
  readonly lines: { ms: number; what: string }[] = [];
  private readonly live: (line: string) => void;

  constructor(t0: number, live: (line: string) => void) {
    this.t0 = t0;
    this.live = live;
  }

  say(what: string, at = Date.now()): void {
    const ms = at - this.t0;
    this.lines.push({ ms, what });
    this.live(`  +${String(ms).padStart(6)} ms  ${what}`);
  }
}

export interface Followed {
  /** The victim's incident as last read (opened during this trial). */
  incident?: NodeFence;
  replacementRunningMs?: number;
  statefulReplacementMs?: number;
}

/**
 * Follow the trial until it is done (faulted scenarios: the victim's workloads released,
 * its pods gone and a replacement Running; the baseline: the replacement Running) or
 * `timeoutMs` after the fault. `before` names incidents that are history.
 */
export async function follow(
  lab: Lab,
  spec: ScenarioSpec,
  o: { victim: string; wl: WorkloadNames; before: Set<string>; timeline: Timeline; timeoutMs: number },
): Promise<Followed> {
  const { victim, wl, timeline } = o;
  const t0 = timeline.t0;
  const say = (what: string, at?: number) => timeline.say(what, at);
  const end = t0 + o.timeoutMs;
  const seen = new Set<string>();
  const out: Followed = {};
  let podsGoneMs: number | undefined;
  for (let poll = 0; Date.now() < end; poll++) {
    // The victim's incidents on every poll, everyone's once a second (an incident about
    // another node is a violation the check reports; here it only goes on the timeline):
    // listing every incident of the run ten times a second loaded the API server and the
    // two cores this bench measures, more with every trial.
    const everyone = poll % FULL_LIST_EVERY === 0;
    const incs = (
      await listIncidents(lab, everyone ? undefined : o.victim).catch(() => [] as NodeFence[])
    ).filter((i) => !o.before.has(i.metadata.name));
    for (const inc of incs) {
      const st = inc.status;
      if (!st) continue;
      for (const [k, v] of Object.entries(st.timestamps)) {
        const key = `${inc.metadata.name}/${k}`;
        if (v && !seen.has(key)) {
          seen.add(key);
          say(
            `${inc.spec.nodeName}: ${k}${k === "confirmed" ? ` (observers: ${[...new Set(st.evidence.map((e) => e.observerNode))].join(", ")})` : ""}`,
            Date.parse(v),
          );
        }
      }
      if (st.powerOffConfirmedAt && !seen.has(`${inc.metadata.name}/off`)) {
        seen.add(`${inc.metadata.name}/off`);
        const a = st.attempts.find((x) => x.result === "off-confirmed");
        say(
          `${inc.spec.nodeName}: power-off read back ${a?.readBackState ?? "?"} via ${a?.driver ?? "?"} (by ${a?.by ?? "?"})`,
          Date.parse(st.powerOffConfirmedAt),
        );
      }
      if (inc.spec.nodeName === victim) out.incident = inc;
    }
    if (spec.faulted) {
      if (podsGoneMs === undefined && out.incident?.status?.timestamps.released) {
        const left = await podsOn(lab, victim);
        if (left.length === 0) {
          podsGoneMs = Date.now() - t0;
          say(`no pods bound to ${victim} any more`);
        }
      }
      if (out.replacementRunningMs === undefined) {
        const pods = (
          await lab.core.listNamespacedPod({ namespace: "default", labelSelector: `app=${wl.web}` })
        ).items;
        const r = pods.find(
          (p) =>
            p.status?.phase === "Running" && p.spec?.nodeName !== victim && !p.metadata?.deletionTimestamp,
        );
        if (r) {
          out.replacementRunningMs = Date.now() - t0;
          say(`replacement ${r.metadata!.name} Running on ${r.spec!.nodeName}`);
        }
      }
      if (out.statefulReplacementMs === undefined) {
        const p = await lab.core
          .readNamespacedPod({ name: wl.dbPod, namespace: "default" })
          .catch(() => undefined);
        if (
          p &&
          p.status?.phase === "Running" &&
          p.spec?.nodeName !== victim &&
          !p.metadata?.deletionTimestamp
        ) {
          out.statefulReplacementMs = Date.now() - t0;
          say(`${wl.dbPod} (RWO volume) Running on ${p.spec!.nodeName}`);
        }
      }
      const done = spec.baseline
        ? out.replacementRunningMs !== undefined
        : out.replacementRunningMs !== undefined &&
          !!out.incident?.status?.timestamps.released &&
          podsGoneMs !== undefined;
      if (done) break;
    }
    // Phase times come from the incident's own timestamps; this poll only times the
    // replacement pods (±100 ms) and must not load the API server it measures.
    await sleep(spec.baseline ? 500 : 100);
  }
  return out;
}
