// Formats an incident's event chain (from the Kafka topics, the audit trail) as a
// timeline: each event's time, offset from the first event of the chain, the latency
// since the previous stage, its type and a one-line summary. Pure: takes decoded
// events, returns text and rows; never reads Kafka itself.
import type { FfEvent } from "./envelope.ts";

export interface TraceRow {
  time: string;
  /** ms since the first event of the chain. */
  sinceStartMs: number;
  /** ms since the previous event of the chain. */
  stageMs: number;
  type: string;
  source: string;
  incident?: string;
  summary: string;
}

function summary(ev: FfEvent): string {
  const d = (ev.data ?? {}) as Record<string, unknown>;
  const pick = (...keys: string[]) =>
    keys
      .filter((k) => d[k] !== undefined && typeof d[k] !== "object")
      .map((k) => `${k}=${String(d[k])}`)
      .join(" ");
  const obs = d.observer as { node?: string } | undefined;
  return [
    obs?.node ? `observer=${obs.node}` : "",
    pick(
      "result",
      "consecutiveMisses",
      "reason",
      "change",
      "ready",
      "driver",
      "level",
      "podsDeleted",
      "volumeAttachmentsDeleted",
      "vmLaunchersDeleted",
      "code",
      "phase",
      "final",
    ),
  ]
    .filter(Boolean)
    .join(" ");
}

/**
 * Events about `key` (a node name or an incident name): every event whose incident is
 * `key`, plus, for a node, the observations of that node. For an incident, observations
 * of its node from shortly before its first event are included so detection shows. An
 * event read twice (the same source and id: a catalog topic and the Broker's topic, which
 * the bridge KafkaSource copies it to) is listed once.
 */
export function selectChain(all: readonly FfEvent[], key: string, leadInMs = 5000): FfEvent[] {
  const seen = new Set<string>();
  const events = all.filter((e) => {
    const id = `${e.source}\u0000${e.id}`;
    return seen.has(id) ? false : (seen.add(id), true);
  });
  const byIncident = events.filter((e) => e.ffincident === key);
  let chain: FfEvent[];
  if (byIncident.length > 0) {
    const node = byIncident[0]!.subject;
    const first = Math.min(...byIncident.map((e) => Date.parse(e.time)));
    const last = Math.max(...byIncident.map((e) => Date.parse(e.time)));
    chain = events.filter(
      (e) =>
        e.ffincident === key ||
        (!e.ffincident &&
          e.subject === node &&
          Date.parse(e.time) >= first - leadInMs &&
          Date.parse(e.time) <= last),
    );
  } else chain = events.filter((e) => e.subject === key);
  return [...chain].sort((a, b) => Date.parse(a.time) - Date.parse(b.time));
}

export function traceRows(chain: readonly FfEvent[]): TraceRow[] {
  if (chain.length === 0) return [];
  const t0 = Date.parse(chain[0]!.time);
  let prev = t0;
  return chain.map((ev) => {
    const t = Date.parse(ev.time);
    const row: TraceRow = {
      time: ev.time,
      sinceStartMs: t - t0,
      stageMs: t - prev,
      type: ev.type.replace(/^io\.fastfence\./, ""),
      source: ev.source.replace(/^\/fastfence\//, ""),
      ...(ev.ffincident ? { incident: ev.ffincident } : {}),
      summary: summary(ev),
    };
    prev = t;
    return row;
  });
}

export function formatTrace(rows: readonly TraceRow[]): string {
  if (rows.length === 0) return "no events found";
  const lines = rows.map(
    (r) =>
      `${r.time}  +${String(r.sinceStartMs).padStart(6)} ms  (Δ ${String(r.stageMs).padStart(5)} ms)  ${r.type.padEnd(24)} ${r.source.padEnd(36)} ${r.summary}`,
  );
  return [
    "TIME                      SINCE START    STAGE Δ       EVENT                    SOURCE                               DETAIL",
    ...lines,
  ].join("\n");
}

/** A row from outside the event log (a Kubernetes Event fastfence recorded), merged by time. */
export type ExtraRow = Omit<TraceRow, "sinceStartMs" | "stageMs">;

/** The rows and the extra rows in time order, with offsets recomputed over both. */
export function mergeRows(rows: readonly TraceRow[], extra: readonly ExtraRow[]): TraceRow[] {
  const all = [...rows.map(({ sinceStartMs: _s, stageMs: _d, ...r }) => r), ...extra].sort(
    (a, b) => Date.parse(a.time) - Date.parse(b.time),
  );
  if (all.length === 0) return [];
  const t0 = Date.parse(all[0]!.time);
  let prev = t0;
  return all.map((r) => {
    const t = Date.parse(r.time);
    const row: TraceRow = { ...r, sinceStartMs: t - t0, stageMs: t - prev };
    prev = t;
    return row;
  });
}
